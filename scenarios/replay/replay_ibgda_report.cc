// The IBGDA run's report fields and summary lines: the preempt point, faults, failover,
// generated messages, simulated rates, and every QP's indices and NIC counters.
#include <cstdio>

#include "scenarios/replay/replay_ibgda.h"

namespace doorbell::scenario {

using namespace doorbell::ibgda;

void IbgdaReplay::report(Run& r) const {
  nlohmann::ordered_json& j = r.figures;
  const gpu_sim::RunResult& s = r.sched;
  if (spec.so.policy == gpu_sim::Policy::kPreempt) j["points"] = s.points, j["preempted"] = s.preempted;
  j["accesses"] = s.accesses;
  if (!faults.empty()) {
    nlohmann::ordered_json fl = nlohmann::ordered_json::array();
    for (const WorldFault& f : faults) fl.push_back(describe(f));
    j["faults"] = fl;
  }
  const RecoveryStats& rs = world->recovery_stats();
  if (w.stack.failover)
    j["failover"] = {{"suspected", rs.suspected}, {"rerung", rs.rerung},
                     {"failed", rs.failed},       {"recovered", rs.recovered},
                     {"dead_pairs", rs.dead},     {"longest_recovery_ns", int64_t(rs.max_recovery_ns)},
                     {"lost_results", run_->lost_results()}};
  if (gen.messages != 0) j["generated_messages"] = gen.messages, j["generated_bytes"] = gen.bytes;
  if (sc.phantom) j["phantom_transfers"] = phantom_transfers;
  if (spec.so.policy == gpu_sim::Policy::kTimed) {
    // What the workload issued, over the simulated time until its last thread finished.
    uint64_t ops = 0, bytes = 0;
    for (const Op& o : w.ops)
      if (o.kind != OpKind::kQuiet) {
        uint64_t runners = 0;  // threads that issue it (a collective put is issued once)
        for (uint64_t t = 0; t < threads; ++t) runners += owns_slot(o, t, wl.shape);
        ops += uint64_t(o.count) * runners, bytes += uint64_t(o.count) * runners * o.bytes;
      }
    ops += gen.messages, bytes += gen.bytes;
    const double t = s.sim_time_ns;
    j["sim_time_ns"] = int64_t(t);
    j["ops"] = ops;
    j["message_rate_mops"] = t > 0 ? double(int64_t(double(ops) / t * 1e6)) / 1000.0 : 0.0;  // M ops/s
    j["bandwidth_gbps"] = t > 0 ? double(int64_t(double(bytes) / t * 1000)) / 1000.0 : 0.0;  // GB/s, all PEs
    j["bandwidth_per_pe_gbps"] = t > 0 ? double(int64_t(double(bytes) / sc.pes / t * 1000)) / 1000.0 : 0.0;
  }
  const bool nics = w.stack.nics_per_pe > 1;
  std::string table = std::string("  pe  qp->pe   resv  ready   prod   cons  WQEs  doorbells") + (nics ? "  nic\n" : "\n");
  for (uint32_t pe = 0; pe < sc.pes; ++pe) {
    nlohmann::ordered_json qps = nlohmann::ordered_json::array();
    for (uint32_t q = 0; q < qps_per_set(world->state(pe)); ++q) {
      const DevQp& d = world->state(pe).qps[q];
      const mock_nic::QpStats& ns = world->nic(pe, d.dev).qp(d.qpn)->stats;
      qps.push_back({{"peer", d.pe},
                     {"qpn", d.qpn},
                     {"resv_head", d.mv->resv_head},
                     {"ready_head", d.mv->ready_head},
                     {"prod_idx", d.mv->prod_idx},
                     {"cons_idx", d.mv->cons_idx},
                     {"wqes_executed", ns.wqes},
                     {"doorbells", ns.doorbells},
                     {"errors", ns.errors},
                     {"flushed", ns.flushed}});
      if (nics) qps.back()["nic"] = d.dev;
      if (d.mv->resv_head == 0) continue;
      char line[128];
      std::snprintf(line, sizeof line, "  %2u  %2u->%-3u %6llu %6llu %6llu %6llu %5llu %10llu\n", pe, q, d.pe, (unsigned long long)d.mv->resv_head,
                    (unsigned long long)d.mv->ready_head, (unsigned long long)d.mv->prod_idx, (unsigned long long)d.mv->cons_idx,
                    (unsigned long long)ns.wqes, (unsigned long long)ns.doorbells);
      table += line;
      if (nics) table.insert(table.size() - 1, "  " + std::to_string(d.dev));
    }
    j["pes"].push_back({{"pe", pe}, {"qps", qps}});
  }
  char line[200];
  if (w.stack.failover) {
    std::snprintf(line, sizeof line, "  failover: %u QP pair(s) failed, %u recovered (longest %.1f us), %u re-rung, %llu result(s) lost\n", rs.failed,
                  rs.recovered, rs.max_recovery_ns / 1000, rs.rerung, (unsigned long long)run_->lost_results());
    r.lines += line;
  }
  if (j.contains("sim_time_ns")) {
    std::snprintf(line, sizeof line, "  simulated %.3f us: %llu ops, %.3f M ops/s, %.3f GB/s (%.3f GB/s per PE)\n",
                  double(j["sim_time_ns"].get<int64_t>()) / 1000.0, (unsigned long long)j["ops"].get<uint64_t>(), j["message_rate_mops"].get<double>(),
                  j["bandwidth_gbps"].get<double>(), j["bandwidth_per_pe_gbps"].get<double>());
    r.lines += line;
  }
  r.lines += table;
}

}  // namespace doorbell::scenario
