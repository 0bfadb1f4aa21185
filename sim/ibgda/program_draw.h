// Random IBGDA programs, one recipe for every source of randomness: rapidcheck's generators
// (the properties), a fuzzer's input bytes (queue_fuzz) and a seeded PRNG (the multi-process
// check, where every process must draw the same program). `draw(lo, hi)` returns a value in
// [lo, hi); `pick(n)` one of n named choices, each as likely (rapidcheck's draws of values
// grow with the case's size, its picks do not; the other sources draw both alike).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/ibgda/atomic_check.h"
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

// `n` operations over p's PEs, warps and lanes, each moving at most `max_bytes`, of the
// kinds of `families` (ProgramFamily), each kind as likely.
template <class Draw, class Pick>
void draw_ops(Program& p, uint32_t n, Draw&& draw, Pick&& pick, uint32_t max_bytes = kProgramSlot, uint32_t families = kAllFamilies) {
  using K = ProgramOpKind;
  static constexpr ProgramScope kScopes[] = {ProgramScope::kThread, ProgramScope::kThread, ProgramScope::kWarp, ProgramScope::kBlock};
  static constexpr std::pair<K, uint32_t> kFamilyOf[] = {{K::kPut, kFamilyRma},       {K::kGet, kFamilyRma},
                                                         {K::kFetchAdd, kFamilyCounters}, {K::kAdd, kFamilyCounters},
                                                         {K::kCompareSwap, kFamilyCounters}, {K::kAmo, kFamilyAmo},
                                                         {K::kPutSignal, kFamilySignal}, {K::kP, kFamilyPg},
                                                         {K::kG, kFamilyPg}};
  K kinds[kProgramOpKinds];
  uint32_t nkinds = 0;
  for (const auto& [k, f] : kFamilyOf)
    if (families & f) kinds[nkinds++] = k;
  if (nkinds == 0) return;
  // The AMOs a word takes (its order is searched for: AtomicCheck::kMaxSearched at most); one
  // drawn onto a full word becomes a put.
  std::vector<uint32_t> amo_calls(size_t(p.npes) * kProgramAmoWords);
  for (const ProgramOp& o : p.ops)
    if (o.kind == K::kAmo) ++amo_calls[size_t(o.target) * kProgramAmoWords + o.counter];
  p.ops.reserve(p.ops.size() + n);
  for (uint32_t i = 0; i < n; ++i) {
    ProgramOp o;
    o.pe = draw(0u, p.npes);
    o.warp = draw(0u, p.warps);
    o.lane = draw(0u, p.lanes);
    o.kind = kinds[draw(0u, nkinds)];
    o.target = draw(0u, p.npes);
    const bool value = o.kind == K::kP || o.kind == K::kG;
    o.bytes = value ? draw(1u, 9u) : draw(1u, max_bytes + 1);
    o.src = draw(0u, uint32_t(kProgramRo) - o.bytes + 1);
    if (value) o.src &= ~7u;  // a value lies within one aligned word (never across heap chunks), as NVSHMEM's typed p / g
    o.counter = draw(0u, o.kind == K::kAmo ? kProgramAmoWords : kProgramCounters);
    o.add = draw(1u, 1000u);
    if (o.kind == K::kPut || o.kind == K::kGet || o.kind == K::kPutSignal) o.scope = kScopes[pick(4u)];
    if (o.kind == K::kCompareSwap)  // few values: swaps chain and collide
      o.compare = draw(0u, 4u), o.add = draw(0u, 4u);
    if (o.kind == K::kAmo) {  // small values and bit patterns: results collide and masks overlap
      o.amo = AmoOp(draw(0u, kAmoOps));
      o.width = pick(2u) == 0 ? 4 : 8;
      const uint64_t bits[] = {draw(0u, 8u), uint64_t(0xff) << (8 * draw(0u, 8u)), 0xffff'ffff'0000'0000ull | draw(0u, 16u)};
      o.add = bits[pick(3u)];
      o.compare = draw(0u, 4u);
    }
    if (o.kind == K::kPutSignal) o.signal_add = pick(2u) == 0;
    if (o.kind == K::kAmo && ++amo_calls[size_t(o.target) * kProgramAmoWords + o.counter] > AtomicCheck::kMaxSearched) o.kind = K::kPut;
    p.ops.push_back(o);
  }
}

}  // namespace doorbell::ibgda
