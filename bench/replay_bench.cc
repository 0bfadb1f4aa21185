// Replaying the library's 8-PE alltoall of 4 GiB per PE on phantom memory: wall time per
// replay (the benchmark's time) and the process's peak resident set size. Acceptance:
// under 60 s and 2 GiB on the CI machine.
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

}  // namespace

BENCHMARK_MAIN();
