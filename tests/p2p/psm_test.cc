// Seed 004's kernel-less transport (core/p2p/psm_p2p.h) on the CPU model: sendrecv and
// alltoall over several channels and back-to-back calls deliver every byte once in its place,
// under random, PCT and timed schedules, SC and weak memory, with the control-word
// invariants clean; the property over random configurations finds each planted bug.
#include "sim/p2p/psm_run.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "tests/seeds.h"
#include "tests/sim_opts.h"

namespace doorbell::p2p {
namespace {

using gpu_sim::MemoryModel;
using gpu_sim::Policy;
using testing::sweep_seeds;

TEST(PsmTransport, SendRecvAndAlltoallOverChannelsAndCallsDeliverEveryByte) {
  for (MemoryModel m : {MemoryModel::kSc, MemoryModel::kWeak})
    for (bool all : {false, true}) {
      std::string why;
      const uint64_t bad = sweep_seeds(1, 24, [&](uint64_t seed) {
        PsmRunConfig c;
        c.gpus = all ? 3 : 2;
        c.alltoall = all;
        c.channels = 2;
        c.calls = 3;
        c.bytes_per_peer = 2 * (900 + seed * 37);  // not a multiple of the step
        c.choices.step_bytes = 128;
        c.copy_bytes_per_step = 64;
        c.seed = seed;
        const Policy p = seed % 3 == 0 ? Policy::kTimed : seed % 3 == 1 ? Policy::kRandom : Policy::kPct;
        why = run_psm(c, testing::sim_opts(seed, p, m)).failure;
        return why.empty();
      });
      EXPECT_EQ(bad, 0u) << gpu_sim::memory_model_name(m) << (all ? " alltoall: " : " sendrecv: ") << why;
    }
}

// What a sub's bytes look like to the receiver when 2.21's args-level offset (totalCopySize)
// is shared by the subs of an alltoall: the second sub finds nothing left to send.
TEST(PsmTransport, ArgsLevelOffsetsBreakAMultiSubCallButNotASingleSubOne) {
  PsmRunConfig c;
  c.channels = 1;
  c.bytes_per_peer = 1000;
  c.choices.step_bytes = 128;
  c.choices.offsets_per_args = true;
  EXPECT_EQ(run_psm(c, testing::sim_opts(1)).failure, "");  // sendrecv, one channel: one sub
  c.channels = 2;
  const PsmRunResult r = run_psm(c, testing::sim_opts(1));
  EXPECT_NE(r.failure, "");
  std::printf("%s\n", r.failure.substr(0, 600).c_str());
}

// The seed's 4 GB stall made small: one control block per GPU pair and channel carrying both
// directions. An alltoall (every pair both ways) breaks the one-writer rule on the block's
// tail and stalls, some connection with the sender's credit below the receiver's view of
// head; a sendrecv ring on 4 GPUs (one direction per pair) and the fix (a block per
// connection) complete.
TEST(PsmTransport, ABlockSharedByBothDirectionsStallsAnAlltoallButNotARing) {
  PsmRunConfig c;
  c.gpus = 4;
  c.alltoall = true;
  c.channels = 2;
  c.bytes_per_peer = 4 << 20;
  c.choices.step_bytes = 4096;
  c.choices.step_at_done = true;
  c.choices.first_credit = psm::FirstCredit::kReceiverStart;
  c.choices.recv_waits_for_size = true;
  c.shm = ShmScope::kPairChannel;
  c.phantom = true;
  uint32_t signature = 0;  // stalls with a connection's sender and receiver both stuck, head ahead of tail
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    gpu_sim::SchedOptions so = testing::sim_opts(seed);
    so.hang_spins = 512;  // as replay: the stalled proxies' last moves need the longer patience
    const PsmRunResult r = run_psm(c, so);
    EXPECT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << "seed " << seed << ": " << r.failure.substr(0, 400);
    EXPECT_NE(r.first_violation.find(".tail written by"), std::string::npos) << r.first_violation;
    if (!r.stall.connection.empty() && r.stall.recv_sees_head > r.stall.send_sees_tail) {
      ++signature;
      std::printf("seed %llu: %s\n", (unsigned long long)seed, r.stall.line().c_str());
    }
  }
  EXPECT_GT(signature, 0u);
  c.alltoall = false;
  EXPECT_EQ(run_psm(c, testing::sim_opts(1)).failure, "");
  c.alltoall = true;
  c.shm = ShmScope::kConnection;
  EXPECT_EQ(run_psm(c, testing::sim_opts(1)).failure, "");
}

// Seed 004's receiver stream hang: with the user's stream waiting for the call, a receive
// proxy on stream 0 (legacy default) waits behind that wait; on its own non-blocking stream,
// or with nothing on the user's stream waiting, the call completes.
TEST(PsmTransport, AReceiveProxyOnTheLegacyDefaultStreamWaitsBehindTheUsersWait) {
  PsmRunConfig c;
  c.channels = 2;
  c.bytes_per_peer = 8192;
  c.choices.step_bytes = 1024;
  c.user_stream_waits = true;
  c.recv_proxy_stream = gpu_sim::StreamKind::kLegacyDefault;
  const PsmRunResult r = run_psm(c, testing::sim_opts(3));
  EXPECT_EQ(r.run.outcome, gpu_sim::Outcome::kHang);
  EXPECT_NE(r.failure.find("waits for:\n    - kernel 'user stream's wait for call 0"), std::string::npos) << r.failure;
  c.recv_proxy_stream = gpu_sim::StreamKind::kNonBlocking;
  EXPECT_EQ(run_psm(c, testing::sim_opts(3)).failure, "");
  c.recv_proxy_stream = gpu_sim::StreamKind::kLegacyDefault;
  c.user_stream_waits = false;
  EXPECT_EQ(run_psm(c, testing::sim_opts(3)).failure, "");
}

struct Case {
  PsmRunConfig c;
  Policy policy = Policy::kRandom;
  MemoryModel memory = MemoryModel::kSc;
};

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case k;
    k.c.gpus = *rc::gen::inRange<uint32_t>(2, 4);
    k.c.alltoall = *rc::gen::arbitrary<bool>();
    k.c.channels = *rc::gen::inRange<uint32_t>(1, 3);
    k.c.calls = *rc::gen::inRange<uint32_t>(1, 4);
    k.c.choices.window = *rc::gen::element<uint32_t>(2, 8, 16);
    k.c.choices.step_bytes = *rc::gen::element<uint64_t>(32, 64, 128);
    if (*rc::gen::arbitrary<bool>()) k.c.choices.chunk_bytes = 2 * k.c.choices.step_bytes;
    // The readings of the seed that a correct transport may take (the block per connection).
    k.c.choices.step_at_done = *rc::gen::arbitrary<bool>();
    k.c.choices.first_credit = *rc::gen::element(psm::FirstCredit::kSetUp, psm::FirstCredit::kReceiverStart);
    k.c.choices.free_is_zero = *rc::gen::arbitrary<bool>();
    k.c.choices.recv_waits_for_size = *rc::gen::arbitrary<bool>();
    k.c.bytes_per_peer = k.c.channels * *rc::gen::inRange<uint64_t>(0, 1200);
    k.c.copy_bytes_per_step = *rc::gen::element<uint64_t>(16, 64, 4096);
    k.c.seed = *rc::gen::inRange<uint64_t>(1, 1u << 30);
    k.policy = *rc::gen::element(Policy::kRandom, Policy::kPct, Policy::kTimed);
    k.memory = *rc::gen::element(MemoryModel::kSc, MemoryModel::kWeak);
    return k;
  });
}

std::string run_case(const Case& k, const psm::Plants& pl = {}) {
  PsmRunConfig c = k.c;
  c.plants = pl;
  return run_psm(c, testing::sim_opts(k.c.seed, k.policy, k.memory)).failure;
}

RC_GTEST_PROP(PsmTransportProperty, EveryByteOnceInItsPlaceWithTheInvariantsClean, ()) {
  const Case k = *gen_case();
  const std::string why = run_case(k);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

TEST(PsmTransportProperty, FindsPlantedBugs) {
  const char* names[] = {"receive proxy returns credit before its copy finished", "send proxy publishes head before its copy finished",
                         "send proxy ignores the receiver's credit"};
  for (int plant = 0; plant < 3; ++plant) {
    psm::Plants pl;
    (plant == 0 ? pl.credit_before_copy_done : plant == 1 ? pl.head_before_copy_done : pl.sender_ignores_credit) = true;
    const auto r = rc::check(names[plant], [&pl] {
      const Case k = *gen_case();
      RC_ASSERT(run_case(k, pl).empty());
    });
    EXPECT_FALSE(r) << names[plant] << " was not found";
  }
}

}  // namespace
}  // namespace doorbell::p2p
