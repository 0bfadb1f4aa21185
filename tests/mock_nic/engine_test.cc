// The NIC model executing well-formed WQE streams: every opcode, gather/scatter, inline,
// ring wrap, fences, both CQ kinds, QP pairs within one NIC and across NICs, and a stream
// built entirely with rdma-core's own mlx5dv helpers.
#include "hw/mock_nic/nic.h"

#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <cstring>
#include <vector>
#include <numeric>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using mock_nic::kLocalWrite;
using mock_nic::kRemoteAtomic;
using mock_nic::kRemoteRead;
using mock_nic::kRemoteWrite;
constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

struct Loopback : ::testing::Test {
  Rig rig;
  SendQueue a, b;
  uint64_t src = 0, dst = 0;
  uint32_t skey = 0, dkey = 0;
  void SetUp() override {
    a = rig.make_sq();
    b = rig.make_sq();
    rig.connect(a, b);
    src = rig.alloc(1 << 16);
    dst = rig.alloc(1 << 16);
    auto* s = rig.mem.translate(src, 1 << 16);
    for (int i = 0; i < (1 << 16); ++i) s[i] = std::byte(i * 7 + 3);
    skey = rig.reg(src, 1 << 16, kAll);
    dkey = rig.reg(dst, 1 << 16, kAll);
  }
  std::byte* S(uint64_t off = 0) { return rig.mem.translate(src + off, 1); }
  std::byte* D(uint64_t off = 0) { return rig.mem.translate(dst + off, 1); }
  const Cqe64* expect_cqe(SendQueue& q, uint64_t wqe, CqeOpcode op = CqeOpcode::kReq) {
    const Cqe64* c = q.poll();
    EXPECT_NE(c, nullptr);
    if (c == nullptr) return nullptr;
    EXPECT_EQ(c->opcode(), uint8_t(op));
    EXPECT_EQ(c->wqe_counter.get(), uint16_t(wqe));
    EXPECT_EQ(c->qpn(), q.qpn);
    return c;
  }
};

TEST_F(Loopback, RdmaWriteMovesBytesAndCompletes) {
  const uint64_t w = a.write(skey, src + 100, 64, dkey, dst + 200);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(0, std::memcmp(D(200), S(100), 64));
  EXPECT_EQ(*D(199), std::byte{0});
  EXPECT_EQ(*D(264), std::byte{0});
  const Cqe64* c = expect_cqe(a, w);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->byte_cnt.get(), 64u);
  EXPECT_EQ(a.poll(), nullptr);
}

// Found by fuzz/engine_fuzz: a DBR that ends inside a multi-WQEBB WQE once let the engine's
// head jump past the producer index, and a flushing QP then never went idle.
TEST_F(Loopback, WqeRunsOnlyOnceItsDoorbellCoversItWhole) {
  std::vector<std::byte> data(100, std::byte{0x5a});
  const uint64_t w = a.write_inline(data.data(), 100, dkey, dst);  // 2 + 7 DS: 3 WQEBBs
  ASSERT_EQ(a.pi, 3u);
  a.dbr()->snd.set(1);
  rig.nic().uar_write64(a.uar, kBfOffset, a.last_doorbell);
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(*D(), std::byte{0});
  EXPECT_EQ(a.poll(), nullptr);
  EXPECT_TRUE(rig.nic().idle());
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(*D(99), std::byte{0x5a});
  expect_cqe(a, w);
}

TEST_F(Loopback, UnsignaledWqesProduceNoCqe) {
  a.write(skey, src, 8, dkey, dst, 0);
  a.write(skey, src + 8, 8, dkey, dst + 8, 0);
  const uint64_t last = a.write(skey, src + 16, 8, dkey, dst + 16);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(0, std::memcmp(D(), S(), 24));
  expect_cqe(a, last);
  EXPECT_EQ(a.poll(), nullptr);
}

