// Replaying a scenario on the CPU model: the IBGDA stack on NIC models, every PE's threads
// running the workload under the scheduler, faults applied, the outcome classified
// (completed / hang / error / wrong-data) and compared with the expectation. The JSON report
// is a pure function of (scenario, seed, schedule): same inputs, byte-identical report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

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
  std::string outcome;        // completed | hang | error | wrong-data
  std::string detail;         // hang report, error, or what differed
  nlohmann::ordered_json report;
  std::string summary;        // human-readable table
};

ReplayResult replay(const Scenario& sc, const ReplayOptions& opt = {});

// The fields every report starts with: what ran (scenario, seed, schedule, memory model), what
// came out against what was expected, the run's length and trace hash.
void report_head(nlohmann::ordered_json& j, const Scenario& sc, uint64_t seed, const std::string& schedule,
                 const std::string& memory_model, const ReplayResult& out, uint64_t steps, uint64_t trace_hash);

}  // namespace doorbell::scenario
