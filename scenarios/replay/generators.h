// Workload generators: the messages an alltoall or a MoE dispatch produces, per sending PE.
// Offsets are into a generated send buffer (source) and receive buffer (destination) that
// every PE allocates symmetrically; each destination range is written by exactly one message.
#pragma once

#include <cstdint>
#include <vector>

#include "scenarios/replay/scenario.h"

namespace doorbell::scenario {

using ibgda::Msg;

struct Generated {
  uint64_t send_bytes = 0, recv_bytes = 0;
  std::vector<std::vector<Msg>> by_pe;  // messages each PE sends
  uint64_t messages = 0, bytes = 0;
};

// alltoall: block q of p's send buffer -> block p of q's receive buffer, in message_bytes.
// dispatch: each of a PE's tokens goes to `topk` distinct experts (fixed pseudo-random
// routing); expert e lives on PE e / (experts / pes); token t of PE p lands in expert e's
// slot for (p, t), as DeepEP's low-latency layout keeps one slot per source rank and token;
// combine sends each slot back to a landing area per (token, choice); `both` does the two.
Generated generate(const IbgdaWorkload& w, uint32_t pes);

}  // namespace doorbell::scenario
