// 8-byte put_nbi operations per second, end to end on the CPU model in fast mode (agents
// run to completion, no switch per access): one PE pair, one warp issuing, the NIC engines
// consuming the WQEs; every run ends with quiet, so every put is counted complete.
#include <benchmark/benchmark.h>

#include "core/ibgda/api.h"
#include "sim/ibgda/model_world.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace {

using namespace doorbell;
using namespace doorbell::ibgda;

void BM_PutNbi8(benchmark::State& state) {
  const uint32_t lanes = uint32_t(state.range(0));
  const uint32_t batch = uint32_t(state.range(1));
  const int per_lane = 4096;
  uint64_t ops = 0, accesses = 0;
  for (auto _ : state) {
    state.PauseTiming();
    WorldConfig c;
    c.npes = 2;
    c.log_qp_depth = 10;
    c.opt.num_requests_in_batch = batch;
    c.heap.heap_bytes = 4ull << 20;
    auto w = ModelWorld::create(c);
    const uint64_t buf = *(*w)->malloc(1 << 20);
    gpu_sim::SchedOptions o;
    o.policy = gpu_sim::Policy::kRunToCompletion;
    gpu_sim::Scheduler s(o);
    DevState* st = &(*w)->state(0);
    auto* base = reinterpret_cast<uint64_t*>((*w)->at(0, buf));
    s.launch("put", {1, 1, lanes}, [st, base, per_lane](gpu_sim::SimCtx& ctx) {
      uint64_t* p = base + ctx.lane() * per_lane;
      for (int i = 0; i < per_lane; ++i) (void)doorbell::put_nbi(ctx, *st, p + i, p + i, 1, 1);
      (void)doorbell::quiet(ctx, *st);
    });
    (*w)->attach(s);
    state.ResumeTiming();
    const gpu_sim::RunResult r = s.run();
    state.PauseTiming();
    if (r.outcome != gpu_sim::Outcome::kCompleted || st->qps[1].mv->cons_idx != uint64_t(per_lane) * lanes)
      state.SkipWithError("run did not complete every put");
    ops += uint64_t(per_lane) * lanes;
    accesses += r.accesses;
    w->reset();
    state.ResumeTiming();
  }
  state.counters["puts/s"] = benchmark::Counter(double(ops), benchmark::Counter::kIsRate);
  // Simulated accesses (scheduling points) per put, the NIC's included: what the model pays for.
  state.counters["accesses/put"] = double(accesses) / double(ops);
}
BENCHMARK(BM_PutNbi8)->ArgNames({"lanes", "batch"})->Args({1, 32})->Args({32, 32})->Args({32, 1})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
