// rapidcheck's draws for the IBGDA program properties (property_test, failover_test): the
// recipe is sim/ibgda/program_draw.h, shared with the fuzz target and the multi-process check.
#pragma once

#include <rapidcheck.h>

#include "sim/ibgda/program_draw.h"

namespace doorbell::ibgda {

inline uint32_t rc_draw(uint32_t lo, uint32_t hi) { return *rc::gen::inRange(lo, hi); }
// Uniform whatever the case's size (inRange's range grows with it): a boundary near 2^16 is
// as likely in the first cases as in the last.
inline uint32_t rc_pick(uint32_t n) { return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange(0u, n)); }
inline uint64_t gen_start_index() { return draw_start_index(rc_draw, rc_pick); }
inline void gen_ops(Program& p, uint32_t n, uint32_t families = kAllFamilies) { draw_ops(p, n, rc_draw, rc_pick, kProgramSlot, families); }

}  // namespace doorbell::ibgda
