// Each ordering of the IBGDA paths (core/ibgda/ordering.h), dropped one at a time: the weak
// memory mode must find the race it guards against, with a seed, a replay line and a report
// that says what was read stale; the sequentially consistent mode passes the same seeds
// (it cannot see a missing fence). With every ordering in place the weak mode passes.
// An ordering the weak mode shows to be unnecessary is reported as such, not removed.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "sim/ibgda/program.h"
#include "core/ibgda/ordering.h"
#include "tests/seeds.h"

namespace doorbell::ibgda {
namespace {

using testing::sweep_seeds;

// A random program for `seed`: several warps and lanes sharing each QP (so one thread rings
// for another's WQEs), small batches and rings (the NIC re-reads the DBR while busy),
// fetch-adds through few ibuf slots (results land in reused slots).
Program random_program(uint64_t seed, bool proxy) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint32_t lo, uint32_t hi) { return lo + uint32_t(rng() % (hi - lo + 1)); };
  Program p;
  p.npes = pick(2, 3);
  p.warps = pick(1, 3);
  p.lanes = pick(1, 4);
  p.stack.log_qp_depth = pick(3, 6);
  p.stack.num_requests_in_batch = 1u << pick(0, 4);
  p.stack.ibuf_slots = pick(0, 1) ? 1 : 2;
  p.stack.cpu_proxy = proxy;
  p.stack.nic_buffers_on_gpu = pick(0, 1) != 0;  // GPU-scope fences for the NIC, or system-scope ones
  p.stack.response_delay = pick(0, 1) ? 0 : 20;
  p.seed = seed;
  const uint32_t n = pick(6, 40);
  for (uint32_t i = 0; i < n; ++i) {
    ProgramOp o;
    o.pe = pick(0, p.npes - 1);
    o.warp = pick(0, p.warps - 1);
    o.lane = pick(0, p.lanes - 1);
    o.kind = ProgramOpKind(pick(0, 3));
    o.target = pick(0, p.npes - 1);
    o.bytes = pick(1, 256);
    o.src = pick(0, uint32_t(kProgramRo) - o.bytes);
    o.counter = pick(0, kProgramCounters - 1);
    o.add = pick(1, 999);
    p.ops.push_back(o);
  }
  return p;
}

std::string run(uint64_t seed, uint32_t drop, gpu_sim::MemoryModel m, bool proxy, bool gpu_fences_for_host = false,
                bool host_buffers = false) {
  Program p = random_program(seed, proxy);
  p.stack.plant.drop = drop;
  if (host_buffers) p.stack.nic_buffers_on_gpu = false;
  if (gpu_fences_for_host) p.stack.nic_buffers_on_gpu = false, p.plant_gpu_scope_fences = true;
  gpu_sim::SchedOptions so;
  so.seed = seed;
  so.memory = m;
  so.hang_spins = 256;
  return run_program(p, so);
}

constexpr uint64_t kSeeds = 300;

TEST(WeakOrderings, EveryOrderingInPlacePassesInTheWeakMode) {
  for (bool proxy : {false, true}) {
    std::string why;
    const uint64_t bad = sweep_seeds(1, kSeeds, [&](uint64_t seed) {
      why = run(seed, 0, gpu_sim::MemoryModel::kWeak, proxy);
      return why.empty();
    });
    EXPECT_EQ(bad, 0u) << (proxy ? "cpu proxy: " : "") << why;
  }
}

struct Plant {
  Ordering drop;
  bool proxy;
  bool needed;  // false: the weak mode shows the ordering unnecessary (kept, and reported)
  const char* stale;  // what the failure report must name
  uint64_t seeds = kSeeds;  // the search budget (the DBR race is one NIC step wide)
  // NIC buffers in host memory only: with them in GPU memory the ringer's own WQEs are ahead
  // of its DBR store by its publish fence, so wqes_before_dbr is only fenced (and only
  // missed) where it rings for another thread's WQEs, a rarer race.
  bool host_buffers = false;
};

class DroppedOrdering : public ::testing::TestWithParam<Plant> {};

TEST_P(DroppedOrdering, IsFoundOnlyInTheWeakModeOrShownUnneeded) {
  const Plant pl = GetParam();
  std::string why;
  const uint64_t found = sweep_seeds(1, pl.seeds, [&](uint64_t seed) {
    why = run(seed, pl.drop, gpu_sim::MemoryModel::kWeak, pl.proxy, false, pl.host_buffers);
    return why.empty();
  });
  if (!pl.needed) {
    EXPECT_EQ(found, 0u) << why;
    std::printf("[doorbell] dropping %s: no failure in %llu weak-mode seeds: the ordering is not needed here\n",
                ordering_name(pl.drop), (unsigned long long)pl.seeds);
    return;
  }
  ASSERT_NE(found, 0u) << "dropping " << ordering_name(pl.drop) << " was not caught in " << pl.seeds << " seeds";
  std::printf("[doorbell] dropping %s: caught at seed %llu:\n%s\n", ordering_name(pl.drop), (unsigned long long)found, why.c_str());
  EXPECT_NE(why.find(pl.stale), std::string::npos) << "the report should name the stale read: " << pl.stale;
  // The SC mode on the same seeds: nothing to see.
  std::string sc;
  EXPECT_EQ(sweep_seeds(1, found, [&](uint64_t seed) {
              sc = run(seed, pl.drop, gpu_sim::MemoryModel::kSc, pl.proxy, false, pl.host_buffers);
              return sc.empty();
            }),
            0u)
      << sc;
}

INSTANTIATE_TEST_SUITE_P(
    Ibgda, DroppedOrdering,
    ::testing::Values(Plant{kOrderWqesBeforeReady, false, true, "read WQE"}, Plant{kOrderWqesBeforeDbr, false, true, "read WQE", 3000, true},
                      Plant{kOrderDbrBeforeDoorbell, false, true, "read the DBR of QP"}, Plant{kOrderCtrlLast, false, false, ""},
                      Plant{kOrderCqeAcquire, false, true, "stale load"}, Plant{kOrderProxyFence, true, false, ""},
                      Plant{kOrderProxyPublish, true, true, "read WQE"}, Plant{kOrderCompletionRelease, false, true, "stale load"}),
    [](const ::testing::TestParamInfo<Plant>& i) { return std::string(ordering_name(i.param.drop)); });

// NIC buffers in GPU memory let the doorbell path fence at GPU scope (the NIC reads through
// L2). With the buffers in host memory that is too narrow: the weak mode must find it.
TEST(WeakOrderings, GpuScopeFencesForHostMemoryBuffersAreFound) {
  std::string why;
  const uint64_t found = sweep_seeds(1, 3000, [&](uint64_t seed) {
    why = run(seed, 0, gpu_sim::MemoryModel::kWeak, false, true);
    return why.empty();
  });
  ASSERT_NE(found, 0u) << "GPU-scope fences with NIC buffers in host memory were not caught";
  std::printf("[doorbell] GPU-scope NIC fences over host-memory buffers: caught at seed %llu:\n%s\n", (unsigned long long)found,
              why.c_str());
}

}  // namespace
}  // namespace doorbell::ibgda

