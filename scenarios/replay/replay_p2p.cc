#include "scenarios/replay/replay_p2p.h"

#include <cstdio>

#include "sim/p2p/ce_run.h"

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
  const RunSpec spec = run_spec(sc, opt, 512);
  const uint64_t seed = spec.seed;
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
  const gpu_sim::SchedOptions& so = spec.so;
  const p2p::CeRunResult r = p2p::run_ce(c, so);
  classify(out, sc, r.run.outcome, r.failure, r.failure.rfind("device memory:", 0) == 0);
  const uint32_t conns = c.alltoall ? c.gpus * (c.gpus - 1) : 1;
  nlohmann::ordered_json& j = out.report;
  report_head(j, sc, seed, spec.schedule, spec.memory_model, out, r.run.steps, r.run.trace_hash);
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
