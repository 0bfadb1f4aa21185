// Scheduler switches per second on one core: warps whose lanes do nothing but atomics, so
// every access is a scheduling point (one step = resume a lane + switch back); and a mixed
// load / store / atomic / fence loop in the sequentially consistent and the weak memory
// mode (its cost: store buffers, value histories, views).
#include <benchmark/benchmark.h>

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
  const auto model = MemoryModel(state.range(0));
  const uint32_t warps = 8, lanes = 32;
  const int iters = 200;
  uint64_t steps = 0;
  std::vector<uint64_t> words(warps * lanes * 8);
  for (auto _ : state) {
    SchedOptions o;
    o.seed = 1;
    o.memory = model;
    Scheduler s(o);
    uint64_t counter = 0;
    s.launch("mixed", {2, warps / 2, lanes}, [&](SimCtx& ctx) {
      const uint32_t me = (ctx.cta() * ctx.warps_per_cta() + ctx.warp()) * ctx.warp_size() + ctx.lane();
      uint64_t* mine = &words[me * 8];
      const uint64_t* next = &words[((me + 1) % (warps * lanes)) * 8];
      for (int i = 0; i < iters; ++i) {
        ctx.store(exec::gpu_scope, exec::relaxed, mine, uint64_t(i));
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
  state.SetLabel(memory_model_name(model));
  state.counters["steps/s"] = benchmark::Counter(double(steps), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MemoryModel)->ArgName("weak")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_SchedulerRandom(benchmark::State& state) { run_atomics(state, Policy::kRandom); }
void BM_SchedulerPct(benchmark::State& state) { run_atomics(state, Policy::kPct); }
BENCHMARK(BM_SchedulerRandom)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchedulerPct)->ArgNames({"warps", "lanes"})->Args({4, 1})->Args({8, 32})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
