// A small IBGDA program on the model world and its check, shared by the rapidcheck property
// (tests/ibgda/property_test.cc) and the multi-agent fuzz target (fuzz/queue_fuzz.cc): each
// thread (PE, warp, lane) runs its own list of puts / gets / fetch-adds / adds, then quiet.
// Every op owns its destination slot, so the sequential reference does not depend on order;
// atomics are checked by AtomicCheck (some order of them explains what each returned).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ibgda/amo_op.h"
#include "sim/ibgda/model_world.h"
#include "sim/ibgda/stack.h"
#include "sim/ibgda/world_pool.h"
#include "hw/gpu_sim/scheduler.h"

namespace doorbell::ibgda {

inline constexpr uint64_t kProgramRo = 16 << 10;  // read-only source region per PE
inline constexpr uint64_t kProgramSlot = 3072;    // the most bytes an op moves (its slot: the largest op's, rounded up)
inline constexpr uint32_t kProgramCounters = 4;
inline constexpr uint32_t kProgramAmoWords = 8;  // kAmo's words, after the adds' and compare-swaps'

// kAmo: any AMO (ProgramOp::amo, 4 or 8 bytes) on its own words; kPutSignal: put-with-signal
// (the target's same thread waits for the signal, then checks the data); kP / kG: 1..8 bytes
// as one value.
enum class ProgramOpKind : uint8_t { kPut, kGet, kFetchAdd, kAdd, kCompareSwap, kAmo, kPutSignal, kP, kG };
inline constexpr uint32_t kProgramOpKinds = 9;
// The operation families a program draws from (a mask): each has its own property.
enum ProgramFamily : uint32_t {
  kFamilyRma = 1 << 0,      // put, get (thread, warp, block scope)
  kFamilyCounters = 1 << 1, // 8-byte fetch-add, add, compare-swap
  kFamilyAmo = 1 << 2,      // every AMO, 4 and 8 bytes
  kFamilySignal = 1 << 3,   // put-with-signal, signal_wait_until
  kFamilyPg = 1 << 4,       // p, g
  kAllFamilies = 0x1f,
};
// Who calls a put or get: its thread alone, every lane of its warp (the _warp form), or every
// thread of its PE's CTA (the _block form), each with the same arguments; the op's lane (and
// warp, for block scope) are then ignored.
enum class ProgramScope : uint8_t { kThread, kWarp, kBlock };

struct ProgramOp {
  uint32_t pe = 0, warp = 0, lane = 0;  // who runs it
  ProgramOpKind kind = ProgramOpKind::kPut;
  ProgramScope scope = ProgramScope::kThread;  // puts and gets only
  uint32_t target = 0;
  uint32_t bytes = 1;                   // 1..kProgramSlot (p, g: 1..8)
  uint32_t src = 0;                     // offset in the read-only region
  uint32_t counter = 0;                 // the counter word (adds', compare-swaps' or kAmo's own)
  uint64_t add = 1;                     // adds: the amount; compare-swaps and AMOs: the value; signals: the value
  uint64_t compare = 0;                 // compare-swaps (on their own words, beside the adds')
  AmoOp amo = AmoOp::kFetchAdd;         // kAmo, on word counter of its own block
  uint8_t width = 8;                    // kAmo: 4 or 8
  bool signal_add = false;              // kPutSignal: add, else set
};

struct Program {
  uint32_t npes = 2, warps = 1, lanes = 1;
  Stack stack{.log_qp_depth = 4, .num_requests_in_batch = 4};  // small queues: they fill and wrap
  bool plant_gpu_scope_fences = false;  // NIC buffers in host memory, fenced for GPU memory
  uint32_t fast_step_actions = 256;     // fast mode: a NIC step's most actions (WorldConfig)
  uint64_t seed = 1;                    // world (response delays, source bytes)
  // The queue invariants of every QP after every step (else of a QP at each change of its
  // words, as replay checks them: faster where there are many QPs, e.g. in the fuzz target).
  bool check_each_step = true;
  uint64_t heap_bytes = 8ull << 20;     // per PE; the heap is allocated (and cleared) per run
  std::vector<WorldFault> faults;
  std::vector<ProgramOp> ops;
};

// Run `p` under a scheduler with options `so` (its observe hook is taken: the queue-index
// invariants are checked after every step). Empty when nothing hung or errored, the
// invariants held all along and memory equals the sequential reference; else what broke,
// with the weak memory model's notes on stale reads when it ran in that mode.
//
// With failover, faults may be recovered: then the run must still end with memory equal to
// the reference — no operation lost, none applied twice. The one error it accepts is a
// fetch-add applied once whose result was lost (kResultLost): its add counts, its value is
// unknown. `stats`, if given, receives what the recovery did.
// `procs`: one PE per process (every process runs the same program; each checks its own PE).
// `pool`: take the world from it (a rewound one where the shape was seen before) instead of
// building one for this run.
std::string run_program(const Program& p, gpu_sim::SchedOptions so, RecoveryStats* stats = nullptr, Processes procs = {},
                        WorldPool* pool = nullptr);

}  // namespace doorbell::ibgda
