#include "scenarios/replay/replay_p2p.h"

#include <cstdio>

#include "core/p2p/host/ce_run.h"

namespace doorbell::scenario {

namespace {
gpu_sim::StreamKind stream_kind(const std::string& s) {
  if (s == "legacy_default") return gpu_sim::StreamKind::kLegacyDefault;
  if (s == "per_thread_default") return gpu_sim::StreamKind::kPerThreadDefault;
  if (s == "blocking") return gpu_sim::StreamKind::kBlocking;
  return gpu_sim::StreamKind::kNonBlocking;
}
}  // namespace

ReplayResult replay_p2p(const Scenario& sc, const ReplayOptions& opt) {
  ReplayResult out;
  const uint64_t seed = opt.seed.value_or(sc.seed);
  const std::string schedule = opt.schedule.value_or(sc.schedule);
  const std::string memory_model = opt.memory_model.value_or(sc.memory_model);
  p2p::CeRunConfig c;
  c.gpus = sc.pes;
  c.alltoall = sc.p2p.alltoall;
  c.bytes = sc.p2p.bytes;
  c.step_bytes = sc.p2p.step_bytes;
  c.kernel_stream = stream_kind(sc.p2p.kernel_stream);
  c.proxy_stream = stream_kind(sc.p2p.proxy_stream);
  c.max_connections = sc.p2p.max_connections;
  c.phantom = sc.phantom;
  c.next_kernel_queued = sc.p2p.next_kernel_queued;
  c.direct = sc.p2p.registered;
  c.kernel_chunk_bytes = sc.p2p.kernel_chunk_bytes;
  c.extra_streams = sc.p2p.streams_before_proxies;
  c.proxy_counter_bits = sc.p2p.proxy_counter_bits;
  c.seed = seed;
  gpu_sim::SchedOptions so;
  so.seed = seed;
  so.policy = schedule == "pct" ? gpu_sim::Policy::kPct : schedule == "timed" ? gpu_sim::Policy::kTimed : gpu_sim::Policy::kRandom;
  so.hang_spins = 512;
  so.memory = memory_model == "weak" ? gpu_sim::MemoryModel::kWeak : gpu_sim::MemoryModel::kSc;
  const p2p::CeRunResult r = p2p::run_ce(c, so);
  out.outcome = r.run.outcome == gpu_sim::Outcome::kHang        ? "hang"
                : r.run.outcome == gpu_sim::Outcome::kStepLimit ? "step-limit"
                : r.failure.empty()                             ? "completed"
                                                                : "wrong-data";
  out.detail = r.failure;
  switch (sc.expect) {
    case Expect::kCompletes: out.met = out.outcome == "completed"; break;
    case Expect::kHangs: out.met = out.outcome == "hang" && out.detail.find(sc.expect_waits_on) != std::string::npos; break;
    case Expect::kErrors: out.met = false; break;  // a P2P run has no error CQEs
  }
  const uint32_t conns = c.alltoall ? c.gpus * (c.gpus - 1) : 1;
  nlohmann::ordered_json& j = out.report;
  report_head(j, sc, seed, schedule, memory_model, out, r.run.steps, r.run.trace_hash);
  j["connections"] = conns;
  j["bytes_per_connection"] = c.bytes;
  j["bytes_copied"] = r.bytes_copied;
  if (so.policy == gpu_sim::Policy::kTimed && r.run.sim_time_ns > 0) {
    j["sim_time_ns"] = int64_t(r.run.sim_time_ns);
    j["bandwidth_per_gpu_gbps"] = double(int64_t(double(r.bytes_copied) / c.gpus / r.run.sim_time_ns * 1000)) / 1000.0;
  }
  if (!out.detail.empty()) j["detail"] = out.detail;
  char line[200];
  std::snprintf(line, sizeof line, "%s: %s (expected %s) — %s\n  %u GPUs, %u connections x %llu B, %.2f GiB copied\n",
                sc.name.c_str(), out.outcome.c_str(), j["expected"].get<std::string>().c_str(), out.met ? "OK" : "EXPECTATION NOT MET",
                c.gpus, conns, (unsigned long long)c.bytes, double(r.bytes_copied) / double(1ull << 30));
  out.summary = line;
  return out;
}

}  // namespace doorbell::scenario
