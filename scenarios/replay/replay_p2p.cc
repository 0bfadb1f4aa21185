// The P2P runner (workload.p2p): core/p2p's copy-engine transport (kernels and send proxies),
// its kernel-less one (send and receive proxies) or the smcuda large-message path over
// gpu_sim::CudaModel's streams and copy engines (sim/p2p), classified as completed, hang (the
// report names which stream work waits for which), error or wrong data.
#include <cstdio>

#include "scenarios/replay/runner.h"
#include "sim/p2p/ce_run.h"
#include "sim/p2p/psm_run.h"

namespace doorbell::scenario {

namespace {

// The kernel-less transport: a hang names the least advanced stalled connection as the seed
// reads one (its send sub's position and view of recvMem.tail, its receive sub's and view of
// sendMem.head).
Run run_psm(const Scenario& sc, const P2pWorkload& w, const RunSpec& spec) {
  p2p::PsmRunConfig c = w.psm_run;
  c.gpus = sc.pes, c.phantom = sc.phantom, c.seed = spec.seed;
  const p2p::PsmRunResult r = p2p::run_psm(c, spec.so);
  Run out{{r.kind, r.failure}, r.run};
  uint32_t conns = 0;
  for (uint32_t f = 0; f < c.gpus; ++f)
    for (uint32_t t = 0; t < c.gpus; ++t) conns += f != t && (c.alltoall || t == (f + 1) % c.gpus) ? c.channels : 0;
  nlohmann::ordered_json& j = out.figures;
  j["connections"] = conns;
  j["bytes_per_gpu_pair"] = c.bytes_per_peer;
  j["bytes_copied"] = r.bytes_copied;  // both proxies' copies: twice the bytes delivered
  if (!r.stall.connection.empty()) {
    j["stall"] = {{"connection", r.stall.connection}, {"send_base", r.stall.send_base}, {"send_transmitted", r.stall.send_transmitted},
                  {"nsteps", r.stall.nsteps}, {"send_sees_tail", r.stall.send_sees_tail}, {"recv_base", r.stall.recv_base},
                  {"recv_transmitted", r.stall.recv_transmitted}, {"recv_sees_head", r.stall.recv_sees_head}};
  }
  if (!r.first_violation.empty()) j["first_violation"] = r.first_violation;
  char line[200];
  std::snprintf(line, sizeof line, "  psm: %u GPUs, %u connections, %llu B per GPU pair x %u calls, %.2f GiB copied\n", c.gpus, conns,
                (unsigned long long)c.bytes_per_peer, c.calls, double(r.bytes_copied) / double(1ull << 30));
  out.lines = line;
  if (!r.stall.connection.empty()) out.lines += "  stall: " + r.stall.line() + "\n";
  return out;
}

// The smcuda large-message path: how many sends went as RGETs and through the host, and what
// the receivers' IPC caches did.
Run run_smcuda(const P2pWorkload& w, const RunSpec& spec) {
  p2p::SmcudaRunConfig c = w.smcuda_run;
  c.seed = spec.seed;
  const p2p::SmcudaRunResult r = p2p::run_smcuda(c, spec.so);
  Run out{{r.kind, r.failure}, r.run};
  nlohmann::ordered_json& j = out.figures;
  j["messages_per_rank"] = c.messages;
  j["rgets"] = r.rgets;
  j["host_path"] = r.eagers;
  j["ipc_opens"] = r.opens;
  j["cache_hits"] = r.hits;
  j["cache_reopens"] = r.reopens;
  j["set_up"] = r.states;
  out.lines = "  smcuda: " + std::to_string(r.rgets) + " RGETs, " + std::to_string(r.eagers) + " host-path sends; cache " + std::to_string(r.opens) +
              " opens, " + std::to_string(r.hits) + " hits, " + std::to_string(r.reopens) + " reopens; " + r.states + "\n";
  return out;
}

}  // namespace

Run run(const Scenario& sc, const P2pWorkload& w, const RunSpec& spec, const ReplayOptions&) {
  if (w.transport == P2pTransport::kPsm) return run_psm(sc, w, spec);
  if (w.transport == P2pTransport::kSmcuda) return run_smcuda(w, spec);
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
