// A minimal host driver for the NIC model (tests, demo, benchmarks): creates CQs and
// connected RC QPs through the model's C++ API, writes WQEs into the send ring (wrapping
// like a driver does), rings doorbells (DBR, then BlueFlame), polls CQs by the owner bit.
// Set-up failures throw std::runtime_error with the model's message.
#pragma once

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <memory>
#include <vector>

#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/nic.h"

namespace doorbell::mock_nic::driver {

inline void check(const Status& st) {
  if (!st) throw std::runtime_error(st.to_string());
}
template <class T>
T check(Result<T> r) {
  check(r.status());
  return std::move(r).value();
}


using namespace doorbell::mlx5;

// One send queue: its QP, CQ, ring and doorbell record, and a driver-side producer index.
struct SendQueue {
  Nic* nic = nullptr;
  mem::AddressSpace* mem = nullptr;
  uint32_t pd = 0, qpn = 0, cqn = 0, uar = 0;
  uint32_t log_sq = 6, log_cq = 6;
  bool collapsed = false;
  uint64_t sq_va = 0, dbr_va = 0, cq_va = 0, cq_dbr_va = 0;
  uint64_t pi = 0;  // next WQEBB to write
  uint64_t ci = 0;  // next CQE to poll (normal CQs)
  uint64_t last_doorbell = 0;

  std::byte* ring() const { return mem->translate(sq_va, uint64_t(kWqebb) << log_sq); }
  QpDoorbellRecord* dbr() const { return mem->as<QpDoorbellRecord>(dbr_va); }
  Cqe64* cqes() const { return reinterpret_cast<Cqe64*>(mem->translate(cq_va, uint64_t(64) << log_cq)); }

  // Copy a WQE of `ds` octowords to the ring at pi (wrapping); returns its index.
  uint64_t post_raw(const void* wqe, uint32_t ds) {
    const uint64_t idx = pi;
    const uint64_t ring_bytes = uint64_t(kWqebb) << log_sq;
    const uint64_t off = (idx * kWqebb) % ring_bytes;
    const uint64_t n = uint64_t(ds) * kDsBytes;
    const uint64_t first = std::min(n, ring_bytes - off);
    std::memcpy(ring() + off, wqe, first);
    std::memcpy(ring(), static_cast<const std::byte*>(wqe) + first, n - first);
    last_doorbell = doorbell_word(*static_cast<const WqeCtrlSeg*>(wqe));
    pi += wqebbs_for_ds(ds);
    return idx;
  }

  struct Wqe {
    alignas(16) std::byte b[kMaxDs * kDsBytes] = {};
    uint32_t ds = 1;
    template <class T>
    T* seg(uint32_t i) { return reinterpret_cast<T*>(b + 16 * i); }
    WqeCtrlSeg* ctrl() { return seg<WqeCtrlSeg>(0); }
  };

  Wqe begin(WqeOpcode op, uint8_t flags, uint8_t opmod = 0, uint32_t imm = 0) {
    Wqe w;
    set_ctrl_seg(w.ctrl(), uint16_t(pi), op, opmod, qpn, flags, 1, imm);
    return w;
  }
  uint64_t finish(Wqe& w) {
    w.ctrl()->qpn_ds.set((qpn << 8) | w.ds);
    return post_raw(w.b, w.ds);
  }

  uint64_t nop(uint8_t flags = kCtrlCqUpdate) {
    Wqe w = begin(WqeOpcode::kNop, flags);
    return finish(w);
  }
  uint64_t rdma(WqeOpcode op, uint32_t lkey, uint64_t laddr, uint32_t len, uint32_t rkey, uint64_t raddr,
                uint8_t flags = kCtrlCqUpdate, uint32_t imm = 0) {
    Wqe w = begin(op, flags, 0, imm);
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), raddr, rkey);
    set_data_seg(w.seg<WqeDataSeg>(2), len, lkey, laddr);
    w.ds = 3;
    return finish(w);
  }
  uint64_t write(uint32_t lkey, uint64_t laddr, uint32_t len, uint32_t rkey, uint64_t raddr, uint8_t flags = kCtrlCqUpdate) {
    return rdma(WqeOpcode::kRdmaWrite, lkey, laddr, len, rkey, raddr, flags);
  }
  uint64_t read(uint32_t lkey, uint64_t laddr, uint32_t len, uint32_t rkey, uint64_t raddr, uint8_t flags = kCtrlCqUpdate) {
    return rdma(WqeOpcode::kRdmaRead, lkey, laddr, len, rkey, raddr, flags);
  }
  uint64_t write_inline(const void* data, uint32_t len, uint32_t rkey, uint64_t raddr, uint8_t flags = kCtrlCqUpdate) {
    Wqe w = begin(WqeOpcode::kRdmaWrite, flags);
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), raddr, rkey);
    uint32_t segs = set_inline_seg(w.seg<WqeInlineSeg>(2), len);
    std::memcpy(w.b + 32 + 4, data, len);
    w.ds = 2 + segs;
    return finish(w);
  }
  uint64_t atomic(WqeOpcode op, uint64_t swap_add, uint64_t compare, uint32_t lkey, uint64_t laddr, uint32_t rkey,
                  uint64_t raddr, uint8_t flags = kCtrlCqUpdate) {
    Wqe w = begin(op, flags);
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), raddr, rkey);
    set_atomic_seg(w.seg<WqeAtomicSeg>(2), swap_add, compare);
    set_data_seg(w.seg<WqeDataSeg>(3), 8, lkey, laddr);
    w.ds = 4;
    return finish(w);
  }

  // Publish producer index `upto` (every WQE built, by default) in the DBR, then ring the
  // BlueFlame register.
  void ring_doorbell() { ring_doorbell(pi); }
  void ring_doorbell(uint64_t upto) {
    dbr()->snd.set(uint32_t(upto & 0xffff));
    nic->uar_write64(uar, kBfOffset, last_doorbell);
  }

  // Next CQE of a normal CQ, or nullptr if software does not own one yet.
  const Cqe64* poll() {
    const uint32_t n = 1u << log_cq;
    Cqe64* c = cqes() + (ci & (n - 1));
    if (c->opcode() == uint8_t(CqeOpcode::kInvalid) || c->owner() != cqe_owner_for(ci, log_cq)) return nullptr;
    ++ci;
    mem->as<CqDoorbellRecord>(cq_dbr_va)->set_ci.set(uint32_t(ci & 0xffffff));
    return c;
  }
};

