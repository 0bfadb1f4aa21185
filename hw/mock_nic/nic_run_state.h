// What Nic::save_run_state keeps: every field a run changes (nic_run_state.cc). A field the
// NIC gains that a run changes belongs here too, or a rewound world differs from a fresh one
// (WorldPool.ARewoundWorldRunsAProgramAsAFreshOneDoes).
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "hw/mock_nic/nic.h"

namespace doorbell::mock_nic {

struct Nic::RunState {
  std::vector<Qp> qps;  // by qps_' index (a destroyed QP's slot holds a default Qp)
  std::vector<Cq> cqs;
  std::vector<Srq> srqs;
  std::vector<Qp*> active;
  std::vector<Cq*> delayed_cqs;
  std::deque<LateDoorbell> late_doorbells;
  Faults faults;
  double link_down_from_ns, link_down_until_ns, dead_from_ns;
  bool link_steady;
  uint64_t now, rng, bad_doorbells, bytes_moved;
  std::vector<PhantomCopy> phantom_log;
  std::function<void(const void*)> cqe_hook;
  std::function<void()> wake_hook;
  mem::Observer* observer;
  std::string observer_name;
  std::function<double()> clock;
  std::string waiting;
  std::vector<ErrorRecord> errors;
  std::vector<AsyncEvent> events;
  std::vector<std::string> audit;
};

}  // namespace doorbell::mock_nic
