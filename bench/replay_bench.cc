// Replays at scale, on phantom memory: wall time per replay (the benchmark's time) and the
// process's peak resident set size so far (the runs go from small to large). The library's
// 8-PE alltoall of 4 GiB per PE (under 60 s and 2 GiB on the CI machine), and a DeepEP-like
// dispatch + combine (1024 experts, 128 tokens x top-8 of 7 KB per PE) from 8 to 256 PEs
// (256 PEs: under 60 s and 8 GB).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "scenarios/replay/parse.h"
#include "scenarios/replay/replay.h"

namespace {

void BM_Alltoall8Pe4GiBPhantom(benchmark::State& state) {
  auto sc = doorbell::scenario::parse_file(DOORBELL_SCENARIO_DIR "/alltoall-8pe-4gb-phantom.yaml");
  if (!sc) {
    state.SkipWithError(sc.status().message().c_str());
    return;
  }
  for (auto _ : state) {
    const doorbell::scenario::ReplayResult r = doorbell::scenario::replay(*sc);
    if (!r.met) state.SkipWithError(("expectation not met: " + r.detail).c_str());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["max_rss_MiB"] = double(ru.ru_maxrss) / 1024.0;
  state.counters["bytes_moved_GiB"] = 8.0 * 4.0;
}
BENCHMARK(BM_Alltoall8Pe4GiBPhantom)->Unit(benchmark::kSecond)->Iterations(3)->UseRealTime();

void BM_DeepEpDispatchCombine(benchmark::State& state) {
  auto sc = doorbell::scenario::parse_file(DOORBELL_SCALE_DIR "/deepep-dispatch-combine-256pe-phantom.yaml");
  if (!sc) {
    state.SkipWithError(sc.status().message().c_str());
    return;
  }
  sc->pes = uint32_t(state.range(0));
  uint64_t messages = 0;
  for (auto _ : state) {
    const doorbell::scenario::ReplayResult r = doorbell::scenario::replay(*sc);
    if (!r.met) state.SkipWithError(("expectation not met: " + r.detail).c_str());
    messages = r.report.value("generated_messages", uint64_t(0));
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["max_rss_MiB"] = double(ru.ru_maxrss) / 1024.0;
  state.counters["messages"] = double(messages);
  state.counters["rc_qps"] = double(sc->pes) * sc->pes;
}
BENCHMARK(BM_DeepEpDispatchCombine)->RangeMultiplier(2)->Range(8, 256)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
