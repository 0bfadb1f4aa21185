#include "scenarios/replay/replay.h"

#include <cstdio>

#include "scenarios/replay/replay_ibgda.h"
#include "scenarios/replay/replay_nvls.h"
#include "scenarios/replay/replay_p2p.h"

namespace doorbell::scenario {

namespace {
ReplayResult replay_one(const Scenario& sc, const ReplayOptions& opt);
}  // namespace

RunSpec run_spec(const Scenario& sc, const ReplayOptions& opt, uint32_t hang_spins) {
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
  r.so.hang_spins = hang_spins;
  r.so.memory = r.memory_model == "weak" ? gpu_sim::MemoryModel::kWeak : gpu_sim::MemoryModel::kSc;
  return r;
}

void classify(ReplayResult& out, const Scenario& sc, gpu_sim::Outcome o, const std::string& failure, bool is_error) {
  out.outcome = o == gpu_sim::Outcome::kHang        ? "hang"
                : o == gpu_sim::Outcome::kStepLimit ? "step-limit"
                : failure.empty()                   ? "completed"
                : is_error                          ? "error"
                                                    : "wrong-data";
  out.detail = failure;
  switch (sc.expect) {
    case Expect::kCompletes: out.met = out.outcome == "completed"; break;
    case Expect::kHangs: out.met = out.outcome == "hang" && out.detail.find(sc.expect_waits_on) != std::string::npos; break;
    case Expect::kErrors: out.met = out.outcome == "error" && out.detail.find(sc.expect_syndrome) != std::string::npos; break;
  }
}

void report_head(nlohmann::ordered_json& j, const Scenario& sc, uint64_t seed, const std::string& schedule,
                 const std::string& memory_model, const ReplayResult& out, uint64_t steps, uint64_t trace_hash) {
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)trace_hash);
  j["scenario"] = sc.name;
  j["seed"] = seed;
  j["schedule"] = schedule;
  j["memory_model"] = memory_model;
  j["outcome"] = out.outcome;
  j["expected"] = sc.expect == Expect::kCompletes ? "completes" : sc.expect == Expect::kHangs ? "hangs" : "errors";
  j["expectation_met"] = out.met;
  j["steps"] = steps;
  j["trace_hash"] = hash;
}

// With `compare: cpu_proxy` the same workload also runs with a CPU proxy posting for the GPU
// (timed schedule), and the report carries both message rates and their ratio.
ReplayResult replay(const Scenario& sc, const ReplayOptions& opt) {
  ReplayResult out = replay_one(sc, opt);
  // Failover in simulated time: the same run without faults is the reference for the dip.
  if (sc.failover && (sc.random_faults || !sc.faults.empty()) && out.report.contains("sim_time_ns")) {
    Scenario clean = sc;
    clean.faults.clear();
    clean.random_faults = false;
    ReplayOptions o = opt;
    o.trace = nullptr;
    const ReplayResult c = replay_one(clean, o);
    if (c.report.contains("sim_time_ns")) {
      const double t = out.report["sim_time_ns"].get<double>(), t0 = c.report["sim_time_ns"].get<double>();
      const double dip = t > 0 ? 1 - t0 / t : 0;  // share of the fault-free rate lost over the run
      out.report["fault_free_sim_time_ns"] = c.report["sim_time_ns"];
      out.report["throughput_dip"] = double(int64_t(dip * 1000)) / 1000;
      char line[160];
      std::snprintf(line, sizeof line, "  vs fault-free: %.3f us -> throughput dip %.1f %%\n", t0 / 1000, dip * 100);
      const size_t first = out.summary.find('\n') + 1;
      out.summary.insert(first, line);
    }
  }
  if (!sc.compare_cpu_proxy || sc.cpu_proxy) return out;
  Scenario proxied = sc;
  proxied.cpu_proxy = true;
  proxied.expect_max_sim_us = 0;  // the limit is for the path under test; the proxy is the baseline
  ReplayOptions o = opt;
  o.trace = nullptr;
  const ReplayResult p = replay_one(proxied, o);
  out.met = out.met && p.met;
  if (out.report.contains("message_rate_mops") && p.report.contains("message_rate_mops")) {
    const double g = out.report["message_rate_mops"].get<double>(), c = p.report["message_rate_mops"].get<double>();
    const double ratio = c > 0 ? double(int64_t(g / c * 100)) / 100.0 : 0.0;
    out.report["comparison"] = {{"gpu_initiated_mops", g},
                                {"cpu_proxy_mops", c},
                                {"ratio", ratio},
                                {"cpu_proxy_sim_time_ns", p.report["sim_time_ns"]},
                                {"cpu_proxy_outcome", p.outcome}};
    char line[200];
    std::snprintf(line, sizeof line, "  vs CPU proxy: %.3f M ops/s (%s) -> GPU-initiated is %.2fx\n", c, p.outcome.c_str(), ratio);
    out.summary += line;
  }
  return out;
}

namespace {

ReplayResult replay_one(const Scenario& sc, const ReplayOptions& opt) {
  if (sc.p2p.on) return replay_p2p(sc, opt);
  if (sc.nvls.on) return replay_nvls(sc, opt);
  return replay_ibgda(sc, opt);
}

}  // namespace

}  // namespace doorbell::scenario
