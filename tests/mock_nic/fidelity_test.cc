// Behaviours where the NIC model must act like a ConnectX, not merely be self-consistent:
// CQ overrun without `oi`, retry and RNR timers, the responder's QP after an error it saw,
// the root-cause record, byte order of 4-byte atomic results, atomic_mode, the requester
// CQE's opcode, and the QP state machine. Each of these tests failed on the model before
// it learned the behaviour.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;
constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

bool has_event(const Nic& n, AsyncEvent::Kind k, uint32_t object) {
  for (const AsyncEvent& e : n.events())
    if (e.kind == k && e.object == object) return true;
  return false;
}

TEST(CqOverrun, CollapsedCqWithoutOiGoesFatalAfterItsSize) {
  Rig rig;
  // A 4-CQE collapsed CQ without `oi`, whose consumer index nobody advances.
  SendQueue a = rig.make_sq(0, 6, 2, true, {}, /*oi=*/0), b = rig.make_sq();
  rig.connect(a, b);
  for (int i = 0; i < 6; ++i) a.nop(kCtrlCqUpdate);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const Cq* cq = rig.nic().cq(a.cqn);
  EXPECT_TRUE(cq->overrun);
  EXPECT_EQ(cq->cqes_written, 4u);
  EXPECT_EQ(rig.nic().qp(a.qpn)->state, QpState::kErr);
  EXPECT_TRUE(has_event(rig.nic(), AsyncEvent::kCqError, a.cqn));
  EXPECT_TRUE(has_event(rig.nic(), AsyncEvent::kQpFatal, a.qpn));
  ASSERT_FALSE(rig.nic().errors().empty());
  EXPECT_EQ(rig.nic().errors()[0].vendor, vendor::kCqOverrun);

  // With `oi` (what the driver sets for IBGDA's send CQs) the same stream runs on.
  Rig ok;
  SendQueue c = ok.make_sq(0, 6, 2, true, {}, /*oi=*/1), d = ok.make_sq();
  ok.connect(c, d);
  for (int i = 0; i < 6; ++i) c.nop(kCtrlCqUpdate);
  c.ring_doorbell();
  ASSERT_TRUE(ok.run());
  EXPECT_FALSE(ok.nic().cq(c.cqn)->overrun);
  EXPECT_EQ(ok.nic().qp(c.qpn)->state, QpState::kRts);
}

struct Pair {
  Rig rig{2};
  SendQueue a, b;
  uint64_t src = 0, dst = 0;
  uint32_t sk = 0, dk = 0;
  Pair() {
    a = rig.make_sq(0);
    b = rig.make_sq(1);
    rig.connect(a, b);
    src = rig.alloc(4096, 0x3c), dst = rig.alloc(4096, 0);
    sk = rig.reg(src, 4096, kAll, 0), dk = rig.reg(dst, 4096, kAll, 1);
  }
  const ErrCqe64* err() { return reinterpret_cast<const ErrCqe64*>(a.poll()); }
};

TEST(RetryTimer, UnansweredRequestFailsAfterRetryCountTimesAckTimeout) {
  Pair p;
  ASSERT_TRUE(p.rig.nic(1).modify_qp(p.b.qpn, QpState::kErr).is_ok());  // the responder drops everything
  p.a.write(p.sk, p.src, 8, p.dk, p.dst);
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const ErrCqe64* e = p.err();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kTransportRetryExcErr));
  EXPECT_EQ(e->vendor_err_synd, vendor::kRetryTimeout);
  // retry_count 7 x 4.096 us x 2^14 (the driver's values): about 0.47 s on the NIC's clock.
  ASSERT_EQ(p.rig.nic(0).errors().size(), 1u);
  EXPECT_NEAR(p.rig.nic(0).errors()[0].when_ns, 7 * 4096.0 * 16384, 1e4);
  EXPECT_EQ(*p.rig.mem.translate(p.dst, 1), std::byte{0});
}

