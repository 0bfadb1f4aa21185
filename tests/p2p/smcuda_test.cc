// The smcuda large-message path (core/p2p/smcuda_pml.h) on the CPU model: once the lazy set-up
// reaches OK, large sends go as RGETs the receiver pulls through its IPC cache; before it, with
// no peer access, or while a rank's CUDA is down, they take the host path. A property over
// random configurations (sizes, eager limits, late CUDA, peer access, buffer reuse and
// re-allocation, schedules) holds, and finds each of three planted bugs.
#include "sim/p2p/smcuda_run.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "tests/sim_opts.h"

namespace doorbell::p2p {
namespace {

using gpu_sim::Policy;

TEST(Smcuda, LargeSendsArePulledThroughTheCacheOnceTheSetUpIsOk) {
  SmcudaRunConfig c;
  c.messages = 12;
  c.cuda_ready_after[1] = 2;  // rank 1's first requests and answers: NOT-READY
  const SmcudaRunResult r = run_smcuda(c, testing::sim_opts(1));
  ASSERT_EQ(r.failure, "");
  EXPECT_GT(r.rgets, 0u);
  EXPECT_GT(r.eagers, 0u);  // before the set-up agreed
  EXPECT_GT(r.reopens, 0u);  // re-allocated buffers: the cache reopened them
  EXPECT_GT(r.hits, 0u);
  EXPECT_NE(r.states.find("OK (RDMA flag set)"), std::string::npos) << r.states;
  std::printf("rgets %llu, host path %llu, opens %llu, hits %llu, reopens %llu: %s\n", (unsigned long long)r.rgets,
              (unsigned long long)r.eagers, (unsigned long long)r.opens, (unsigned long long)r.hits, (unsigned long long)r.reopens,
              r.states.c_str());
}

TEST(Smcuda, WithoutPeerAccessEverySendTakesTheHostPath) {
  SmcudaRunConfig c;
  c.peer_access = false;
  const SmcudaRunResult r = run_smcuda(c, testing::sim_opts(2));
  ASSERT_EQ(r.failure, "");
  EXPECT_EQ(r.rgets, 0u);
  EXPECT_EQ(r.opens, 0u);
  EXPECT_NE(r.states.find("BAD"), std::string::npos) << r.states;
}

struct Case {
  SmcudaRunConfig c;
  Policy policy = Policy::kRandom;
};

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case k;
    k.c.messages = *rc::gen::inRange<uint32_t>(1, 20);
    k.c.max_bytes = *rc::gen::element<uint64_t>(64, 4096, 65536);
    k.c.options.eager_bytes = *rc::gen::element<uint64_t>(0, 16, 1024);
    k.c.peer_access = *rc::gen::element(true, true, false);
    k.c.cuda_ready_after[0] = *rc::gen::inRange<uint32_t>(0, 8);
    k.c.cuda_ready_after[1] = *rc::gen::inRange<uint32_t>(0, 8);
    k.c.buffers = *rc::gen::inRange<uint32_t>(1, 4);
    k.c.realloc_every = *rc::gen::inRange<uint32_t>(0, 5);
    k.c.seed = *rc::gen::inRange<uint64_t>(1, 1u << 30);
    k.policy = *rc::gen::element(Policy::kRandom, Policy::kPct, Policy::kTimed);
    return k;
  });
}

std::string run_case(Case k, const smcuda::Plants& pl = {}, bool no_id_check = false) {
  k.c.options.plants = pl;
  k.c.plant_no_buffer_id_check = no_id_check;
  return run_smcuda(k.c, testing::sim_opts(k.c.seed, k.policy)).failure;
}

RC_GTEST_PROP(SmcudaProperty, EveryMessageInPlaceNoMappingWithoutAgreement, ()) {
  const Case k = *gen_case();
  const std::string why = run_case(k);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

TEST(SmcudaProperty, FindsPlantedBugs) {
  const char* names[] = {"RDMA flag set on the request, not the ACK", "FIN before the pull completed", "cache without the buffer-id check"};
  for (int plant = 0; plant < 3; ++plant) {
    smcuda::Plants pl;
    if (plant == 0) pl.flag_on_request = true;
    if (plant == 1) pl.fin_before_copy_done = true;
    const auto r = rc::check(names[plant], [&] {
      const Case k = *gen_case();
      const std::string why = run_case(k, pl, plant == 2);
      RC_LOG() << why;
      RC_ASSERT(why.empty());
    });
    EXPECT_FALSE(r) << names[plant] << " was not found";
  }
}

}  // namespace
}  // namespace doorbell::p2p
