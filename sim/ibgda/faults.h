// Faults a model world can be given before a run (ModelWorld::inject), shared by scenarios,
// the program runner and the failover property. Times are on the NICs' clock: simulated ns
// on the timed schedule, else 100 ns per NIC action (a step budget).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hw/mock_nic/fault_kind.h"

namespace doorbell::ibgda {

// The kinds are the NIC model's (hw/mock_nic/fault_kind.h), here on a PE's NICs: kQpError at
// at_ns takes pe's main QP to target to ERR; kLinkDown and kStall last [at_ns, at_ns + for_ns)
// (a stall of infinite length: for good); kStaleRkey leaves pe's key table a stale rkey for
// target's heap; kStaleDcKey gives pe's address vectors for target's DCTs another DC key (a
// world with DC); kNodeDeath kills pe's node at at_ns. Scenarios take all but kLateResponses
// (a NIC's configuration, NicConfig::response_delay_max).
struct WorldFault {
  using Kind = mock_nic::FaultKind;
  using enum mock_nic::FaultKind;
  Kind kind = kQpError;
  uint32_t pe = 0, target = 0;
  double at_ns = 0, for_ns = std::numeric_limits<double>::infinity();
  uint32_t count = 1;
};

const char* fault_name(WorldFault::Kind k);
std::string describe(const WorldFault& f);
// 1..3 recoverable faults (no stale key, no death) drawn from `seed` for `npes` PEs, within
// the first `horizon_ns` of the run: what `explore` over random fault schedules injects.
std::vector<WorldFault> random_faults(uint64_t seed, uint32_t npes, double horizon_ns);

}  // namespace doorbell::ibgda
