// Host helpers for the GPU checks that run the GPU-resident NIC engine
// (hw/cuda/nic_engine.cuh): a key table over GPU regions, an engine QP for an IBGDA device QP,
// the engine's arrays in device memory, and a PE's IBGDA state over queues in device memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/ibgda/dev_state_builder.h"
#include "core/ibgda/state.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/gpu_caps.h"
#include "hw/cuda/nic_engine.cuh"

namespace doorbell::gpu_rig {

struct Region {
  uint64_t base, len;
  uint32_t key;
};

inline constexpr uint32_t kPd = 1;  // every region and QP of the checks is in one PD

// Keys as the NIC model makes them: the region's table index above a variant byte.
constexpr uint32_t key_of(uint32_t index) { return (index << 8) | 0x5a; }

// The engine's key table (indexed by key >> 8, as the NIC model's) for these regions, all
// access rights granted. Their keys must come from key_of(), each index once.
inline std::vector<mock_nic::MemoryRegion> region_table(const std::vector<Region>& regions) {
  std::vector<mock_nic::MemoryRegion> t;
  for (const Region& r : regions) {
    if (t.size() <= (r.key >> 8)) t.resize((r.key >> 8) + 1);
    if (t[r.key >> 8].valid) {
      std::fprintf(stderr, "gpu_rig: two regions share key index %u\n", r.key >> 8);
      std::exit(2);
    }
    t[r.key >> 8] = {r.base, r.len, reinterpret_cast<std::byte*>(r.base), kPd, ~0u, r.key, true, false};
  }
  return t;
}

// The engine's view of an IBGDA QP: its ring, DBR, BlueFlame word and collapsed CQ (of the
// ring's size), connected to the QP at index `peer` of the same engine.
inline cuda_nic::QpDesc engine_qp(const ibgda::DevQp& d, int32_t peer) {
  cuda_nic::QpDesc q;
  q.qpn = d.qpn, q.pd = kPd;
  q.log_sq = uint32_t(__builtin_ctz(d.nwqes));
  q.sq = reinterpret_cast<std::byte*>(d.wq);
  q.dbr = reinterpret_cast<mlx5::QpDoorbellRecord*>(d.dbr);
  q.bf = d.bf;
  q.cq = const_cast<mlx5::Cqe64*>(d.cqe);
  q.log_cq = q.log_sq;
  q.collapsed = true;
  q.peer = peer;
  return q;
}

// An engine over `qps` with key table `table` (states from `st`, fresh when empty), served
// by `nengines` CTAs.
inline cuda_nic::Engine make_engine(const std::vector<cuda_nic::QpDesc>& qps, const std::vector<mock_nic::MemoryRegion>& table,
                                    uint32_t nengines, std::vector<cuda_nic::QpState> st = {}) {
  if (st.empty()) st.resize(qps.size());
  cuda_nic::Engine e;
  e.qps = dcopy(qps);
  e.st = dcopy(st);
  e.nqps = uint32_t(qps.size());
  e.nengines = nengines;
  e.mrs = dcopy(table);
  e.nmrs = uint32_t(table.size());
  e.executed = dalloc<unsigned long long>(1);
  e.errors = dalloc<unsigned long long>(1);
  return e;
}

// ... with the key table of `regions` (region_table).
inline cuda_nic::Engine make_engine(const std::vector<cuda_nic::QpDesc>& qps, const std::vector<Region>& regions,
                                    uint32_t nengines, std::vector<cuda_nic::QpState> st = {}) {
  return make_engine(qps, region_table(regions), nengines, std::move(st));
}

// Heap chunk c of PE p's key: one region per chunk, registered on the engine's one NIC.
constexpr uint32_t heap_key(uint32_t pe, uint32_t chunk) { return key_of(0x10 + pe * 16 + chunk); }

// PE p of `npes`, its heap at bases[p] (chunks of `chunk` bytes up to heap_bytes, every PE's
// registered as regions): one RC QP per peer (QP-major), and with `backups` a second set,
// each QP's ring, DBR, BlueFlame word, collapsed CQ (invalid until written), management
// words, ibuf and (with `health`) failover's health words in device memory. `qps` gets the
// device QPs (mains by peer, then backups) for engine_qp; `state` is the DevState in device
// memory's terms.
struct PeQueues {
  std::vector<ibgda::DevQp> qps;
  ibgda::Mvars* mvars = nullptr;
  ibgda::QpHealth* health = nullptr;
  ibgda::DevState state;
};
inline PeQueues pe_queues(uint32_t p, uint32_t npes, bool backups, bool health, const std::vector<uint64_t>& bases,
                          uint64_t heap_bytes, uint64_t chunk, uint32_t log_depth, uint32_t ibuf_slots, std::vector<Region>& regions) {
  const uint32_t nqp = npes * (backups ? 2 : 1), depth = 1u << log_depth;
  const uint64_t ibuf_bytes = uint64_t(ibuf_slots + 1) * ibgda::kIbufSlotBytes;
  uint8_t* wq = dalloc<uint8_t>(size_t(nqp) * depth * 64);
  uint64_t* dbr = dalloc<uint64_t>(nqp * 8);
  uint8_t* cq = dalloc<uint8_t>(nqp * 64, 0xff);
  uint64_t* bf = dalloc<uint64_t>(nqp * 8);  // a BlueFlame word per QP: the engine hears each QP's doorbells
  uint8_t* ibuf = dalloc<uint8_t>(size_t(nqp) * ibuf_bytes);
  PeQueues out;
  out.mvars = dalloc<ibgda::Mvars>(nqp);
  out.health = health ? dalloc<ibgda::QpHealth>(nqp) : nullptr;
  ibgda::DevStateBuilder b({p, npes, 1, 1, ibgda::QpLayout::kQpMajor, log_depth, ibuf_slots, chunk, backups});
  for (uint32_t q = 0; q < nqp; ++q) {
    ibgda::QpRing r;
    r.qpn = 0x100 + p * 16 + q;
    r.wq = wq + size_t(q) * depth * 64;
    r.dbr = dbr + q * 8;
    r.bf = bf + q * 8;
    r.cqe = reinterpret_cast<const mlx5::Cqe64*>(cq + q * 64);
    r.mv = out.mvars + q;
    r.ibuf = ibuf + q * ibuf_bytes;
    r.ibuf_lkey = key_of(0x90 + p * 64 + q);
    r.hp = health ? out.health + q : nullptr;
    regions.push_back({reinterpret_cast<uint64_t>(r.ibuf), ibuf_bytes, r.ibuf_lkey});
    out.qps.push_back(b.set_qp(q >= npes, 0, q % npes, r));
  }
  for (uint32_t c = 0; c < heap_bytes / chunk; ++c) {
    std::vector<ibgda::ChunkReg> regs(npes);
    for (uint32_t q = 0; q < npes; ++q) regs[q].addr = bases[q] + c * chunk, regs[q].keys[0] = heap_key(q, c);
    b.set_chunk(c, regs.data(), chunk);
    regions.push_back({bases[p] + c * chunk, chunk, heap_key(p, c)});
  }
  out.state = b.placed([](const auto& v) { return dcopy(v); });
  out.state.group_switches = dalloc<uint64_t>(ibgda::kQpPools);
  out.state.opt.nic_buf_on_gpumem = true;  // rings and DBRs are GPU memory
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  out.state.opt.may_skip_cst = cuda_exec::gpu_direct_writes_ordered(dev);  // CSTs only where the GPU needs them
  return out;
}

}  // namespace doorbell::gpu_rig
