// Replaying an IBGDA scenario on the CPU model: the IBGDA stack on NIC models, every PE's
// threads running the workload under the scheduler, faults applied, the outcome classified
// (completed / hang / error / wrong-data / broken-invariant) and judged against the
// expectation. Steps in replay_ibgda.cc.
#pragma once

#include "scenarios/replay/replay.h"

namespace doorbell::scenario {

ReplayResult replay_ibgda(const Scenario& sc, const ReplayOptions& opt);

}  // namespace doorbell::scenario
