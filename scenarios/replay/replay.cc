#include "scenarios/replay/replay.h"

#include <cstdio>
#include <variant>

#include "scenarios/replay/runner.h"

namespace doorbell::scenario {

RunSpec run_spec(const Scenario& sc, const ReplayOptions& opt) {
  RunSpec r{opt.seed.value_or(sc.seed), opt.schedule.value_or(sc.schedule), opt.memory_model.value_or(sc.memory_model), {}};
  r.so.seed = r.seed;
  r.so.policy = r.schedule == "pct"       ? gpu_sim::Policy::kPct
                : r.schedule == "timed"   ? gpu_sim::Policy::kTimed
                : r.schedule == "preempt" ? gpu_sim::Policy::kPreempt
                                          : gpu_sim::Policy::kRandom;
  // preempt: seed 0 is the schedule without a preemption; seed s > 0 preempts at point
  // (s - 1) / kPreemptChoices + 1, to runnable agent (s - 1) % kPreemptChoices.
  if (r.seed != 0 && r.so.policy == gpu_sim::Policy::kPreempt)
    r.so.preempt_at = (r.seed - 1) / kPreemptChoices + 1, r.so.preempt_to = uint32_t((r.seed - 1) % kPreemptChoices);
  r.so.hang_spins = 512;
  r.so.memory = r.memory_model == "weak" ? gpu_sim::MemoryModel::kWeak : gpu_sim::MemoryModel::kSc;
  // Replay and explore check byte ranges for data races unless told not to; a phantom P2P run
  // moves no bytes at all (its copies and FIFO slots are sizes only): nothing to check there.
  r.races = opt.races.value_or(!(sc.phantom && std::holds_alternative<P2pWorkload>(sc.work)));
  r.so.races = r.races;
  return r;
}

bool judge(const Expectation& e, sim::RunKind k, double sim_time_ns, std::string& detail) {
  using sim::RunKind;
  switch (e.result) {
    case Expect::kCompletes: {
      if (k != RunKind::kCompleted) return false;
      if (e.max_sim_us == 0 || sim_time_ns <= e.max_sim_us * 1000) return true;
      detail = "simulated time " + std::to_string(sim_time_ns / 1000) + " us exceeds the limit of " + std::to_string(e.max_sim_us) + " us";
      return false;
    }
    case Expect::kHangs: return k == RunKind::kHang && detail.find(e.waits_on) != std::string::npos;
    case Expect::kErrors: return k == RunKind::kError && detail.find(e.syndrome) != std::string::npos;
  }
  return false;
}

namespace {

const char* expected_name(Expect e) { return e == Expect::kCompletes ? "completes" : e == Expect::kHangs ? "hangs" : "errors"; }

// The report: what ran (scenario, seed, schedule, memory model), what came out against what
// was expected, the run's length and trace hash; then the workload's fields, the detail and
// the reference runs'.
nlohmann::ordered_json report(const Scenario& sc, const RunSpec& spec, const ReplayResult& out, const Run& r) {
  nlohmann::ordered_json j;
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r.sched.trace_hash);
  j["scenario"] = sc.name;
  j["seed"] = spec.seed;
  j["schedule"] = spec.schedule;
  j["memory_model"] = spec.memory_model;
  j["races"] = spec.races;
  j["outcome"] = sim::run_kind_name(out.outcome);
  j["expected"] = expected_name(sc.expect.result);
  j["expectation_met"] = out.met;
  j["steps"] = r.sched.steps;
  j["trace_hash"] = hash;
  for (const auto& [k, v] : r.figures.items()) j[k] = v;
  if (!out.detail.empty()) j["detail"] = out.detail;
  for (const auto& [k, v] : r.compared.items()) j[k] = v;
  return j;
}

}  // namespace

ReplayResult replay(const Scenario& sc, const ReplayOptions& opt) {
  const RunSpec spec = run_spec(sc, opt);
  const Run r = std::visit([&](const auto& w) { return run(sc, w, spec, opt); }, sc.work);
  ReplayResult out;
  out.outcome = r.verdict.kind;
  out.detail = r.verdict.detail;
  out.met = judge(sc.expect, out.outcome, r.sched.sim_time_ns, out.detail) && r.compared_met;
  out.report = report(sc, spec, out, r);
  out.summary = sc.name + ": " + sim::run_kind_name(out.outcome) + " (expected " + expected_name(sc.expect.result) + ") — " +
                (out.met ? "OK" : "EXPECTATION NOT MET") + "\n" + r.lines;
  return out;
}

}  // namespace doorbell::scenario
