// Assembles one PE's DevState: its shape, a DevQp per QP in the layout's order over queues the
// caller made, the heap's key tables (constant entries, then the global ones) and, with
// failover, the backup set. The model world (sim/ibgda), the GPU checks and the post benchmark
// build theirs here; the memory the queues and words live in stays theirs. Host code.
#pragma once

#include <cstdint>
#include <vector>

#include "core/heap/keys.h"
#include "core/ibgda/qp_select.h"
#include "core/ibgda/state.h"

namespace doorbell::ibgda {

// Where one QP's queues and words live, and the NIC it is on.
struct QpRing {
  uint32_t qpn = 0, dev = 0;
  uint8_t* wq = nullptr;
  uint64_t* dbr = nullptr;
  uint64_t* bf = nullptr;  // the BlueFlame register the doorbell is stored to
  const mlx5::Cqe64* cqe = nullptr;
  Mvars* mv = nullptr;
  uint8_t* ibuf = nullptr;
  uint32_t ibuf_lkey = 0;
  QpHealth* hp = nullptr;  // failover's health words (none without failover)
  bool dci = false;        // a DC initiator (its WQEs carry the target's DcTarget)
};

// One PE's registration of a heap chunk: its address there and its key on each NIC.
struct ChunkReg {
  uint64_t addr = 0;
  uint32_t keys[kMaxNics] = {};
};

struct StateShape {
  uint32_t my_pe = 0, npes = 1, num_rc_per_pe = 1, num_devices = 1;
  QpLayout layout = QpLayout::kQpMajor;
  uint32_t log_depth = 0;    // WQEBBs per send queue, log2
  uint32_t ibuf_slots = 0;
  uint64_t granularity = 0;  // heap chunk bytes, a power of two
  bool backups = false;      // failover: a backup QP per main QP
};

class DevStateBuilder {
 public:
  explicit DevStateBuilder(const StateShape& s) {
    st_.my_pe = s.my_pe;
    st_.npes = s.npes;
    st_.num_rc_per_pe = s.num_rc_per_pe;
    st_.num_devices = s.num_devices;
    st_.layout = s.layout;
    st_.keys.npes = s.npes;
    st_.keys.ndevs = s.num_devices;
    while ((uint64_t(1) << st_.keys.log2_granularity) < s.granularity) ++st_.keys.log2_granularity;
    depth_ = 1u << s.log_depth;
    ibuf_slots_ = s.ibuf_slots;
    qps_.resize(qps_per_set(st_));
    st_.qps = qps_.data();
    if (s.backups) {
      backups_.resize(qps_.size());
      st_.backups = backups_.data();
    }
  }
  DevStateBuilder(const DevStateBuilder&) = delete;  // the state points into the builder
  DevStateBuilder& operator=(const DevStateBuilder&) = delete;

  // The layout slot of group member `g`'s QP to `peer` (qp_select.h).
  uint32_t slot(uint32_t g, uint32_t peer) const { return qp_slot(st_, g, peer); }

  // Group member `g`'s QP to `peer` (of the backup set, or the main one) is `r`.
  DevQp& set_qp(bool backup, uint32_t g, uint32_t peer, const QpRing& r) {
    DevQp& d = (backup ? backups_ : qps_)[slot(g, peer)];
    d.qpn = r.qpn;
    d.pe = peer;
    d.dev = r.dev;
    d.nwqes = depth_;
    d.wq = r.wq;
    d.dbr = r.dbr;
    d.bf = r.bf;
    d.cqe = r.cqe;
    d.mv = r.mv;
    d.ibuf = r.ibuf;
    d.ibuf_lkey = r.ibuf_lkey;
    d.ibuf_nslots = ibuf_slots_;
    d.hp = r.hp;
    d.dci = r.dci;
    return d;
  }

  // Heap chunk `chunk` of `bytes` is registered as regs[pe] on every PE: this PE's lkey per
  // NIC, and every PE's rkey per NIC, each with the end of its chunk.
  void set_chunk(uint32_t chunk, const ChunkReg* regs, uint64_t bytes) {
    heap::KeyTables& t = st_.keys;
    for (uint32_t d = 0; d < t.ndevs; ++d) {
      const ChunkReg& mine = regs[st_.my_pe];
      set_key(t.lkeys_const, lglobal_, t.lkeys_global, heap::lkey_index(t, chunk, d), {mine.keys[d], mine.addr + bytes});
      for (uint32_t q = 0; q < t.npes; ++q)
        set_key(t.rkeys_const, rglobal_, t.rkeys_global, heap::rkey_index(t, chunk, q, d), {regs[q].keys[d], regs[q].addr + bytes});
    }
    if (chunk + 1 > t.nchunks) t.nchunks = chunk + 1;
  }

  // The state, its arrays this builder's (host memory): valid while the builder lives. The
  // words it does not assemble (group_switches, error, heap_bases, opt, failover's logs) are
  // the caller's to set.
  DevState& state() { return st_; }
  std::vector<DevQp>& qps(bool backup) { return backup ? backups_ : qps_; }

  // A copy of the state whose arrays `place` puts where its reader finds them:
  // place(const std::vector<T>&) -> T* (a GPU's: copied to device memory).
  template <class Place>
  DevState placed(Place&& place) const {
    DevState s = st_;
    s.qps = place(qps_);
    if (!backups_.empty()) s.backups = place(backups_);
    if (!lglobal_.empty()) s.keys.lkeys_global = place(lglobal_);
    if (!rglobal_.empty()) s.keys.rkeys_global = place(rglobal_);
    return s;
  }

 private:
  // Entry i of a table: the constant array's below kConstKeys, the global vector's above.
  static void set_key(heap::KeyEntry* constant, std::vector<heap::KeyEntry>& global, heap::KeyEntry*& global_ptr, uint32_t i,
                      heap::KeyEntry e) {
    if (i < heap::KeyTables::kConstKeys) {
      constant[i] = e;
      return;
    }
    if (global.size() <= i - heap::KeyTables::kConstKeys) global.resize(i - heap::KeyTables::kConstKeys + 1);
    global[i - heap::KeyTables::kConstKeys] = e;
    global_ptr = global.data();
  }

  DevState st_;
  std::vector<DevQp> qps_, backups_;
  std::vector<heap::KeyEntry> lglobal_, rglobal_;
  uint32_t depth_ = 0, ibuf_slots_ = 0;
};

}  // namespace doorbell::ibgda