TEST_F(Loopback, ReadScatterAndGatherWrite) {
  // READ 48 bytes into two local pieces (16 + 32).
  SendQueue::Wqe w = a.begin(WqeOpcode::kRdmaRead, kCtrlCqUpdate);
  set_raddr_seg(w.seg<WqeRaddrSeg>(1), src + 1000, skey);
  set_data_seg(w.seg<WqeDataSeg>(2), 16, dkey, dst + 0);
  set_data_seg(w.seg<WqeDataSeg>(3), 32, dkey, dst + 100);
  w.ds = 4;
  const uint64_t r = a.finish(w);
  // WRITE gathering three pieces into one remote range.
  SendQueue::Wqe g = a.begin(WqeOpcode::kRdmaWrite, kCtrlCqUpdate);
  set_raddr_seg(g.seg<WqeRaddrSeg>(1), dst + 4000, dkey);
  set_data_seg(g.seg<WqeDataSeg>(2), 5, skey, src + 10);
  set_data_seg(g.seg<WqeDataSeg>(3), 7, skey, src + 20);
  set_data_seg(g.seg<WqeDataSeg>(4), 9, skey, src + 30);
  g.ds = 5;
  const uint64_t gw = a.finish(g);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(0, std::memcmp(D(0), S(1000), 16));
  EXPECT_EQ(0, std::memcmp(D(100), S(1016), 32));
  EXPECT_EQ(expect_cqe(a, r)->byte_cnt.get(), 48u);
  expect_cqe(a, gw);
  EXPECT_EQ(0, std::memcmp(D(4000), S(10), 5));
  EXPECT_EQ(0, std::memcmp(D(4005), S(20), 7));
  EXPECT_EQ(0, std::memcmp(D(4012), S(30), 9));
}

TEST_F(Loopback, InlineWriteAcrossRingWrap) {
  // Park the producer 1 WQEBB before the end of the 64-entry ring, then post a 3-WQEBB
  // inline WQE: its tail continues at the ring's start.
  for (int i = 0; i < 63; ++i) a.nop(0);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());  // consumed: the slots may be reused
  uint8_t payload[100];
  std::iota(payload, payload + 100, uint8_t(1));
  const uint64_t w = a.write_inline(payload, 100, dkey, dst + 8);
  EXPECT_EQ(w, 63u);
  EXPECT_EQ(a.pi, 63u + 3);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(0, std::memcmp(D(8), payload, 100));
  expect_cqe(a, w);
}