TEST(RetryTimer, LinkDownShorterThanTheTimeoutIsRidOut) {
  Pair p;
  p.rig.nic(1).set_link_down(0, 200e6);  // the peer's port is down for 0.2 s
  p.a.write(p.sk, p.src, 8, p.dk, p.dst);
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const Cqe64* c = p.a.poll();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->opcode(), uint8_t(mlx5::CqeOpcode::kReq));
  EXPECT_EQ(*p.rig.mem.translate(p.dst, 1), std::byte{0x3c});
  EXPECT_GE(p.rig.nic(0).clock_ns(), 200e6);
  // Down longer than the timeout: RETRY_EXC, and the write never lands.
  Pair q;
  q.rig.nic(1).set_link_down(0, 1e9);
  q.a.write(q.sk, q.src, 8, q.dk, q.dst);
  q.a.ring_doorbell();
  ASSERT_TRUE(q.rig.run());
  const ErrCqe64* e = q.err();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kTransportRetryExcErr));
  EXPECT_EQ(*q.rig.mem.translate(q.dst, 1), std::byte{0});
}

TEST(RetryTimer, DeadPeerIsRetryExceededAfterTheTimeout) {
  Pair p;
  p.rig.nic(1).set_dead();
  p.a.read(p.sk, p.src, 8, p.dk, p.dst);
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const ErrCqe64* e = p.err();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kTransportRetryExcErr));
}

TEST(RnrTimer, RnrRetrySevenWaitsForeverAndAPostedReceiveEndsTheWait) {
  Rig r;
  auto [x, y, srqn, recv_cq] = r.make_receiving_pair();
  auto buf = r.alloc(4096);
  auto k = r.reg(buf, 4096, kAll);
  x.rdma(WqeOpcode::kRdmaWriteImm, k, buf, 16, k, buf + 1024, kCtrlCqUpdate, 1);
  x.ring_doorbell();
  for (int i = 0; i < 1000; ++i) r.fabric.progress();
  EXPECT_EQ(x.poll(), nullptr);  // rnr_retry 7 (the driver's value): no error, ever
  EXPECT_EQ(r.nic().qp(x.qpn)->state, QpState::kRts);
  EXPECT_NE(r.nic().waiting().find("retries forever"), std::string::npos) << r.nic().waiting();
  r.post_receives(srqn, 1);  // the responder posts a receive: the next retry gets through
  ASSERT_TRUE(r.run());
  const Cqe64* c = x.poll();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->opcode(), uint8_t(mlx5::CqeOpcode::kReq));
}

// A finite rnr_retry: the requester gives up after rnr_retry waits of the *responder's*
// min_rnr_nak (code 20: 10.24 ms), not of its own (code 12, the default: 0.64 ms).
TEST(RnrTimer, FiniteRnrRetryWaitsTheResponderMinRnrNakEachTime) {
  Rig r;
  auto [x, y, srqn, recv_cq] = r.make_receiving_pair();
  QpTimers requester, responder;
  requester.rnr_retry = 3;
  responder.min_rnr_nak = 20;
  ASSERT_TRUE(r.nic().set_qp_timers(x.qpn, requester).is_ok());
  ASSERT_TRUE(r.nic().set_qp_timers(y.qpn, responder).is_ok());
  auto buf = r.alloc(4096);
  auto k = r.reg(buf, 4096, kAll);
  x.rdma(WqeOpcode::kRdmaWriteImm, k, buf, 16, k, buf + 1024, kCtrlCqUpdate, 1);  // no receive posted
  x.ring_doorbell();
  ASSERT_TRUE(r.run());
  const auto* e = reinterpret_cast<const ErrCqe64*>(x.poll());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kRnrRetryExcErr));
  EXPECT_EQ(e->vendor_err_synd, vendor::kRnrTimeout);
  ASSERT_EQ(r.nic().errors().size(), 1u);
  EXPECT_NEAR(r.nic().errors()[0].when_ns, 3 * rnr_nak_ns(20), 1e4);
}

TEST(Responder, AccessErrorMovesTheResponderQpToErrWithAnEvent) {
  Pair p;
  p.a.write(p.sk, p.src, 8, p.dk ^ 0x80, p.dst);  // an rkey that does not exist
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const ErrCqe64* e = p.err();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kRemoteAccessErr));
  EXPECT_EQ(p.rig.nic(1).qp(p.b.qpn)->state, QpState::kErr);
  EXPECT_TRUE(has_event(p.rig.nic(1), AsyncEvent::kQpAccessError, p.b.qpn));
}

