// A minimal host driver on the NIC model (its own tests, mock_nic_bench, engine_fuzz,
// gpu/dma_check): every NIC is opened through the DEVX seam (ModelDevx) and set up with the
// mlx5 DEVX driver's PRM commands, as a host sets up a real device; WQEs are written into the
// send ring (wrapping like a driver does), doorbells rung as a host does (DBR, then the
// BlueFlame register's address), CQs polled by the owner bit. Fault hooks and model state
// stay reachable through nic(i): the tests' harness reach. Set-up failures throw
// std::runtime_error with the device's message.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mlx5_devx/driver.h"
#include "hw/mock_nic/devx/model_devx.h"
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
  uint32_t pd = 0, qpn = 0, cqn = 0, uar = 0;  // uar: the UAR page the QP names
  uint64_t bf_addr = 0;                          // its BlueFlame register
  devx::Obj qp{};                                // the QP as its DEVX context knows it
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

  // A DCI's RDMA WRITE / READ to DCT `dctn` of the NIC with LID `lid`, with DC key `key`:
  // ctrl, a half address vector, raddr, data (ds 4).
  uint64_t dc_rdma(WqeOpcode op, uint16_t lid, uint32_t dctn, uint64_t key, uint32_t lkey, uint64_t laddr, uint32_t len, uint32_t rkey,
                   uint64_t raddr, uint8_t flags = kCtrlCqUpdate) {
    Wqe w = begin(op, flags);
    set_half_av_seg(w.seg<WqeAvSeg>(1), key, dctn, lid);
    set_raddr_seg(w.seg<WqeRaddrSeg>(2), raddr, rkey);
    set_data_seg(w.seg<WqeDataSeg>(3), len, lkey, laddr);
    w.ds = 4;
    return finish(w);
  }
  // A DCI's 8-byte fetch-add through DCT `dctn` (ds 5: ctrl, AV, raddr, atomic, data).
  uint64_t dc_fetch_add(uint16_t lid, uint32_t dctn, uint64_t key, uint64_t add, uint32_t lkey, uint64_t laddr, uint32_t rkey, uint64_t raddr) {
    Wqe w = begin(WqeOpcode::kAtomicFa, kCtrlCqUpdate);
    set_half_av_seg(w.seg<WqeAvSeg>(1), key, dctn, lid);
    set_raddr_seg(w.seg<WqeRaddrSeg>(2), raddr, rkey);
    set_atomic_seg(w.seg<WqeAtomicSeg>(3), add, 0);
    set_data_seg(w.seg<WqeDataSeg>(4), 8, lkey, laddr);
    w.ds = 5;
    return finish(w);
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
    nic->mmio_write64(bf_addr, last_doorbell);
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

// A CQ as a host holds it: its number and where its CQEs and doorbell record are.
struct CqRef {
  uint32_t cqn = 0;
  uint64_t va = 0, dbr_va = 0;
};

// Where a QP's receives come from: none (zero-size receive queue), or an SRQ and its CQ.
struct Receive {
  uint32_t cqn = 0, srqn = 0;
};

// NIC models, each opened as a DEVX context with a PD, on one fabric and one address space;
// helpers create send queues and registered buffers through that context.
struct Rig {
  mem::AddressSpace mem;
  std::vector<std::unique_ptr<Nic>> nics;
  Fabric fabric;
  std::vector<std::unique_ptr<ModelDevx>> contexts;  // declared after nics: destroyed first, with their objects
  std::vector<uint32_t> pds;                         // one per context
  uint32_t pd = 0;                                   // NIC 0's

  // NICs get LIDs cfg.lid, cfg.lid + 1, ... (1.. by default).
  explicit Rig(int n_nics = 1, NicConfig cfg = {}) {
    const uint16_t first = cfg.lid;
    for (int i = 0; i < n_nics; ++i) {
      cfg.lid = uint16_t(first + i);
      nics.push_back(std::make_unique<Nic>(mem, cfg));
      check(fabric.attach(*nics.back()));
      contexts.push_back(std::make_unique<ModelDevx>(*nics.back()));
      pds.push_back(check(contexts.back()->alloc_pd()));
    }
    pd = pds[0];
  }
  Nic& nic(int i = 0) { return *nics[size_t(i)]; }
  ModelDevx& devx(int i = 0) { return *contexts[size_t(i)]; }

  // GPU-tagged memory mapped at its own address, every byte `fill` (from NIC 0's context; the
  // NICs share one address space).
  uint64_t alloc(uint64_t size, uint8_t fill = 0) {
    void* p = check(devx().alloc(size, true));
    std::memset(p, fill, size);
    return reinterpret_cast<uint64_t>(p);
  }
  // A memory region of NIC n's context (in its PD, or pd_override); lkey == rkey.
  uint32_t reg(uint64_t va, uint64_t len, uint32_t access, int n = 0, uint32_t pd_override = 0) {
    return check(devx(n).reg_mr(pd_override ? pd_override : pds[size_t(n)], reinterpret_cast<void*>(va), len, access)).lkey;
  }

  // A normal or collapsed CQ of 2^log CQEs (all invalid) on NIC n.
  // oi: overrun ignore (a collapsed CQ's consumer index never moves).
  CqRef make_cq(int n, uint32_t log, bool collapsed, bool oi, uint32_t uar_page) {
    const uint64_t bytes = uint64_t(64) << log;
    CqRef c;
    c.va = alloc(bytes + 64, 0xff);  // invalid owner everywhere, as drivers do
    c.dbr_va = c.va + bytes;
    std::memset(reinterpret_cast<void*>(c.dbr_va), 0, 64);
    const devx::Umem u = check(devx(n).umem_reg(reinterpret_cast<void*>(c.va), bytes + 64, 0));
    devx::CqSpec s;
    s.log_size = log;
    s.collapsed = collapsed;
    s.overrun_ignore = oi;
    s.buf_umem = s.dbr_umem = u.id;
    s.dbr_offset = bytes;
    s.uar_page = uar_page;
    c.cqn = check(devx::Driver(devx(n)).create_cq(s)).id;
    return c;
  }
  CqRef make_cq(int n = 0, uint32_t log = 6) { return make_cq(n, log, false, false, check(devx(n).alloc_uar()).page_id); }
  // A shared receive queue of NIC n (receives are posted by count: post_receives).
  uint32_t make_srq(int n = 0, uint32_t max_wr = 16) { return check(devx(n).create_srq(pds[size_t(n)], max_wr)).id; }
  void post_receives(uint32_t srqn, uint32_t count, int n = 0) { check(nic(n).post_srq_recv(srqn, count)); }

  // A collapsed CQ gets `oi` (overrun ignore) unless `oi` says otherwise (0 / 1).
  SendQueue make_sq(int n = 0, uint32_t log_sq = 6, uint32_t log_cq = 6, bool collapsed = false, Receive recv = {},
                    int oi = -1, bool dci = false) {
    SendQueue q;
    q.nic = &nic(n);
    q.mem = &mem;
    q.pd = pds[size_t(n)];
    q.log_sq = log_sq;
    q.log_cq = log_cq;
    q.collapsed = collapsed;
    const devx::Uar uar = check(devx(n).alloc_uar());
    q.uar = uar.page_id;
    q.bf_addr = uar.reg_addr;
    const CqRef cq = make_cq(n, log_cq, collapsed, oi < 0 ? collapsed : oi != 0, q.uar);
    q.cqn = cq.cqn, q.cq_va = cq.va, q.cq_dbr_va = cq.dbr_va;
    const uint64_t ring = uint64_t(kWqebb) << log_sq;
    q.sq_va = alloc(ring + 64);  // the ring, then its doorbell record
    q.dbr_va = q.sq_va + ring;
    const devx::Umem u = check(devx(n).umem_reg(reinterpret_cast<void*>(q.sq_va), ring + 64, 0));
    devx::RcQpSpec s;
    s.pdn = q.pd;
    s.log_sq_size = log_sq;
    s.wq_umem = s.dbr_umem = u.id;
    s.dbr_offset = ring;
    s.send_cqn = q.cqn;
    s.recv_cqn = recv.cqn;
    s.srqn = recv.srqn;
    s.uar_page = q.uar;
    s.dci = dci;
    q.qp = check(devx::Driver(devx(n)).create_rc_qp(s));
    q.qpn = q.qp.id;
    return q;
  }

  // A DC initiator of NIC n in RTS: each WQE names its DCT (SendQueue::dc_av).
  SendQueue make_dci(int n = 0, uint32_t log_sq = 6) {
    SendQueue q = make_sq(n, log_sq, 6, false, {}, -1, true);
    devx::Driver d(devx(n));
    check(d.rst2init(q.qp, {}));
    check(d.init2rtr(q.qp, {}));
    check(d.rtr2rts(q.qp, {}));
    return q;
  }
  // A DC target of NIC n with key `key` (its receives from a fresh SRQ and CQ): its number.
  uint32_t make_dct(int n, uint64_t key) {
    devx::DctSpec s;
    s.pdn = pds[size_t(n)];
    s.cqn = make_cq(n).cqn;
    s.srqn = make_srq(n);
    s.dc_key = key;
    return check(devx::Driver(devx(n)).create_dct(s)).id;
  }

  // A requester in RTS with a responder whose receives come from an SRQ of max_wr (none
  // posted yet) and complete on their own CQ: WRITE_IMM and RNR tests.
  struct ReceivingPair {
    SendQueue requester, responder;
    uint32_t srqn;
    CqRef recv_cq;
  };
  ReceivingPair make_receiving_pair(uint32_t max_wr = 16) {
    const CqRef rcq = make_cq();
    const uint32_t srqn = make_srq(0, max_wr);
    ReceivingPair p{make_sq(), make_sq(0, 6, 6, false, {rcq.cqn, srqn}), srqn, rcq};
    connect(p.requester, p.responder);
    return p;
  }

  // Bring two QPs to RTS connected to each other.
  void connect(SendQueue& a, SendQueue& b) {
    connect_to(a, b.nic->lid(), b.qpn);
    connect_to(b, a.nic->lid(), a.qpn);
  }

  // Bring a QP to RTS connected to QP `qpn` of the NIC with LID `lid` (maybe in another
  // process): RST2INIT, INIT2RTR, RTR2RTS as the driver sends them.
  void connect_to(SendQueue& a, uint16_t lid, uint32_t qpn) {
    devx::Driver d(devx(nic_index(a.nic)));
    check(d.rst2init(a.qp, {}));
    devx::RtrSpec r;
    r.remote_qpn = qpn;
    r.dlid = lid;
    check(d.init2rtr(a.qp, r));
    check(d.rtr2rts(a.qp, {}));
  }

  bool run() { return fabric.run_until_idle(); }

 private:
  int nic_index(const Nic* n) const {
    for (size_t i = 0; i < nics.size(); ++i)
      if (nics[i].get() == n) return int(i);
    throw std::runtime_error("rig: a send queue of another rig");
  }
};

}  // namespace doorbell::mock_nic::driver
