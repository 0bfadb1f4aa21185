// Scheduler switches per second on one core: warps whose lanes do nothing but atomics, so
// every access is a scheduling point (one step = resume a lane + switch back); and a mixed
// load / store / atomic / fence loop in the sequentially consistent and the weak memory
// mode (its cost: store buffers, value histories, views), and with the race detector (its
// vector clocks, and a shadow of each 16-byte copy a lane makes).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "hw/gpu_sim/scheduler.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace {

using namespace doorbell;
using namespace doorbell::gpu_sim;

void run_atomics(benchmark::State& state, Policy policy) {
  const uint32_t warps = uint32_t(state.range(0)), lanes = uint32_t(state.range(1));
  const int iters = 2000;
  uint64_t steps = 0;
  for (auto _ : state) {
    SchedOptions o;
    o.policy = policy;
    o.seed = 1;
    Scheduler s(o);
    uint64_t word = 0;
    s.launch("atomics", {1, warps, lanes}, [&](SimCtx& ctx) {
      for (int i = 0; i < iters; ++i) ctx.atomic_add(exec::gpu_scope, &word, 1);
    });
    const RunResult r = s.run();
    if (r.outcome != Outcome::kCompleted || word != uint64_t(warps) * lanes * iters) state.SkipWithError("wrong result");
    steps += r.steps;
  }
  state.counters["steps/s"] = benchmark::Counter(double(steps), benchmark::Counter::kIsRate);
  state.counters["ctx_switches/s"] = benchmark::Counter(2.0 * double(steps), benchmark::Counter::kIsRate);
}

// Each lane: store its own word, load its neighbour's, add to a shared counter, and every
// eighth round a GPU fence and an acquire load.
void BM_MemoryModel(benchmark::State& state) {
  const auto model = MemoryModel(state.range(0) == 1);
  const bool races = state.range(0) == 2;
  const uint32_t warps = 8, lanes = 32;
  const int iters = 200;
  uint64_t steps = 0;
  std::vector<uint64_t> words(warps * lanes * 8);
  std::vector<uint8_t> bytes(warps * lanes * 16);
  for (auto _ : state) {
    SchedOptions o;
    o.seed = 1;
    o.memory = model;
    o.races = races;
    Scheduler s(o);
    uint64_t counter = 0;
    s.launch("mixed", {2, warps / 2, lanes}, [&](SimCtx& ctx) {
      const uint32_t me = (ctx.cta() * ctx.warps_per_cta() + ctx.warp()) * ctx.warp_size() + ctx.lane();
      uint64_t* mine = &words[me * 8];
      const uint64_t* next = &words[((me + 1) % (warps * lanes)) * 8];
      for (int i = 0; i < iters; ++i) {
        ctx.store(exec::gpu_scope, exec::relaxed, mine, uint64_t(i));
        uint8_t v[16];
        ctx.read_bytes(v, &bytes[me * 16], 16);
        ctx.write_bytes(&bytes[me * 16], v, 16);
        (void)ctx.load(exec::gpu_scope, exec::relaxed, next);
        ctx.atomic_add(exec::gpu_scope, &counter, 1);
        if (i % 8 == 7) {
          ctx.fence(exec::gpu_scope);
          (void)ctx.load(exec::gpu_scope, exec::acquire, next);
        }
      }
    });
    const RunResult r = s.run();
    if (r.outcome != Outcome::kCompleted || counter != uint64_t(warps) * lanes * iters) state.SkipWithError("wrong result");
    steps += r.steps;
  }
  state.SetLabel(std::string(memory_model_name(model)) + (races ? " + race detector" : ""));
  state.counters["steps/s"] = benchmark::Counter(double(steps), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemoryModel)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_SchedulerRandom(benchmark::State& state) { run_atomics(state, Policy::kRandom); }
void BM_SchedulerPct(benchmark::State& state) { run_atomics(state, Policy::kPct); }
BENCHMARK(BM_SchedulerRandom)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchedulerPct)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
