// Replaying a copy-engine P2P scenario (workload.p2p) on the CPU model: core/p2p's kernels and
// send proxies over gpu_sim::CudaModel's streams and copy engines, classified as completed,
// hang (with the report naming which stream work waits for which) or wrong-data.
#pragma once

#include "scenarios/replay/replay.h"

namespace doorbell::scenario {

ReplayResult replay_p2p(const Scenario& sc, const ReplayOptions& opt);

}  // namespace doorbell::scenario
