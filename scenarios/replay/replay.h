// Replaying a scenario on the CPU model: the IBGDA stack on NIC models, every PE's threads
// running the workload under the scheduler, faults applied, the outcome classified
// (completed / hang / error / wrong-data) and compared with the expectation. The JSON report
// is a pure function of (scenario, seed, schedule): same inputs, byte-identical report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hw/gpu_sim/scheduler.h"
#include "scenarios/replay/scenario.h"

namespace doorbell::scenario {

struct ReplayOptions {
  std::optional<uint64_t> seed;  // overrides the scenario's
  std::optional<std::string> schedule;  // overrides the scenario's (random | pct | timed)
  std::optional<std::string> memory_model;  // overrides the scenario's (sc | weak)
  nlohmann::ordered_json* trace = nullptr;  // if set: Chrome / Perfetto trace events are appended
  bool progress = false;                    // a progress line on stderr
};

struct ReplayResult {
  bool met = false;           // the expectation held
  std::string outcome;        // completed | hang | error | wrong-data | broken-invariant
  std::string detail;         // hang report, error, or what differed
  nlohmann::ordered_json report;
  std::string summary;        // human-readable table
};

ReplayResult replay(const Scenario& sc, const ReplayOptions& opt = {});

// The fields every report starts with: what ran (scenario, seed, schedule, memory model), what
// came out against what was expected, the run's length and trace hash.
void report_head(nlohmann::ordered_json& j, const Scenario& sc, uint64_t seed, const std::string& schedule,
                 const std::string& memory_model, const ReplayResult& out, uint64_t steps, uint64_t trace_hash);

// What a run on the model needs besides the program: the seed, schedule and memory model (the
// options over the scenario's) and the scheduler options they make.
struct RunSpec {
  uint64_t seed;
  std::string schedule, memory_model;
  gpu_sim::SchedOptions so;
};
RunSpec run_spec(const Scenario& sc, const ReplayOptions& opt, uint32_t hang_spins);
// The preempt schedule's seeds: kPreemptChoices per scheduling point (the agent switched to).
inline constexpr uint64_t kPreemptChoices = 8;

// A device-level run's outcome (P2P, NVLS): hang, step-limit, completed, or — from its failure
// text — an error (`is_error`) or wrong data; and whether the scenario expected that.
void classify(ReplayResult& out, const Scenario& sc, gpu_sim::Outcome o, const std::string& failure, bool is_error);

}  // namespace doorbell::scenario