TEST(Responder, InvalidRequestMovesTheResponderQpToErrWithAnEvent) {
  Pair p;
  p.a.atomic(WqeOpcode::kAtomicFa, 1, 0, p.sk, p.src, p.dk, p.dst + 4);  // misaligned
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const ErrCqe64* e = p.err();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(mlx5::CqeSyndrome::kRemoteInvalReqErr));
  EXPECT_EQ(p.rig.nic(1).qp(p.b.qpn)->state, QpState::kErr);
  EXPECT_TRUE(has_event(p.rig.nic(1), AsyncEvent::kQpRequestError, p.b.qpn));
}

TEST(RootCause, TheNicKeepsTheFirstFailureThatFlushesOverwrite) {
  Rig rig(2);
  SendQueue a = rig.make_sq(0, 6, 0, true), b = rig.make_sq(1);
  rig.connect(a, b);
  auto s = rig.alloc(4096, 1), d = rig.alloc(4096);
  auto sk = rig.reg(s, 4096, kAll, 0), dk = rig.reg(d, 4096, kAll, 1);
  a.write(sk, s, 8, dk, d, 0);
  const uint64_t bad = a.write(sk, s, 8, dk ^ 0x80, d, 0);
  for (int i = 0; i < 5; ++i) a.write(sk, s, 8, dk, d, kCtrlCqUpdate);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  // Slot 0 of the collapsed CQ ends with the last flush; the NIC's record has the cause.
  const auto* last = reinterpret_cast<const ErrCqe64*>(a.cqes());
  EXPECT_EQ(last->syndrome, uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
  ASSERT_EQ(rig.nic(0).errors().size(), 1u);
  const ErrorRecord& r = rig.nic(0).errors()[0];
  EXPECT_EQ(r.qpn, a.qpn);
  EXPECT_EQ(r.wqe_idx, bad);
  EXPECT_EQ(r.syndrome, uint8_t(mlx5::CqeSyndrome::kRemoteAccessErr));
  EXPECT_EQ(r.wqe_opcode, uint8_t(WqeOpcode::kRdmaWrite));
}

TEST(AtomicMode, ExtendedAtomicsNeedTheResponderAtomicModeThree) {
  for (uint8_t mode : {0, 3}) {
    Pair p;
    ASSERT_TRUE(p.rig.nic(1).set_qp_atomic_mode(p.b.qpn, mode).is_ok());
    SendQueue::Wqe w = p.a.begin(WqeOpcode::kAtomicMaskedFa, kCtrlCqUpdate, ext_atomic_opmod(8));
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), p.dst, p.dk);
    w.seg<WqeMaskedFa64Seg>(2)->add.set(1);
    w.seg<WqeMaskedFa64Seg>(2)->field_boundary.set(0);
    set_data_seg(w.seg<WqeDataSeg>(3), 8, p.sk, p.src);
    w.ds = 4;
    p.a.finish(w);
    p.a.ring_doorbell();
    ASSERT_TRUE(p.rig.run());
    const auto* c = reinterpret_cast<const ErrCqe64*>(p.a.poll());
    ASSERT_NE(c, nullptr);
    if (mode == 0) {
      EXPECT_EQ(c->syndrome, uint8_t(mlx5::CqeSyndrome::kRemoteInvalReqErr));
      EXPECT_EQ(c->vendor_err_synd, vendor::kExtAtomicMode);
    } else {
      EXPECT_EQ(c->op_own >> 4, uint8_t(mlx5::CqeOpcode::kReq));
      EXPECT_EQ(*p.rig.mem.as<uint64_t>(p.dst), 1u);
    }
  }
}

TEST(RequesterCqe, CarriesTheWqeOpcode) {
  Pair p;
  p.a.write(p.sk, p.src, 8, p.dk, p.dst);
  p.a.read(p.sk, p.src, 8, p.dk, p.dst);
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  const Cqe64* w = p.a.poll();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->wqe_opcode(), uint8_t(WqeOpcode::kRdmaWrite));
  const Cqe64* r = p.a.poll();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->wqe_opcode(), uint8_t(WqeOpcode::kRdmaRead));
}

TEST(QpStateMachine, ResetToErrorIsRefused) {
  Rig rig;
  SendQueue a = rig.make_sq();
  EXPECT_FALSE(rig.nic().modify_qp(a.qpn, QpState::kErr).is_ok());
  ASSERT_TRUE(rig.nic().modify_qp(a.qpn, QpState::kInit).is_ok());
  EXPECT_TRUE(rig.nic().modify_qp(a.qpn, QpState::kErr).is_ok());
}

}  // namespace
}  // namespace doorbell::testing
