// Replaying an NVLS scenario (workload.nvls) on the CPU model: core/nvls's ReduceScatter or
// AllReduce over the model NVSwitch, compared with a reference (real memory) or timed (phantom:
// nccl-tests' algbw / busbw from the simulated time).
#pragma once

#include "scenarios/replay/replay.h"

namespace doorbell::scenario {

ReplayResult replay_nvls(const Scenario& sc, const ReplayOptions& opt);

}  // namespace doorbell::scenario