// A NIC model plus memory, with helpers to create send queues and registered buffers.
struct Rig {
  mem::AddressSpace mem;
  std::vector<std::unique_ptr<Nic>> nics;
  Fabric fabric;
  uint32_t pd = 0;

  // NICs get LIDs cfg.lid, cfg.lid + 1, ... (1.. by default).
  explicit Rig(int n_nics = 1, NicConfig cfg = {}) {
    const uint16_t first = cfg.lid;
    for (int i = 0; i < n_nics; ++i) {
      cfg.lid = uint16_t(first + i);
      nics.push_back(std::make_unique<Nic>(mem, cfg));
      check(fabric.attach(*nics.back()));
    }
    pd = nics[0]->alloc_pd();
  }
  Nic& nic(int i = 0) { return *nics[size_t(i)]; }

  uint64_t alloc(uint64_t size, uint8_t fill = 0) {
    const uint64_t va = check(mem.alloc(size, mem::MemKind::kGpu));
    std::memset(mem.translate(va, size), fill, size);
    return va;
  }
  uint32_t reg(uint64_t va, uint64_t len, uint32_t access, int n = 0, uint32_t pd_override = 0) {
    return check(nic(n).reg_mr(pd_override ? pd_override : pd, va, len, access));
  }

  // A collapsed CQ gets `oi` (overrun ignore) unless `oi` says otherwise (0 / 1).
  SendQueue make_sq(int n = 0, uint32_t log_sq = 6, uint32_t log_cq = 6, bool collapsed = false, uint32_t recv_cqn = 0,
                    uint32_t log_rq = 0, int oi = -1) {
    SendQueue q;
    q.nic = &nic(n);
    q.mem = &mem;
    q.pd = pd;
    q.log_sq = log_sq;
    q.log_cq = log_cq;
    q.collapsed = collapsed;
    q.cq_va = alloc(uint64_t(64) << log_cq, 0xff);  // invalid owner everywhere, as drivers do
    q.cq_dbr_va = alloc(8);
    q.sq_va = alloc(uint64_t(kWqebb) << log_sq);
    q.dbr_va = alloc(8);
    q.uar = q.nic->alloc_uar();
    q.cqn = check(q.nic->create_cq({log_cq, q.cq_va, q.cq_dbr_va, collapsed, oi < 0 ? collapsed : oi != 0}));
    QpAttr a;
    a.pd = pd;
    a.send_cqn = q.cqn;
    a.recv_cqn = recv_cqn;
    a.log_sq_size = log_sq;
    a.log_rq_size = log_rq;
    a.sq_va = q.sq_va;
    a.dbr_va = q.dbr_va;
    a.uar_page = q.uar;
    q.qpn = check(q.nic->create_qp(a));
    return q;
  }

  // A requester in RTS with a responder that has 2^log_rq receive WQEs (counted through its
  // DBR) completing on their own CQ at recv_cq_va: WRITE_IMM and RNR tests.
  struct ReceivingPair {
    SendQueue requester, responder;
    uint64_t recv_cq_va;
  };
  ReceivingPair make_receiving_pair(uint32_t log_rq = 4) {
    const uint64_t rcq_va = alloc(64 * 64, 0xff), rcq_dbr = alloc(8);
    const uint32_t rcqn = check(nic().create_cq({6, rcq_va, rcq_dbr, false}));
    ReceivingPair p{make_sq(), make_sq(0, 6, 6, false, rcqn, log_rq), rcq_va};
    connect(p.requester, p.responder);
    return p;
  }

  // Bring two QPs to RTS connected to each other.
  void connect(SendQueue& a, SendQueue& b) {
    for (SendQueue* q : {&a, &b}) check(q->nic->modify_qp(q->qpn, QpState::kInit));
    QpPeer pa{b.nic->lid(), b.qpn}, pb{a.nic->lid(), a.qpn};
    check(a.nic->modify_qp(a.qpn, QpState::kRtr, &pa));
    check(b.nic->modify_qp(b.qpn, QpState::kRtr, &pb));
    for (SendQueue* q : {&a, &b}) check(q->nic->modify_qp(q->qpn, QpState::kRts));
  }

  // Bring a QP to RTS connected to QP `qpn` of the NIC with LID `lid` (in another process).
  void connect_to(SendQueue& a, uint16_t lid, uint32_t qpn) {
    check(a.nic->modify_qp(a.qpn, QpState::kInit));
    QpPeer p{lid, qpn};
    check(a.nic->modify_qp(a.qpn, QpState::kRtr, &p));
    check(a.nic->modify_qp(a.qpn, QpState::kRts));
  }

  bool run() { return fabric.run_until_idle(); }
};

}  // namespace doorbell::mock_nic::driver
