// NVLS ReduceScatter / AllReduce on the CPU model: equal to a reference for random sizes (tails
// not a multiple of the pack), types, operations, 2..8 ranks, channels, slot sizes, random and
// PCT interleavings, SC and weak memory — and the property finds each planted bug.
#include "sim/nvls/nvls_run.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/heap_shift.h"
#include "tests/rc_find.h"
#include "tests/sim_opts.h"

namespace doorbell::nvls {
namespace {

using gpu_sim::MemoryModel;
using gpu_sim::Policy;

gpu_sim::SchedOptions opts(uint64_t seed, Policy p = Policy::kRandom, MemoryModel m = MemoryModel::kSc) {
  return testing::sim_opts(seed, p, m);
}

struct Case {
  NvlsRunConfig c;
  bool pct = false, weak = false;
};

void showValue(const Case& k, std::ostream& os) {
  os << (k.c.allreduce ? "allreduce" : "reducescatter") << " ranks=" << k.c.ranks << " channels=" << k.c.channels << " reducers=" << k.c.reducers
     << " dtype=" << dtype_name(k.c.dtype) << " op=" << redop_name(k.c.op) << " count=" << k.c.count << " slot=" << k.c.slot_bytes << " step=" << k.c.step_bytes
     << " warps=" << k.c.warps_per_cta << " calls=" << k.c.calls << " seed=" << k.c.seed << " pct=" << k.pct << " weak=" << k.weak
     << " registered=" << int(k.c.registered) << " sync_warp=" << k.c.sync_warp << " warp_hunks=" << k.c.warp_hunks;
}

// Only (type, op) pairs multimem has: for the others NCCL picks another algorithm.
rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case k;
    k.c.ranks = *rc::gen::inRange(2u, 9u);
    k.c.channels = *rc::gen::inRange(1u, 3u);
    k.c.reducers = *rc::gen::inRange(1u, 4u);
    k.c.allreduce = *rc::gen::arbitrary<bool>();
    do {
      k.c.dtype = DType(*rc::gen::inRange(0, 8));
      k.c.op = RedOp(*rc::gen::inRange(0, 3));
    } while (multimem_pack_bytes(k.c.dtype, k.c.op) == 0);
    k.c.slot_bytes = 16 * *rc::gen::inRange<uint64_t>(1, 9);
    k.c.step_bytes = *rc::gen::arbitrary<bool>() ? 16 * *rc::gen::inRange<uint64_t>(1, k.c.slot_bytes / 16 + 1) : 0;
    k.c.count = *rc::gen::inRange<uint64_t>(1, 600);
    k.c.warps_per_cta = *rc::gen::inRange(1u, 3u);
    k.c.lanes = *rc::gen::element(2u, 4u);
    k.c.calls = *rc::gen::inRange(1u, 4u);  // back to back: the steps run on
    k.c.sync_warp = *rc::gen::arbitrary<bool>();  // NCCL's thread roles with a warp that only posts
    k.c.warp_hunks = *rc::gen::arbitrary<bool>();  // NCCL's per-warp hunks
    k.c.seed = *rc::gen::arbitrary<uint64_t>();
    k.pct = *rc::gen::arbitrary<bool>();
    k.weak = *rc::gen::arbitrary<bool>();
    return k;
  });
}

// `races` / `positions`: the race detector and the position checks (both on, as in replay).
std::string run_case(const Case& k, const Plants& pl = {}, bool races = true, bool positions = true) {
  NvlsRunConfig c = k.c;
  c.plants = pl;
  c.positions = positions;
  gpu_sim::SchedOptions o = opts(c.seed, k.pct ? Policy::kPct : Policy::kRandom, k.weak ? MemoryModel::kWeak : MemoryModel::kSc);
  o.races = races;
  return run_nvls(c, o).failure;
}

