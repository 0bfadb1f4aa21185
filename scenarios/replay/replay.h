// Replaying a scenario on the CPU model: its workload's runner (runner.h) runs it once under
// the scheduler — the IBGDA stack on NIC models, the copy-engine transport or an NVLS
// collective — and replay() judges the outcome against the expectation and writes the one
// report and summary. The JSON report is a pure function of (scenario, seed, schedule, memory
// model): same inputs, byte-identical report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hw/gpu_sim/scheduler.h"
#include "scenarios/replay/scenario.h"
#include "sim/verdict.h"

namespace doorbell::scenario {

struct ReplayOptions {
  std::optional<uint64_t> seed;  // overrides the scenario's
  std::optional<std::string> schedule;  // overrides the scenario's (random | pct | timed | preempt)
  std::optional<std::string> memory_model;  // overrides the scenario's (sc | weak)
  std::optional<bool> races;                // the race detector (SchedOptions::races); default on
  nlohmann::ordered_json* trace = nullptr;  // if set: Chrome / Perfetto trace events are appended
  bool progress = false;                    // a progress line on stderr
};

struct ReplayResult {
  bool met = false;  // the expectation held (and, with a comparison run, held there too)
  sim::RunKind outcome = sim::RunKind::kCompleted;
  std::string detail;  // hang report, error, or what differed
  nlohmann::ordered_json report;
  std::string summary;  // a line, then the workload's figures and tables (--verbose)
};

ReplayResult replay(const Scenario& sc, const ReplayOptions& opt = {});

// What a run on the model needs besides the program: the seed, schedule and memory model (the
// options over the scenario's) and the scheduler options they make.
struct RunSpec {
  uint64_t seed;
  std::string schedule, memory_model;
  gpu_sim::SchedOptions so;
  bool races = true;
};
RunSpec run_spec(const Scenario& sc, const ReplayOptions& opt);
// The preempt schedule's seeds: kPreemptChoices per scheduling point (the agent switched to).
inline constexpr uint64_t kPreemptChoices = 8;

// The one expectation switch: whether a run of kind `k` (explained by `detail`) that ended at
// `sim_time_ns` of simulated time met `e`. A completed run over e.max_sim_us says so in `detail`.
bool judge(const Expectation& e, sim::RunKind k, double sim_time_ns, std::string& detail);

}  // namespace doorbell::scenario
