// DOORBELL_SHIM_FAULTS: faults for the program's NIC model, in the scenarios' vocabulary
// (hw/mock_nic/fault_kind.h), so that a real program — NVSHMEM, a program built on it — meets
// them as doorbell's own protocols do in a scenario:
//   DOORBELL_SHIM_FAULTS='link_down:at_us=2000,for_us=500000;late_cqes:count=40'
// Items are `name[:key=value,...]` separated by ';' — or, with DOORBELL_SHIM_FAULTS=@file, one
// per line of the file ('#' starts a comment; a mistake names the file and line). Keys: at_us (when, from the model's start,
// wall clock), for_us (how long; default for good), count, qp (qp_error: the k-th QP the
// program creates, from 0). late_cqes and late_responses are seeded: each CQ's delay, each
// response's, is drawn in [0, count] engine actions from DOORBELL_SHIM_SEED (default: a seed
// drawn at start). The model says the seed and the line that repeats the schedule.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "hw/mock_nic/fault_kind.h"

namespace doorbell::shim {

struct ShimFault {
  mock_nic::FaultKind kind = mock_nic::kQpError;
  double at_ns = 0, for_ns = std::numeric_limits<double>::infinity();
  uint32_t count = 1;
  uint32_t qp = 0;
};

struct ShimFaults {
  std::string spec;  // as given
  uint64_t seed = 0;
  std::vector<ShimFault> list;
};

// Parses `spec` (or the file `@path` names); a mistake names the item, or the file and line,
// and what is wrong with it.
Result<ShimFaults> parse_shim_faults(const std::string& spec, uint64_t seed);

}  // namespace doorbell::shim
