#include "host/verbs_shim/timeline.h"

#include <fstream>

#include "hw/trace/perfetto.h"

namespace doorbell::shim {

namespace {

constexpr size_t kMaxEvents = 2'000'000;  // a long run keeps its first two million

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

}  // namespace

void Timeline::sample(const mock_nic::Nic& nic, const std::vector<uint32_t>& qpns, double ts_us) {
  if (events_.size() >= kMaxEvents) return;
  for (uint32_t q : qpns) {
    const mock_nic::Qp* qp = nic.qp(q);
    if (qp == nullptr || qp->dbr == nullptr) continue;
    QpSeen& s = qps_[q];
    const uint64_t dbr = qp->dbr->snd.get() & 0xffff;
    if (qp->stats.doorbells != s.doorbells) {
      s.doorbells = qp->stats.doorbells;
      events_.push_back(trace::perfetto(trace::make(trace::kShimDoorbell, uint64_t(q), dbr), rank_, ts_us));
    }
    if (dbr != s.dbr || qp->head != s.head || qp->stats.wqes != s.wqes) {
      s.dbr = dbr, s.head = qp->head, s.wqes = qp->stats.wqes;
      trace::Event e = trace::make(trace::kShimQpWork, dbr, qp->head, qp->stats.wqes);
      e.track = "qpn " + hex(q);
      events_.push_back(trace::perfetto(e, rank_, ts_us));
    }
    if (const mock_nic::Cq* cq = nic.cq(qp->attr.send_cqn); cq != nullptr && cq->dbr != nullptr) {
      const std::pair<uint64_t, uint32_t> now{cq->pi, cq->dbr->set_ci.get() & 0xffffff};
      auto [it, fresh] = cqs_.try_emplace(cq->cqn, now);
      if (fresh || it->second != now) {
        it->second = now;
        trace::Event e = trace::make(trace::kShimCqes, now.first, uint64_t(now.second));
        e.track = "cqn " + hex(cq->cqn);
        events_.push_back(trace::perfetto(e, rank_, ts_us));
      }
    }
  }
}

bool Timeline::write(std::string* why) const {
  std::ofstream f(path_);
  if (!f) return *why = "cannot write " + path_, false;
  nlohmann::ordered_json j;
  j["traceEvents"] = events_;
  f << j.dump() << "\n";
  return bool(f) || (*why = "writing " + path_ + " failed", false);
}

}  // namespace doorbell::shim
