// Nic::queue_report: what a stalled client needs to see of its queues — per QP the client's
// doorbell record beside what the engine fetched and has in flight, per CQ what was written
// and what the client consumed, the NIC's error records and what the engine waits on.
#include <cstdio>
#include <string>

#include "hw/mock_nic/nic.h"

namespace doorbell::mock_nic {

std::string Nic::queue_report() const {
  std::string out;
  char line[320];
  for (const auto& q : qps_) {
    if (!q || q->dbr == nullptr) continue;
    const uint16_t dbr = uint16_t(q->dbr->snd.get());
    const uint16_t unrung = uint16_t(dbr - uint16_t(q->prod));  // in the record, not yet read by the engine
    std::snprintf(line, sizeof line,
                  "  qpn 0x%x %s: doorbell record %u, engine fetched to %llu (read %llu from the record), %zu in flight, %u responses "
                  "pending; %llu doorbells, %llu WQEs, %llu errors%s\n",
                  q->qpn, qp_state_name(q->state), dbr, (unsigned long long)q->head, (unsigned long long)q->prod, q->inflight.size(),
                  q->pending_responses, (unsigned long long)q->stats.doorbells, (unsigned long long)q->stats.wqes,
                  (unsigned long long)q->stats.errors, unrung != 0 ? "; WQEs in the record but never rung" : "");
    out += line;
  }
  for (const auto& c : cqs_) {
    if (!c || c->ring == nullptr) continue;
    std::string last = "none";
    if (c->pi != 0) {
      const mlx5::Cqe64* e = mlx5::cqe_slot(c->ring, c->pi - 1, c->log_size, c->collapsed);
      std::snprintf(line, sizeof line, "opcode 0x%x wqe_counter %u", e->opcode(), e->wqe_counter.get());
      last = line;
    }
    std::snprintf(line, sizeof line, "  cqn 0x%x%s: %llu CQEs written (last: %s), client's consumer index %u%s%s\n", c->cqn,
                  c->collapsed ? " (collapsed)" : "", (unsigned long long)c->pi, last.c_str(),
                  c->dbr != nullptr ? c->dbr->set_ci.get() & 0xffffff : 0u, c->pending.empty() ? "" : ", CQEs held back", c->overrun ? ", OVERRUN" : "");
    out += line;
  }
  for (const ErrorRecord& e : errors_) {
    std::snprintf(line, sizeof line, "  error: qpn 0x%x WQE %llu, opcode 0x%x, syndrome 0x%x, vendor 0x%x\n", e.qpn, (unsigned long long)e.wqe_idx,
                  e.wqe_opcode, e.syndrome, e.vendor);
    out += line;
  }
  if (!waiting_.empty()) out += "  engine waits: " + waiting_ + "\n";
  return out;
}

}  // namespace doorbell::mock_nic