RC_GTEST_PROP(NvlsProperty, AllReduceAndReduceScatterEqualTheReference, ()) {
  const Case k = *rc::gen::exec([] {
    Case k = *gen_case();
    k.c.registered = *rc::gen::element(Registered::kNone, Registered::kOutput, Registered::kBoth);  // user buffers bound to multicast
    return k;
  });
  const std::string why = run_case(k);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

TEST(NvlsProperty, FindsPlantedBugs) {
  const std::pair<const char*, bool Plants::*> plants[] = {
      {"sender ignores head + NCCL_STEPS", &Plants::sender_ignores_head},
      {"head polls its own flag, not the min", &Plants::own_flag_not_min},
      {"wrong pack size", &Plants::wrong_pack},
      {"consumers wait for the first reducer only", &Plants::first_reducer_only},
  };
  for (const auto& [name, plant] : plants) {
    Plants pl;
    pl.*plant = true;
    const auto held = rc::check(name, [&pl] {
      const Case k = *gen_case();
      RC_ASSERT(run_case(k, pl).empty());
    });
    EXPECT_FALSE(held) << name << " was not found";
  }
}

// Protocol positions (sim/nvls/nvls_run.cc, sequentially consistent runs) name the rule each
// flow-control plant breaks, by themselves (the race detector off): where the properties saw a
// wrong element or a data race, the report says which step was read or staged against which
// flag; and one plant nothing saw before the call's-end rule (the gather a step behind).
TEST(NvlsProperty, PositionRulesNameWhatBrokeThem) {
  // Each plant and the rules it may break first (which one shows depends on the schedule).
  const std::tuple<const char*, bool Plants::*, std::vector<const char*>> plants[] = {
      {"sender ignores head + NCCL_STEPS", &Plants::sender_ignores_head, {"(a slot is staged only after every reducer freed it)"}},
      {"head polls its own flag, not the min",
       &Plants::own_flag_not_min,
       {"(a consumer reads a step only after its producer's flag passed it, and before it is freed)",
        "(a reducer frees only steps every member staged)", "(a reducer broadcasts only into slots every member freed)"}},
      // ReduceScatter: an AllReduce gather's plain reads of its broadcast slot are not checked.
      {"consumers wait for the first reducer only", &Plants::first_reducer_only, {"(a slot is staged only after every reducer freed it)"}},
      // A gather one step behind: no wrong byte, race or hang ever (the next post overtakes
      // the flag), only a FIFO a slot short — the call's end names it.
      {"gather frees the step it read, one behind", &Plants::gather_frees_late, {"(a role ends its call having posted every step it moved)"}},
  };
  for (const auto& [name, plant, rules] : plants) {
    Plants pl;
    pl.*plant = true;
    const std::string seen = testing::first_failure(name, [&pl, plant] {
      Case k = *gen_case();
      k.weak = false;
      if (plant == &Plants::first_reducer_only) k.c.allreduce = false;
      if (plant == &Plants::gather_frees_late) k.c.allreduce = true;  // (a ReduceScatter has no gathers)
      return run_case(k, pl, false);
    });
    std::printf("[doorbell] %s: %s\n", name, seen.substr(0, seen.find('\n')).c_str());
    EXPECT_EQ(seen.rfind("invariant: ", 0), 0u) << name << ": " << seen;
    EXPECT_TRUE(std::any_of(rules.begin(), rules.end(), [&](const char* r) { return seen.find(r) != std::string::npos; })) << name << ": " << seen;
  }
}

// The race detector's plants: a reducer's thread 0 frees the reduce slot (red_head) before the
// CTA barrier that follows the other threads' loads of it — those loads finish in the same warp
// step, so no schedule and no stale value shows a wrong byte (300 cases of each memory model
// pass without the detector); and it posts the broadcast (bc_tail) before the barrier that
// follows the other threads' multimem stores (which the weak model finds too, by luck). The
// detector names each race and the flag that should have ordered it.
TEST(NvlsProperty, RaceDetectorFindsASlotFreedBeforeTheBarrier) {
  const std::tuple<const char*, bool Plants::*, const char*> plants[] = {
      {"reducer frees its slot before the barrier", &Plants::reducer_frees_early, "red_head"},
      {"broadcast posted before the barrier", &Plants::broadcast_posted_early, "bc_tail"},
  };
  for (const auto& [name, plant, flag] : plants) {
    Plants pl;
    pl.*plant = true;
    // The detector by itself: a reducer reading after its early free also breaks a position rule.
    const std::string seen = testing::first_failure(name, [&pl] { return run_case(*gen_case(), pl, true, false); });
    EXPECT_FALSE(seen.empty()) << name << " was not found";
    EXPECT_NE(seen.find("data race"), std::string::npos) << name << ": " << seen;
    EXPECT_NE(seen.find(flag), std::string::npos) << name << ": " << seen;
  }
}

// Registered buffers: the next call's input is written on the rank's stream once its call
// ended, so a call that ends before every reducer has read its input lets that write race a
// peer's multimem.ld_reduce; the detector names it. Cases of two calls or more with the input
// registered, shaped further by `shape`; returns the first failure, printed.
std::string registered_input_race(const std::string& name, const Plants& pl, void (*shape)(Case&)) {
  const std::string seen = testing::first_failure(name, [&] {
    const Case k = *rc::gen::map(gen_case(), [shape](Case k) {
      k.c.registered = Registered::kBoth;
      k.c.calls = std::max(k.c.calls, 2u);
      shape(k);
      return k;
    });
    return run_case(k, pl);
  });
  EXPECT_NE(seen.find("data race"), std::string::npos) << seen;
  EXPECT_NE(seen.find(".input"), std::string::npos) << seen;
  std::printf("[doorbell] %s: %s\n", name.c_str(), seen.substr(0, seen.find("replay")).c_str());
  return seen;
}

// The scatter's last wait dropped.
TEST(NvlsProperty, RegisteredInputReleasedEarlyIsARace) {
  Plants pl;
  pl.input_released_early = true;
  registered_input_race("registered input released early", pl, [](Case&) {});
}

// That wait, a thread per reducer (wait_each_reducer), for the first reducer only: in a
// ReduceScatter no other wait reads the reducers' red_head with the input registered.
TEST(NvlsProperty, RegisteredInputWaitsForEveryReducer) {
  Plants pl;
  pl.first_reducer_only = true;
  registered_input_race("registered input, first reducer only", pl, [](Case& k) {
    k.c.allreduce = false;
    k.c.reducers = std::max(k.c.reducers, 2u);
  });
}

// A registered AllReduce output is whole once every reducer posted bc_tail: a gather waiting for
// the first reducer only lets the rank's next stream work (the output check) read the other
// reducers' shares before they land.
TEST(NvlsProperty, RegisteredOutputReadBeforeEveryReducerPosted) {
  Plants pl;
  pl.first_reducer_only = true;
  const std::string seen = testing::first_failure("registered output, first reducer only", [&pl] {
    const Case k = *rc::gen::exec([] {
      Case k = *gen_case();
      k.c.registered = Registered::kOutput, k.c.allreduce = true;
      k.c.reducers = *rc::gen::inRange(2u, 4u);
      // One call whose every part is one step: the plant's weaker slot wait never overruns
      // the reduce FIFO, so what it breaks is the output.
      k.c.calls = 1, k.c.step_bytes = 0;
      k.c.slot_bytes = (k.c.count * dtype_bytes(k.c.dtype) + 15) / 16 * 16;
      return k;
    });
    return run_case(k, pl, true, false);
  });
  const bool race_on_output = seen.find("data race") != std::string::npos && seen.find(".output") != std::string::npos;
  EXPECT_TRUE(race_on_output || seen.find("differs from the reference") != std::string::npos) << seen;
}

// A plant only a weak memory finds: SC cases (shaped by `shape`) pass it, and the first weak
// case that fails is returned. `checks`: the race detector and the position checks on.
std::string found_only_weak(const std::string& name, const Plants& pl, const std::function<void(Case&)>& shape, bool checks) {
  auto run = [&](bool weak) {
    Case k = *gen_case();
    k.weak = weak;
    shape(k);
    return run_case(k, pl, checks, checks);
  };
  EXPECT_EQ(testing::first_failure(name + ", SC", [&] { return run(false); }), "");
  return testing::first_failure(name + ", weak", [&] { return run(true); });
}

// Scoped memory: a staged slot posted behind a .gpu fence (the flag itself stored at .sys) is
// not made visible to the other GPUs' reducers, which read it through multimem. SC runs (and
// the race detector, which does not know scopes) pass it; the weak model, where .gpu reaches
// only the fencing GPU's threads, finds reductions of bytes that had not arrived. Before the
// model was scoped, .gpu spanned every GPU and the weak cases passed it too.
TEST(NvlsProperty, ScopedWeakModelFindsAGpuFenceWhereTheReaderIsAnotherGpu) {
  Plants pl;
  pl.post_fence_gpu = true;
  const std::string seen = found_only_weak("staged slot behind a .gpu fence", pl, [](Case&) {}, true);
  EXPECT_FALSE(seen.empty()) << "the .gpu fence was not found";
  EXPECT_NE(seen.find("(fenced at .gpu, which reaches that GPU's threads, not another's)"), std::string::npos) << seen;
  std::printf("[doorbell] staged slot behind a .gpu fence: %s\n", seen.c_str());
}

// NCCL's thread roles (nvls::Threads): with two warps the CTA's last is a sync warp whose
// PostSend thread posts red_tail / bc_tail after the step's barrier, having stored none of the
// step's bytes. A PostSend that fences only where it stored data itself (NCCL's dataStored,
// taken per thread) publishes the workers' bytes behind no fence: SC runs pass it (the race
// detector off), the weak model finds another GPU's reducer or gather reading bytes that had
// not arrived.
TEST(NvlsProperty, WeakModelFindsAPostSendThatFencesOnlyItsOwnStores) {
  Plants pl;
  pl.post_send_fences_own_stores = true;
  const std::string seen = found_only_weak("PostSend fences only its own stores", pl, [](Case& k) { k.c.warps_per_cta = 2, k.c.sync_warp = true; }, false);
  EXPECT_FALSE(seen.empty()) << "the unfenced PostSend was not found";
  std::printf("[doorbell] PostSend fences only its own stores: %s\n", seen.substr(0, seen.find('\n')).c_str());
}

// Independent oracle: the model switch checks each multimem access against the PTX forms
// (hw/gpu_sim/ptx_multimem.h), not against pack.h. A wrong pack.h entry (a .v2.f64 sum, .v4
// integer packs) reduced correctly and passed every property while the switch asked pack.h;
// now the property finds it, naming the form PTX lacks.
TEST(NvlsProperty, IndependentFormTableFindsAWrongPackTableEntry) {
  for (const int plant : {0, 1}) {
    PackPlants& pp = pack_plants();
    (plant == 0 ? pp.f64_vector : pp.int_vector) = true;
    const std::string seen =
        testing::first_failure(plant == 0 ? "f64 sum in 16-byte packs" : "integers in 16-byte packs", [] { return run_case(*gen_case()); });
    pp = {};
    EXPECT_FALSE(seen.empty()) << "the wrong pack table entry was not found";
    EXPECT_NE(seen.find("no such instruction form"), std::string::npos) << seen;
  }
}

TEST(Nvls, EightRanksAllReduceEveryTypeAndOp) {
  for (int t = 0; t < 8; ++t)
    for (int op = 0; op < 3; ++op) {
      NvlsRunConfig c;
      c.ranks = 8;
      c.channels = 2;
      c.dtype = DType(t);
      c.op = RedOp(op);
      c.count = 999;
      c.slot_bytes = 128;
      const NvlsRunResult r = run_nvls(c, opts(7));
      if (multimem_pack_bytes(c.dtype, c.op) == 0) {
        EXPECT_NE(r.failure.find("no such"), std::string::npos) << dtype_name(c.dtype) << " " << redop_name(c.op) << ": " << r.failure;
      } else {
        EXPECT_EQ(r.failure, "") << dtype_name(c.dtype) << " " << redop_name(c.op);
      }
    }
}

// A seed replays whatever the process did before it (mem::LineBytes).
TEST(Nvls, AWeakRunReplaysWhereverTheHeapPutsItsBuffers) {
  NvlsRunConfig c;
  c.ranks = 3, c.count = 1000, c.dtype = DType::kF16, c.reducers = 2, c.slot_bytes = 256, c.step_bytes = 64, c.calls = 3;
  c.registered = Registered::kOutput, c.warps_per_cta = 2, c.sync_warp = true, c.warp_hunks = true;
  testing::expect_replays_wherever_the_heap_puts_buffers([&] {
    const NvlsRunResult r = run_nvls(c, opts(1, Policy::kRandom, MemoryModel::kWeak));
    EXPECT_EQ(r.failure, "");
    return testing::fingerprint(r.run);
  });
}

// The switch combines members in its own order: a float sum can differ between calls (NCCL
// #1497); min and integer sums cannot.
TEST(Nvls, FloatSumsDependOnTheReductionOrder) {
  NvlsRunConfig c;
  c.ranks = 8;
  c.count = 4096;
  c.random_floats = true;
  const NvlsRunResult a = run_nvls(c, opts(1)), b = run_nvls(c, opts(2));
  ASSERT_EQ(a.failure, "");
  ASSERT_EQ(b.failure, "");
  uint64_t differ = 0;
  for (uint64_t e = 0; e < c.count; ++e) differ += std::memcmp(a.outputs[0].data() + 4 * e, b.outputs[0].data() + 4 * e, 4) != 0;
  EXPECT_GT(differ, 0u);
  std::printf("[doorbell] 8-rank f32 sum, 4096 elements: %llu differ in the last bits between two reduction orders\n",
              (unsigned long long)differ);
}

TEST(Nvls, MulticastSlotsAreBounded) {
  NvlsRunConfig c;
  c.multicast_slots = 16;
  c.extra_objects = 16;  // every slot already taken
  EXPECT_NE(run_nvls(c, opts(1)).failure.find("all 16 multicast slots of the switch are in use"), std::string::npos);
  c.extra_objects = 15;
  EXPECT_EQ(run_nvls(c, opts(1)).failure, "");
}

}  // namespace
}  // namespace doorbell::nvls

