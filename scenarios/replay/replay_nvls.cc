#include "scenarios/replay/replay_nvls.h"

#include <cstdio>

#include "sim/nvls/nvls_run.h"

namespace doorbell::scenario {

namespace {
nvls::DType dtype_of(const std::string& s) {
  for (int t = 0; t < 8; ++t)
    if (s == nvls::dtype_name(nvls::DType(t))) return nvls::DType(t);
  return nvls::DType::kF32;
}
nvls::RedOp op_of(const std::string& s) {
  for (int o = 0; o < 3; ++o)
    if (s == nvls::redop_name(nvls::RedOp(o))) return nvls::RedOp(o);
  return nvls::RedOp::kSum;
}
}  // namespace

ReplayResult replay_nvls(const Scenario& sc, const ReplayOptions& opt) {
  ReplayResult out;
  // Timed: a waiting CTA polls every poll_ns while another moves a slot for microseconds.
  const RunSpec spec = run_spec(sc, opt, opt.schedule.value_or(sc.schedule) == "timed" ? 1u << 20 : 512);
  const uint64_t seed = spec.seed;
  nvls::NvlsRunConfig c;
  c.ranks = sc.pes;
  c.channels = sc.nvls.channels;
  c.reducers = sc.nvls.reducers;
  c.dtype = dtype_of(sc.nvls.dtype);
  c.op = op_of(sc.nvls.op);
  c.allreduce = sc.nvls.allreduce;
  c.count = sc.nvls.count;
  c.slot_bytes = sc.nvls.slot_bytes;
  c.phantom = sc.phantom;
  c.seed = seed;
  c.warps_per_cta = 1;
  c.lanes = sc.phantom ? 1 : 4;  // sizes only: thread 0 is all a step needs
  const nvls::NvlsRunResult r = nvls::run_nvls(c, spec.so);
  const auto starts = [&r](const char* p) { return r.failure.rfind(p, 0) == 0; };
  classify(out, sc, r.run.outcome, r.failure, starts("nvls:") || starts("multimem") || starts("multicast:"));
  const uint64_t bytes = c.count * nvls::dtype_bytes(c.dtype) * (c.allreduce ? 1 : c.ranks);
  nlohmann::ordered_json& j = out.report;
  report_head(j, sc, seed, spec.schedule, spec.memory_model, out, r.run.steps, r.run.trace_hash);
  j["collective"] = c.allreduce ? "allreduce" : "reducescatter";
  j["dtype"] = nvls::dtype_name(c.dtype);
  j["op"] = nvls::redop_name(c.op);
  j["bytes_per_rank"] = bytes;
  if (r.busbw_gbps > 0) {
    j["sim_time_ns"] = int64_t(r.run.sim_time_ns);
    j["algbw_gbps"] = double(int64_t(r.algbw_gbps * 100)) / 100.0;
    j["busbw_gbps"] = double(int64_t(r.busbw_gbps * 100)) / 100.0;
  }
  if (!out.detail.empty()) j["detail"] = out.detail;
  char line[240];
  std::snprintf(line, sizeof line, "%s: %s (expected %s) — %s\n  NVLS %s %s %s, %u GPUs x %llu B%s\n", sc.name.c_str(), out.outcome.c_str(),
                j["expected"].get<std::string>().c_str(), out.met ? "OK" : "EXPECTATION NOT MET", j["collective"].get<std::string>().c_str(),
                nvls::dtype_name(c.dtype), nvls::redop_name(c.op), c.ranks, (unsigned long long)bytes,
                r.busbw_gbps > 0 ? (", busbw " + std::to_string(int(r.busbw_gbps + 0.5)) + " GB/s (simulated)").c_str() : "");
  out.summary = line;
  return out;
}

}  // namespace doorbell::scenario