TEST_F(Loopback, AtomicsReturnOldValueInHostOrder) {
  auto* t = reinterpret_cast<uint64_t*>(D(64));
  *t = 40;
  a.atomic(WqeOpcode::kAtomicFa, 2, 0, skey, src + 0, dkey, dst + 64);
  a.atomic(WqeOpcode::kAtomicCs, 99, 42, skey, src + 8, dkey, dst + 64);   // hits: 42 -> 99
  a.atomic(WqeOpcode::kAtomicCs, 7, 42, skey, src + 16, dkey, dst + 64);   // misses
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(*t, 99u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(S(0)), 40u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(S(8)), 42u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(S(16)), 99u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(expect_cqe(a, uint64_t(i))->byte_cnt.get(), 8u);
}

TEST_F(Loopback, MaskedAtomics) {
  auto* t64 = reinterpret_cast<uint64_t*>(D(64));
  auto* t32 = reinterpret_cast<uint32_t*>(D(128));
  *t64 = 0x00ff'00ff'0000'0001ull;
  *t32 = 0xffff'0001u;
  {  // 64-bit masked FA with two 32-bit fields: the low field's carry must not cross.
    SendQueue::Wqe w = a.begin(WqeOpcode::kAtomicMaskedFa, kCtrlCqUpdate, ext_atomic_opmod(8));
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), dst + 64, dkey);
    w.seg<WqeMaskedFa64Seg>(2)->add.set(0x0000'0001'ffff'ffffull);
    w.seg<WqeMaskedFa64Seg>(2)->field_boundary.set(0x8000'0000'8000'0000ull);
    set_data_seg(w.seg<WqeDataSeg>(3), 8, skey, src);
    w.ds = 4;
    a.finish(w);
  }
  {  // 32-bit masked CS: compare only the low half, swap only the high half.
    SendQueue::Wqe w = a.begin(WqeOpcode::kAtomicMaskedCs, kCtrlCqUpdate, ext_atomic_opmod(4));
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), dst + 128, dkey);
    auto* s = w.seg<WqeMaskedCs32Seg>(2);
    s->swap.set(0xabcd'0000u), s->compare.set(0x0000'0001u), s->swap_mask.set(0xffff'0000u), s->compare_mask.set(0x0000'ffffu);
    set_data_seg(w.seg<WqeDataSeg>(3), 4, skey, src + 8);
    w.ds = 4;
    a.finish(w);
  }
  {  // 64-bit masked CS (two octowords of operands): compare mismatch leaves memory alone.
    SendQueue::Wqe w = a.begin(WqeOpcode::kAtomicMaskedCs, kCtrlCqUpdate, ext_atomic_opmod(8));
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), dst + 64, dkey);
    auto* s = w.seg<WqeMaskedCs64Seg>(2);
    s->swap.set(~0ull), s->compare.set(0x1234), s->swap_mask.set(~0ull), s->compare_mask.set(0xffff);
    set_data_seg(w.seg<WqeDataSeg>(4), 8, skey, src + 16);
    w.ds = 5;
    a.finish(w);
  }
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(*t64, 0x00ff'0100'0000'0000ull);  // high: 0x00ff00ff+1, low: 0x1+0xffffffff wraps to 0
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(S(0)), 0x00ff'00ff'0000'0001ull);
  EXPECT_EQ(*t32, 0xabcd'0001u);
  EXPECT_EQ(*reinterpret_cast<uint32_t*>(S(8)), bswap32(0xffff'0001u));  // 4-byte results land big-endian
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(S(16)), 0x00ff'0100'0000'0000ull);
  for (int i = 0; i < 3; ++i) EXPECT_NE(a.poll(), nullptr);
}

TEST_F(Loopback, WriteWithImmediateConsumesReceiveAndSignalsResponder) {
  Rig r2;
  const mock_nic::driver::CqRef rcq = r2.make_cq();
  const uint32_t srqn = r2.make_srq();
  SendQueue x = r2.make_sq(), y = r2.make_sq(0, 6, 6, false, {rcq.cqn, srqn});
  r2.connect(x, y);
  auto buf = r2.alloc(4096);
  auto k = r2.reg(buf, 4096, kAll);
  // No receive posted yet: RNR NAKs; with rnr_retry 2 the requester gives up after 2 waits.
  ASSERT_TRUE(r2.nic().set_qp_timers(x.qpn, {14, 7, 2, 12}).is_ok());
  x.rdma(WqeOpcode::kRdmaWriteImm, k, buf, 16, k, buf + 1024, kCtrlCqUpdate, 0xfeed);
  x.ring_doorbell();
  ASSERT_TRUE(r2.run());
  const auto* e = reinterpret_cast<const ErrCqe64*>(x.poll());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(CqeSyndrome::kRnrRetryExcErr));

  SendQueue x2 = r2.make_sq(), y2 = r2.make_sq(0, 6, 6, false, {rcq.cqn, srqn});
  r2.connect(x2, y2);
  r2.post_receives(srqn, 1);
  const uint64_t w = x2.rdma(WqeOpcode::kRdmaWriteImm, k, buf, 16, k, buf + 2048, kCtrlCqUpdate, 0xfeed);
  x2.ring_doorbell();
  ASSERT_TRUE(r2.run());
  ASSERT_NE(x2.poll(), nullptr);
  EXPECT_EQ(x2.cqes()[0].wqe_counter.get(), uint16_t(w));
  const Cqe64* rc = r2.mem.as<Cqe64>(rcq.va);
  EXPECT_EQ(rc->opcode(), uint8_t(CqeOpcode::kRespWrImm));
  EXPECT_EQ(rc->imm_inval_pkey.get(), 0xfeedu);
  EXPECT_EQ(rc->byte_cnt.get(), 16u);
  EXPECT_EQ(rc->qpn(), y2.qpn);
}

TEST_F(Loopback, FenceWaitsForOutstandingRead) {
  // READ fills dst[0..64) from src; a WRITE then sends dst[0..64) onward. Responses land
  // late, so without a fence the WRITE ships stale bytes; with one it waits.
  for (bool fence : {false, true}) {
    Rig r(1, mock_nic::NicConfig{.response_delay_max = 50, .seed = 7});
    SendQueue p = r.make_sq(), q = r.make_sq();
    r.connect(p, q);
    auto s = r.alloc(4096, 0x5a), d = r.alloc(4096, 0x00);
    auto sk = r.reg(s, 4096, kAll), dk = r.reg(d, 4096, kAll);
    p.read(dk, d, 64, sk, s, 0);
    p.write(dk, d, 64, dk, d + 1024, kCtrlCqUpdate | (fence ? kCtrlFmFence : 0));
    p.ring_doorbell();
    ASSERT_TRUE(r.run());
    const bool fresh = *r.mem.translate(d + 1024 + 63, 1) == std::byte{0x5a};
    EXPECT_EQ(fresh, fence) << "fence=" << fence;
    EXPECT_NE(p.poll(), nullptr);
  }
}

TEST_F(Loopback, NormalCqOwnerBitAcrossWraps) {
  for (int i = 0; i < 64 * 3 + 5; ++i) {
    const uint64_t w = a.nop(kCtrlCqUpdate);
    a.ring_doorbell();
    ASSERT_TRUE(rig.run());
    const Cqe64* c = a.poll();
    ASSERT_NE(c, nullptr) << i;
    EXPECT_EQ(c->wqe_counter.get(), uint16_t(w));
    EXPECT_EQ(c->owner(), cqe_owner_for(uint64_t(i), 6));
  }
}

TEST_F(Loopback, NormalCqOverrunStopsWriting) {
  for (int i = 0; i < 65; ++i) a.nop(kCtrlCqUpdate);  // CQ holds 64; nobody consumes
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const mock_nic::Cq* cq = rig.nic().cq(a.cqn);
  EXPECT_TRUE(cq->overrun);
  EXPECT_EQ(cq->cqes_written, 64u);
}

TEST(CollapsedCq, EveryCqeLandsInSlotZeroWithTheRightCounter) {
  Rig rig;
  SendQueue a = rig.make_sq(0, 6, 0, true), b = rig.make_sq(0, 6, 0, true);
  rig.connect(a, b);
  // 70,000 WQEs: the 16-bit wqe_counter wraps once.
  for (uint64_t i = 0; i < 70000; ++i) {
    const uint64_t w = a.nop(i % 3 == 0 ? kCtrlCqUpdate : 0);
    if (i % 16 == 15) {
      a.ring_doorbell();
      ASSERT_TRUE(rig.run());
    }
    if (i % 3 == 0 && i % 16 == 15) {
      ASSERT_EQ(a.cqes()[0].wqe_counter.get(), uint16_t(w));
    }
  }
  EXPECT_FALSE(rig.nic().cq(a.cqn)->overrun);
}

TEST(TwoNics, QpPairAcrossTheFabric) {
  Rig rig(2);
  SendQueue a = rig.make_sq(0), b = rig.make_sq(1);
  rig.connect(a, b);
  auto s = rig.alloc(4096, 0x11), d = rig.alloc(4096, 0);
  auto sk = rig.reg(s, 4096, kAll, 0), dk = rig.reg(d, 4096, kAll, 1);
  // NIC 1 has its own PD space: its QP was made with pd of NIC 0's number; same value here.
  a.write(sk, s, 4096, dk, d);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(*rig.mem.translate(d + 4095, 1), std::byte{0x11});
  EXPECT_NE(a.poll(), nullptr);
}

TEST(QpStateMachine, AReceiveQueueIsAnSrqAndItsCqBothOrNeither) {
  Rig rig;
  SendQueue a = rig.make_sq();
  mock_nic::QpAttr attr = rig.nic().qp(a.qpn)->attr;
  attr.recv_cqn = a.cqn, attr.srqn = 0;
  EXPECT_EQ(rig.nic().create_qp(attr).status().code(), Errc::kBadParam);
  attr.recv_cqn = 0, attr.srqn = rig.make_srq();
  EXPECT_EQ(rig.nic().create_qp(attr).status().code(), Errc::kBadParam);
  attr.recv_cqn = a.cqn;
  EXPECT_TRUE(rig.nic().create_qp(attr).is_ok());
}

TEST(QpStateMachine, IllegalTransitionsAreRefused) {
  Rig rig;
  SendQueue a = rig.make_sq();
  Nic& nic = rig.nic();
  EXPECT_EQ(nic.modify_qp(a.qpn, mock_nic::QpState::kRts).code(), Errc::kBadState);
  EXPECT_TRUE(nic.modify_qp(a.qpn, mock_nic::QpState::kInit).is_ok());
  EXPECT_EQ(nic.modify_qp(a.qpn, mock_nic::QpState::kRtr).code(), Errc::kBadParam);  // no peer
  EXPECT_EQ(nic.modify_qp(a.qpn, mock_nic::QpState::kRts).code(), Errc::kBadState);
  EXPECT_EQ(nic.modify_qp(0x999, mock_nic::QpState::kInit).code(), Errc::kNotFound);
  // WQEs posted before RTS wait; entering RTS runs them.
  auto buf = rig.alloc(64);
  auto k = rig.reg(buf, 64, kAll);
  SendQueue c = rig.make_sq(), b = rig.make_sq();
  c.write(k, buf, 8, k, buf + 8);
  c.ring_doorbell();
  rig.run();
  EXPECT_EQ(c.poll(), nullptr);
  rig.connect(c, b);
  ASSERT_TRUE(rig.run());
  EXPECT_NE(c.poll(), nullptr);
}

// A WQE stream produced only by rdma-core's helpers (mlx5dv_set_ctrl_seg / _data_seg and
// the kernel-ABI structs), run on the model.
TEST(RdmaCoreBuilt, StreamExecutes) {
  Rig rig;
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  rig.connect(a, b);
  auto s = rig.alloc(4096), d = rig.alloc(4096);
  for (int i = 0; i < 4096; ++i) rig.mem.translate(s, 4096)[i] = std::byte(i);
  auto sk = rig.reg(s, 4096, kAll), dk = rig.reg(d, 4096, kAll);
  auto* ring = reinterpret_cast<uint8_t*>(a.ring());
  uint16_t pi = 0;
  auto emit = [&](uint8_t opcode, uint8_t fm, auto fill, uint8_t ds) {
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(ring + (pi % 64) * 64);
    fill(reinterpret_cast<uint8_t*>(ctrl) + 16);
    mlx5dv_set_ctrl_seg(ctrl, pi, opcode, 0, a.qpn, fm, ds, 0, 0);
    a.last_doorbell = *reinterpret_cast<uint64_t*>(ctrl);
    pi += uint16_t((ds * 16 + 63) / 64);
  };
  for (uint32_t i = 0; i < 32; ++i) {
    emit(MLX5_OPCODE_RDMA_WRITE, i == 31 ? MLX5_WQE_CTRL_CQ_UPDATE : 0, [&](uint8_t* p) {
      auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(p);
      r->raddr = htobe64(d + i * 64);
      r->rkey = htobe32(dk);
      r->reserved = 0;
      mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(p + 16), 8 + i, sk, s + i * 64);
    }, 3);
  }
  emit(MLX5_OPCODE_ATOMIC_FA, MLX5_WQE_CTRL_CQ_UPDATE, [&](uint8_t* p) {
    auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(p);
    r->raddr = htobe64(d + 3072);
    r->rkey = htobe32(dk);
    auto* at = reinterpret_cast<mlx5_wqe_atomic_seg*>(p + 16);
    at->swap_add = htobe64(5);
    at->compare = 0;
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(p + 32), 8, dk, d + 3080);
  }, 4);
  a.pi = pi;
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  for (uint32_t i = 0; i < 32; ++i)
    ASSERT_EQ(0, std::memcmp(rig.mem.translate(d + i * 64, 1), rig.mem.translate(s + i * 64, 1), 8 + i)) << i;
  EXPECT_EQ(*rig.mem.as<uint64_t>(d + 3072), 5u);
  const Cqe64* c1 = a.poll();
  const Cqe64* c2 = a.poll();
  ASSERT_TRUE(c1 && c2);
  EXPECT_EQ(c1->wqe_counter.get(), 31);
  EXPECT_EQ(c2->wqe_counter.get(), 32);
}

}  // namespace
}  // namespace doorbell::testing
