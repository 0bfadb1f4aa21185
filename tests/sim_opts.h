// Scheduler options for tests that run protocols on the CPU model: a seed, a policy and a memory
// model, and a hang declared after 256 idle polls per lane; the race detector on.
#pragma once

#include <cstdint>

#include "hw/gpu_sim/scheduler.h"

namespace doorbell::testing {

inline gpu_sim::SchedOptions sim_opts(uint64_t seed, gpu_sim::Policy p = gpu_sim::Policy::kRandom,
                                      gpu_sim::MemoryModel m = gpu_sim::MemoryModel::kSc) {
  gpu_sim::SchedOptions o;
  o.seed = seed;
  o.policy = p;
  o.memory = m;
  o.hang_spins = 256;
  o.races = true;  // a data race fails the run, as in replay
  return o;
}

}  // namespace doorbell::testing
