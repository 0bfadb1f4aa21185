// The runner interface: one `run` per workload (replay_ibgda.cc, replay_p2p.cc,
// replay_nvls.cc), which replay() picks by the scenario's workload. A runner builds its model
// from the scenario, runs it once under `spec`, classifies the run (sim::Verdict, typed where
// it is found) and hands back its own report fields and summary lines; replay() judges the
// expectation and writes the report's head, the detail and the summary's first line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hw/gpu_sim/scheduler.h"
#include "scenarios/replay/replay.h"
#include "sim/verdict.h"

namespace doorbell::scenario {

struct Run {
  sim::Verdict verdict;
  gpu_sim::RunResult sched;        // steps, trace hash, simulated time (empty when set-up failed)
  nlohmann::ordered_json figures = nlohmann::ordered_json::object();  // the workload's report fields, after the head
  std::string lines;               // the workload's summary lines, after the first
  // Reference runs of the same workload (IBGDA: fault-free, with a CPU proxy): their report
  // fields (after the detail) and whether they met the expectation too.
  nlohmann::ordered_json compared = nlohmann::ordered_json::object();
  bool compared_met = true;
};

Run run(const Scenario& sc, const IbgdaWorkload& w, const RunSpec& spec, const ReplayOptions& opt);
Run run(const Scenario& sc, const P2pWorkload& w, const RunSpec& spec, const ReplayOptions& opt);
Run run(const Scenario& sc, const NvlsWorkload& w, const RunSpec& spec, const ReplayOptions& opt);

}  // namespace doorbell::scenario
