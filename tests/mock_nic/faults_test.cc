// Fault-injection hooks: dropped and late doorbells, a stalled engine, a QP forced to ERR,
// late completions. Each provokes what it models and nothing else.
#include <gtest/gtest.h>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;

struct Faulty : ::testing::Test {
  Rig rig;
  SendQueue a, b;
  void SetUp() override {
    a = rig.make_sq();
    b = rig.make_sq();
    rig.connect(a, b);
  }
};

TEST_F(Faulty, DroppedDoorbellLeavesWorkUnconsumedUntilTheNextOne) {
  rig.nic().faults().drop_doorbells = 1;
  const uint64_t w = a.nop();
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(a.poll(), nullptr);
  EXPECT_EQ(rig.nic().qp(a.qpn)->head, 0u);  // the WQE is still waiting in the ring
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const Cqe64* c = a.poll();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->wqe_counter.get(), uint16_t(w));
}

TEST_F(Faulty, LateDoorbellActsAfterItsDelay) {
  rig.nic().faults().doorbell_delay = 100;
  a.nop();
  a.ring_doorbell();
  EXPECT_EQ(rig.nic().progress(1), 1u);  // nothing due yet: time jumps to the doorbell
  EXPECT_EQ(a.poll(), nullptr);
  ASSERT_TRUE(rig.run());
  EXPECT_NE(a.poll(), nullptr);
  EXPECT_GE(rig.nic().now(), 100u);
}

TEST_F(Faulty, StalledEngineDoesNothingUntilReleased) {
  rig.nic().faults().stalled = true;
  a.nop();
  a.ring_doorbell();
  EXPECT_EQ(rig.nic().progress(), 0u);
  EXPECT_FALSE(rig.nic().idle());
  rig.nic().faults().stalled = false;
  ASSERT_TRUE(rig.run());
  EXPECT_NE(a.poll(), nullptr);
}

TEST_F(Faulty, ForcedErrorFlushesOutstandingAndLaterWqes) {
  Rig r(1, NicConfig{.response_delay_max = 1000, .seed = 3});
  SendQueue p = r.make_sq(), q = r.make_sq();
  r.connect(p, q);
  auto buf = r.alloc(4096, 0x77);
  auto k = r.reg(buf, 4096, kLocalWrite | kRemoteRead | kRemoteWrite);
  const uint64_t rd = p.read(k, buf + 2048, 64, k, buf, 0);  // unsignaled, response outstanding
  p.ring_doorbell();
  r.nic().progress(1);
  ASSERT_TRUE(r.nic().force_qp_error(p.qpn).is_ok());
  const uint64_t later = p.nop();
  p.ring_doorbell();
  ASSERT_TRUE(r.run());
  for (uint64_t idx : {rd, later}) {
    const auto* e = reinterpret_cast<const ErrCqe64*>(p.poll());
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->syndrome, uint8_t(CqeSyndrome::kWrFlushErr));
    EXPECT_EQ(e->wqe_counter.get(), uint16_t(idx));
  }
  EXPECT_EQ(*r.mem.translate(buf + 2048, 1), std::byte{0x77});  // the flushed READ never landed
}

TEST_F(Faulty, DelayedCompletionAppearsLater) {
  ASSERT_TRUE(rig.nic().set_completion_delay(a.cqn, 500).is_ok());
  a.nop();
  a.ring_doorbell();
  rig.nic().progress(1);
  EXPECT_EQ(a.poll(), nullptr);
  ASSERT_TRUE(rig.run());
  EXPECT_NE(a.poll(), nullptr);
  EXPECT_GE(rig.nic().now(), 500u);
}

TEST_F(Faulty, MissingDoorbellIsAHangNotACompletion) {
  // The DBR advances but nobody rings: the engine never learns of the WQE.
  a.nop();
  a.dbr()->snd.set(uint32_t(a.pi));
  ASSERT_TRUE(rig.run());
  EXPECT_TRUE(rig.nic().idle());
  EXPECT_EQ(a.poll(), nullptr);
}

TEST_F(Faulty, DbrAdvanceWhileActiveIsPickedUp) {
  // Hardware keeps fetching while the SQ is scheduled: a DBR update made before the engine
  // drains is seen without a new doorbell.
  a.nop(0);
  a.ring_doorbell();
  a.nop();
  a.dbr()->snd.set(uint32_t(a.pi));
  ASSERT_TRUE(rig.run());
  EXPECT_NE(a.poll(), nullptr);
}

}  // namespace
}  // namespace doorbell::testing
