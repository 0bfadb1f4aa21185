// rapidcheck generators shared by the IBGDA program properties (property_test, failover_test):
// `n` random operations over a program's PEs, warps and lanes.
#pragma once

#include <rapidcheck.h>

#include "sim/ibgda/program.h"

namespace doorbell::ibgda {

// Where the QPs' counters begin: mostly 0, else a little below 2^16, 2^31, 2^32 or 2^63, so
// a short program crosses what a long run would.
inline uint64_t gen_start_index() {
  const uint64_t boundary = *rc::gen::element(uint64_t(0), uint64_t(0), uint64_t(1) << 16, uint64_t(1) << 31,
                                              uint64_t(1) << 32, uint64_t(1) << 63);
  return boundary == 0 ? 0 : boundary - *rc::gen::inRange<uint64_t>(0, 64);
}

inline void gen_ops(Program& p, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    ProgramOp o;
    o.pe = *rc::gen::inRange(0u, p.npes);
    o.warp = *rc::gen::inRange(0u, p.warps);
    o.lane = *rc::gen::inRange(0u, p.lanes);
    o.kind = ProgramOpKind(*rc::gen::inRange(0, 5));
    o.target = *rc::gen::inRange(0u, p.npes);
    o.bytes = *rc::gen::inRange(1u, uint32_t(kProgramSlot) + 1);
    o.src = *rc::gen::inRange(0u, uint32_t(kProgramRo) - o.bytes + 1);
    o.counter = *rc::gen::inRange(0u, kProgramCounters);
    o.add = *rc::gen::inRange(1u, 1000u);
    if (o.kind == ProgramOpKind::kPut)
      o.scope = *rc::gen::element(ProgramScope::kThread, ProgramScope::kThread, ProgramScope::kWarp, ProgramScope::kBlock);
    if (o.kind == ProgramOpKind::kCompareSwap)  // few values: swaps chain and collide
      o.compare = *rc::gen::inRange(0u, 4u), o.add = *rc::gen::inRange(0u, 4u);
    p.ops.push_back(o);
  }
}

}  // namespace doorbell::ibgda