namespace doorbell::nvls {
namespace {

// 8 ranks, f32 sum of `bytes` per rank, sizes only, `channels` channels of 1 MiB slots (16:
// NCCL's NVLS channels on H100), one thread per CTA (all a sizes-only step needs).
NvlsRunConfig eight_h100(uint64_t bytes, bool ring, uint32_t channels = 16) {
  NvlsRunConfig c;
  c.ring = ring;
  c.ranks = 8;
  c.channels = channels;
  c.count = bytes / 4;
  c.slot_bytes = 1 << 20;
  c.warps_per_cta = 1;
  c.lanes = 1;
  c.phantom = true;
  return c;
}
// Timed: a waiting CTA polls every poll_ns while another moves a slot for microseconds.
gpu_sim::SchedOptions timed_opts() {
  gpu_sim::SchedOptions o = opts(1, Policy::kTimed);
  o.hang_spins = 1 << 20;
  return o;
}

// The timed model of 8 x H100 (links: the model's NVLink bandwidth x NCCL's NVLS efficiency),
// sizes only, as nccl-tests rows. Simulated time is a function of the protocol and the costs,
// so the figure is checked: within 10 % of NCCL's published ~480 GB/s busbw at 256 MiB.
TEST(NvlsTimed, EightH100AllReduceSweep) {
  std::printf("[doorbell] NVLS allreduce, 8 ranks, timed model, 16 channels, 1 MiB slots\n");
  std::printf("%14s %12s %10s %8s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw");
  double busbw = 0;
  for (uint64_t bytes = 1ull << 20; bytes <= (256ull << 20); bytes *= 4) {
    const NvlsRunConfig c = eight_h100(bytes, false);
    const NvlsRunResult r = run_nvls(c, timed_opts());
    ASSERT_EQ(r.failure, "");
    std::printf("%14llu %12llu %10.1f %8.2f %8.2f\n", (unsigned long long)bytes, (unsigned long long)c.count, r.run.sim_time_ns / 1e3,
                r.algbw_gbps, r.busbw_gbps);
    busbw = r.busbw_gbps;
  }
  EXPECT_NEAR(busbw, 480, 48);
}

// NCCL's ring on the same model links (no NVLS efficiency): within 10 % of the ~370 GB/s
// published for 8 x H100.
TEST(NvlsTimed, EightH100RingAllReduceForComparison) {
  const NvlsRunResult r = run_nvls(eight_h100(256ull << 20, true), timed_opts());
  ASSERT_EQ(r.failure, "");
  std::printf("[doorbell] ring allreduce, 8 ranks, timed model, 256 MiB: %.1f us, algbw %.2f, busbw %.2f GB/s\n",
              r.run.sim_time_ns / 1e3, r.algbw_gbps, r.busbw_gbps);
  EXPECT_NEAR(r.busbw_gbps, 370, 37);
}

// The first of 30 seeded ring configurations that misses the reference ("" if none does).
std::string ring_sweep(const Plants& pl) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    NvlsRunConfig c;
    c.plants = pl;
    c.ring = true;
    c.ranks = 2 + seed % 7;
    c.channels = 1 + seed % 2;
    c.dtype = DType(seed % 8);
    c.op = RedOp(seed % 3);
    c.count = 37 * seed + 5;
    c.slot_bytes = 16 * (1 + seed % 4);
    c.step_bytes = seed % 3 == 0 ? 16 : 0;  // some runs a step under the slot (a slice then sits inside its slots)
    c.lanes = 1 + seed % 3;
    c.calls = 1 + seed % 3;
    c.seed = seed;
    const NvlsRunResult r = run_nvls(c, opts(seed, seed % 2 ? Policy::kPct : Policy::kRandom, seed % 3 ? MemoryModel::kSc : MemoryModel::kWeak));
    if (!r.failure.empty())
      return "seed " + std::to_string(seed) + ": ranks " + std::to_string(c.ranks) + " " + dtype_name(c.dtype) + " " + redop_name(c.op) +
             ": " + r.failure;
  }
  return "";
}

TEST(NvlsRing, AllReduceEqualsTheReference) { EXPECT_EQ(ring_sweep({}), ""); }



// The sweep has teeth: a receiver reading a slot before its tail says it landed is caught, and
// a sender writing slots before head freed them (a primitive receives and sends each slice, so
// a rank that waits on its receives still runs ahead of its next rank's reads).
TEST(NvlsRing, FindsAReceiverIgnoringTail) {
  Plants pl;
  pl.receiver_ignores_tail = true;
  EXPECT_NE(ring_sweep(pl), "");
}

TEST(NvlsRing, FindsASenderIgnoringHead) {
  Plants pl;
  pl.sender_ignores_head = true;
  const std::string seen = ring_sweep(pl);
  EXPECT_NE(seen, "");
  std::printf("[doorbell] ring, sender ignoring head: %s\n", seen.substr(0, seen.find('\n')).c_str());
}

}  // namespace
}  // namespace doorbell::nvls
