// The copy-engine P2P runner (workload.p2p): core/p2p's kernels and send proxies over
// gpu_sim::CudaModel's streams and copy engines (sim/p2p), classified as completed, hang
// (the report names which stream work waits for which), error or wrong data.
#include <cstdio>

#include "scenarios/replay/runner.h"
#include "sim/p2p/ce_run.h"

namespace doorbell::scenario {

Run run(const Scenario& sc, const P2pWorkload& w, const RunSpec& spec, const ReplayOptions&) {
  p2p::CeRunConfig c = w.run;
  c.gpus = sc.pes, c.phantom = sc.phantom, c.seed = spec.seed;  // what the scenario's common part holds
  const p2p::CeRunResult r = p2p::run_ce(c, spec.so);
  Run out{{r.kind, r.failure}, r.run};
  const uint32_t conns = c.alltoall ? c.gpus * (c.gpus - 1) : 1;
  nlohmann::ordered_json& j = out.figures;
  j["connections"] = conns;
  j["bytes_per_connection"] = c.bytes;
  j["bytes_copied"] = r.bytes_copied;
  if (spec.so.policy == gpu_sim::Policy::kTimed && r.run.sim_time_ns > 0) {
    j["sim_time_ns"] = int64_t(r.run.sim_time_ns);
    j["bandwidth_per_gpu_gbps"] = double(int64_t(double(r.bytes_copied) / c.gpus / r.run.sim_time_ns * 1000)) / 1000.0;
  }
  char line[160];
  std::snprintf(line, sizeof line, "  %u GPUs, %u connections x %llu B, %.2f GiB copied\n", c.gpus, conns, (unsigned long long)c.bytes,
                double(r.bytes_copied) / double(1ull << 30));
  out.lines = line;
  return out;
}

}  // namespace doorbell::scenario
