// Faults a model world can be given before a run (ModelWorld::inject), shared by scenarios,
// the program runner and the failover property. Times are on the NICs' clock: simulated ns
// on the timed schedule, else 100 ns per NIC action (a step budget).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace doorbell::ibgda {

struct WorldFault {
  enum Kind : uint8_t {
    kQpError,        // at at_ns, pe's main QP to target goes to ERR
    kLinkDown,       // pe's port is down in [at_ns, at_ns + for_ns)
    kStall,          // pe's NIC engine does nothing in [at_ns, at_ns + for_ns) (infinite: for good)
    kLostDoorbells,  // pe's next `count` doorbells are lost
    kLateDoorbells,  // pe's doorbells act `count` engine actions late
    kLateCqes,       // pe's send CQEs appear `count` engine actions late
    kStaleRkey,      // pe's key table holds a stale rkey for target's heap
    kNodeDeath,      // pe's node dies at at_ns: nothing answers any more
  } kind = kQpError;
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
