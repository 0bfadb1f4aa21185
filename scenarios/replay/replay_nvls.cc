// The NVLS runner (workload.nvls): core/nvls's ReduceScatter or AllReduce over the model
// NVSwitch (sim/nvls), compared with a reference (real memory) or timed (phantom: nccl-tests'
// algbw / busbw from the simulated time).
#include <cstdio>

#include "scenarios/replay/runner.h"
#include "sim/nvls/nvls_run.h"

namespace doorbell::scenario {

Run run(const Scenario& sc, const NvlsWorkload& w, const RunSpec& spec, const ReplayOptions&) {
  nvls::NvlsRunConfig c = w.run;
  c.ranks = sc.pes, c.phantom = sc.phantom, c.seed = spec.seed;  // what the scenario's common part holds
  c.lanes = sc.phantom ? 1 : 4;                                  // sizes only: thread 0 is all a step needs
  // Timed: a waiting CTA polls every poll_ns while another moves a slot for microseconds, so
  // far more polls than elsewhere pass before one is a hang.
  gpu_sim::SchedOptions so = spec.so;
  if (so.policy == gpu_sim::Policy::kTimed) so.hang_spins = 1u << 20;
  const nvls::NvlsRunResult r = nvls::run_nvls(c, so);
  Run out{{r.kind, r.failure}, r.run};
  const uint64_t bytes = c.count * nvls::dtype_bytes(c.dtype) * (c.allreduce ? 1 : c.ranks);
  const char* collective = c.allreduce ? "allreduce" : "reducescatter";
  nlohmann::ordered_json& j = out.figures;
  j["collective"] = collective;
  j["dtype"] = nvls::dtype_name(c.dtype);
  j["op"] = nvls::redop_name(c.op);
  j["bytes_per_rank"] = bytes;
  if (r.busbw_gbps > 0) {
    j["sim_time_ns"] = int64_t(r.run.sim_time_ns);
    j["algbw_gbps"] = double(int64_t(r.algbw_gbps * 100)) / 100.0;
    j["busbw_gbps"] = double(int64_t(r.busbw_gbps * 100)) / 100.0;
  }
  // What runs beside the defaults: registered buffers, NCCL's structure, calls back to back.
  static const char* const kRegistered[] = {"", ", output registered", ", input and output registered"};
  std::string extras = kRegistered[int(c.registered)];
  if (c.sync_warp) extras += ", a sync warp";
  if (c.warp_hunks) extras += ", hunks a warp wide";
  if (c.calls > 1) extras += ", " + std::to_string(c.calls) + " calls";
  char line[256];
  std::snprintf(line, sizeof line, "  NVLS %s %s %s, %u GPUs x %llu B%s%s\n", collective, nvls::dtype_name(c.dtype), nvls::redop_name(c.op),
                c.ranks, (unsigned long long)bytes, extras.c_str(),
                r.busbw_gbps > 0 ? (", busbw " + std::to_string(int(r.busbw_gbps + 0.5)) + " GB/s (simulated)").c_str() : "");
  out.lines = line;
  return out;
}

}  // namespace doorbell::scenario
