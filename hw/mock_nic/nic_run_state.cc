// A NIC's run state saved and put back, for a world rewound between runs (sim/ibgda's
// WorldPool). Harness code: in fuzz builds it carries no coverage (hw/mock_nic/CMakeLists.txt).
#include "hw/mock_nic/nic_run_state.h"

#include <memory>

namespace doorbell::mock_nic {

void Nic::save_run_state() {
  auto s = std::make_unique<RunState>();
  for (const auto& q : qps_) s->qps.push_back(q ? *q : Qp{});
  for (const auto& c : cqs_) s->cqs.push_back(c ? *c : Cq{});
  s->srqs = srqs_, s->active = active_, s->delayed_cqs = delayed_cqs_, s->late_doorbells = late_doorbells_;
  s->faults = faults_;
  s->link_down_from_ns = link_down_from_ns_, s->link_down_until_ns = link_down_until_ns_, s->dead_from_ns = dead_from_ns_;
  s->link_steady = link_steady_;
  s->now = now_, s->rng = rng_, s->bad_doorbells = bad_doorbells_, s->bytes_moved = bytes_moved_;
  s->phantom_log = phantom_log_, s->cqe_hook = cqe_hook_, s->wake_hook = wake_hook_, s->observer = observer_, s->observer_name = observer_name_;
  s->clock = clock_, s->waiting = waiting_, s->errors = errors_, s->events = events_, s->audit = audit_;
  saved_ = std::move(s);
}

Status Nic::restore_run_state() {
  if (saved_ == nullptr) return Status(Errc::kBadState, "restore_run_state: nothing saved");
  const RunState& s = *saved_;
  if (s.qps.size() != qps_.size() || s.cqs.size() != cqs_.size() || s.srqs.size() != srqs_.size())
    return Status(Errc::kBadState, "restore_run_state: QPs, CQs or SRQs were created since the save");
  for (size_t i = 0; i < qps_.size(); ++i)
    if (bool(qps_[i]) != (s.qps[i].qpn != 0)) return Status(Errc::kBadState, "restore_run_state: a QP was destroyed since the save");
  for (size_t i = 0; i < cqs_.size(); ++i)
    if (bool(cqs_[i]) != (s.cqs[i].cqn != 0)) return Status(Errc::kBadState, "restore_run_state: a CQ was destroyed since the save");
  for (size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i]) *qps_[i] = s.qps[i];
  for (size_t i = 0; i < cqs_.size(); ++i)
    if (cqs_[i]) *cqs_[i] = s.cqs[i];
  srqs_ = s.srqs, active_ = s.active, delayed_cqs_ = s.delayed_cqs, late_doorbells_ = s.late_doorbells;
  faults_ = s.faults;
  link_down_from_ns_ = s.link_down_from_ns, link_down_until_ns_ = s.link_down_until_ns, dead_from_ns_ = s.dead_from_ns;
  link_steady_ = s.link_steady;
  now_ = s.now, rng_ = s.rng, bad_doorbells_ = s.bad_doorbells, bytes_moved_ = s.bytes_moved;
  phantom_log_ = s.phantom_log, cqe_hook_ = s.cqe_hook, wake_hook_ = s.wake_hook, observer_ = s.observer, observer_name_ = s.observer_name;
  clock_ = s.clock, waiting_ = s.waiting, errors_ = s.errors, events_ = s.events, audit_ = s.audit;
  return {};
}

}  // namespace doorbell::mock_nic
