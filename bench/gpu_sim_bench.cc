// Scheduler switches per second on one core: warps whose lanes do nothing but atomics, so
// every access is a scheduling point (one step = resume a lane + switch back).
#include <benchmark/benchmark.h>

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

void BM_SchedulerRandom(benchmark::State& state) { run_atomics(state, Policy::kRandom); }
void BM_SchedulerPct(benchmark::State& state) { run_atomics(state, Policy::kPct); }
BENCHMARK(BM_SchedulerRandom)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchedulerPct)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
