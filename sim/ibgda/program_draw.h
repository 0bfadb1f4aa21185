// Random IBGDA programs, one recipe for every source of randomness: rapidcheck's generators
// (the properties), a fuzzer's input bytes (queue_fuzz) and a seeded PRNG (the multi-process
// check, where every process must draw the same program). `draw(lo, hi)` returns a value in
// [lo, hi); `pick(n)` one of n named choices, each as likely (rapidcheck's draws of values
// grow with the case's size, its picks do not; the other sources draw both alike).
#pragma once

#include <cstdint>

#include "sim/ibgda/program.h"

namespace doorbell::ibgda {

// Where the QPs' counters begin: mostly 0, else a little below 2^16, 2^31, 2^32 or 2^63, so
// a short program crosses what a long run would.
template <class Draw, class Pick>
uint64_t draw_start_index(Draw&& draw, Pick&& pick) {
  static constexpr uint64_t kBoundaries[] = {0, 0, uint64_t(1) << 16, uint64_t(1) << 31, uint64_t(1) << 32, uint64_t(1) << 63};
  const uint64_t boundary = kBoundaries[pick(6u)];
  return boundary == 0 ? 0 : boundary - draw(0u, 64u);
}

// `n` operations over p's PEs, warps and lanes, each moving at most `max_bytes`.
template <class Draw, class Pick>
void draw_ops(Program& p, uint32_t n, Draw&& draw, Pick&& pick, uint32_t max_bytes = kProgramSlot) {
  static constexpr ProgramScope kScopes[] = {ProgramScope::kThread, ProgramScope::kThread, ProgramScope::kWarp, ProgramScope::kBlock};
  p.ops.reserve(p.ops.size() + n);
  for (uint32_t i = 0; i < n; ++i) {
    ProgramOp o;
    o.pe = draw(0u, p.npes);
    o.warp = draw(0u, p.warps);
    o.lane = draw(0u, p.lanes);
    o.kind = ProgramOpKind(draw(0u, 5u));
    o.target = draw(0u, p.npes);
    o.bytes = draw(1u, max_bytes + 1);
    o.src = draw(0u, uint32_t(kProgramRo) - o.bytes + 1);
    o.counter = draw(0u, kProgramCounters);
    o.add = draw(1u, 1000u);
    if (o.kind == ProgramOpKind::kPut) o.scope = kScopes[pick(4u)];
    if (o.kind == ProgramOpKind::kCompareSwap)  // few values: swaps chain and collide
      o.compare = draw(0u, 4u), o.add = draw(0u, 4u);
    p.ops.push_back(o);
  }
}

}  // namespace doorbell::ibgda
