// The IBGDA runner's one run, a step per function: size the heap and configure the world
// (from the stack, through ibgda::world_config), place the buffers, run every PE's threads
// under the scheduler with the faults injected, classify the run, check its data (bytes or
// phantom records, atomics, expected words), explain a miss, and report. Steps in
// replay_ibgda.cc, the checks in replay_ibgda_check.cc, the report in replay_ibgda_report.cc;
// the runner (`run` in runner.h) adds the reference runs.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/replay/generators.h"
#include "scenarios/replay/runner.h"
#include "sim/ibgda/model_world.h"
#include "sim/ibgda/workload.h"

namespace doorbell::scenario {

class IbgdaReplay {
 public:
  // `gen`: the workload's generated messages (the same for its reference runs: made once).
  IbgdaReplay(const Scenario& sc, const IbgdaWorkload& w, const RunSpec& spec, const ReplayOptions& opt, const Generated& gen);
  Run run();

 private:
  bool configure(sim::Verdict& failed);
  void place();
  gpu_sim::SchedOptions scheduler_options();
  // What is wrong, or "".
  std::string check_phantom();
  std::string check_atomics();
  // The schedule and stale reads that explain a miss.
  void explain(const gpu_sim::Scheduler& s, Run& r) const;
  // The report's fields and the summary's lines: counters, timing, failover, per-QP table.
  void report(Run& r) const;

  const Scenario& sc;
  const IbgdaWorkload& w;
  const RunSpec& spec;
  const ReplayOptions& opt;
  const uint32_t threads;
  const Generated& gen;
  uint64_t slot = 0;
  std::unique_ptr<ibgda::ModelWorld> world;
  ibgda::Workload wl;                      // the scenario's ops and generated messages, placed
  std::optional<ibgda::WorkloadRun> run_;  // the one runner over them
  std::vector<ibgda::WorldFault> faults;
  uint64_t phantom_transfers = 0;
  double sample_ = 0;                          // the timeline's clock when not timed: observer samples
  std::vector<std::array<uint64_t, 4>> last_;  // each QP's indices at the last sample
};

}  // namespace doorbell::scenario
