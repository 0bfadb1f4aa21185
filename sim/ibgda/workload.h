// The one way to run an IBGDA workload on the model world, shared by scenario replay, the
// property programs, queue_fuzz and the tests: every PE's threads run the ops that name them,
// in order (a collective put from converged callers), then their share of the generated
// messages, then quiet_all; what atomics return is kept. After the run: one classification
// (broken invariant, hang, error, completed) and one reference check (every destination slot
// against its source bytes, the atomics against some order of them all).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ibgda/qp_select.h"
#include "hw/gpu_sim/scheduler.h"
#include "sim/ibgda/atomic_check.h"
#include "sim/ibgda/model_world.h"
#include "sim/verdict.h"

namespace doorbell::ibgda {

// kAmo: any AMO (Op::amo, 4 or 8 bytes); kPutSignal: put-with-signal, the signal word the
// op's own (Workload::sig_at), waited for by the same thread of the target PE after its
// quiet, which then checks the data is there; kP / kG: 1..8 bytes as one value.
enum class OpKind : uint8_t { kPut, kGet, kFetchAdd, kAdd, kCompareSwap, kQuiet, kAmo, kPutSignal, kP, kG };
// Who calls a put or get: each thread, every lane of a warp together (put_nbi_warp,
// get_nbi_warp) or every thread of a CTA together (the _block forms), with the same arguments.
enum class Scope : uint8_t { kThread, kWarp, kBlock };

struct Op {
  OpKind kind = OpKind::kPut;
  uint32_t pe = 0;        // which PE's threads run it
  uint32_t target = 0;    // remote PE
  uint64_t bytes = 8;
  uint32_t count = 1;     // repetitions
  int32_t warp = -1;      // only this warp of each CTA runs it (-1: every warp)
  int32_t lane = -1;      // only this lane (-1: every lane); thread-scope ops only
  Scope scope = Scope::kThread;  // puts, gets and put_signal
  uint64_t src = 0;       // puts / gets: offset of the source bytes past Workload::src
  // Atomics: which 8-byte word of the target's counter block, the add (or the new value of
  // a compare-swap), and a compare-swap's compare value. A word takes adds or compare-swaps.
  uint32_t word = 0;
  uint64_t value = 1, compare = 0;
  AmoOp amo = AmoOp::kFetchAdd;  // kAmo
  uint8_t width = 8;             // kAmo: 4 (the word's low half) or 8
  bool signal_add = false;       // kPutSignal: add `value` to the signal, else set it
  QpSelector::Kind qp = QpSelector::kAny;  // thread-scope puts and gets: the pool (or warp, CTA) that picks the QP
};

inline bool is_atomic(OpKind k) { return k == OpKind::kFetchAdd || k == OpKind::kAdd || k == OpKind::kCompareSwap || k == OpKind::kAmo; }
// Ops that land bytes in a destination slot: on the target (put-like) or here (get-like).
inline bool is_put_like(OpKind k) { return k == OpKind::kPut || k == OpKind::kPutSignal || k == OpKind::kP; }
inline bool is_get_like(OpKind k) { return k == OpKind::kGet || k == OpKind::kG; }

// A generated put (alltoall, dispatch): send-buffer bytes of `from` to `to`'s receive buffer.
struct Msg {
  uint32_t from = 0, to = 0;
  uint64_t src = 0, dst = 0, len = 0;
};

// Heap offsets are symmetric (the same on every PE).
struct Workload {
  gpu_sim::LaunchConfig shape{1, 1, 1};  // each PE's threads
  std::vector<Op> ops;
  uint64_t src = 0, src_bytes = 0;       // source bytes, filled per PE by fill_sources
  uint64_t dst = 0, slot = 0;            // op j of owner thread t writes dst + (t * ops.size() + j) * slot
  uint64_t words = 0;                    // counter word w at words + 8 * w
  uint64_t sigs = 0;                     // put-with-signal: op j of owner t signals sigs + (t * ops.size() + j) * 8
  const std::vector<std::vector<Msg>>* msgs = nullptr;  // generated puts each PE sends, spread over its threads
  uint64_t msg_send = 0, msg_recv = 0, msg_send_bytes = 0;
  uint64_t seed = 1;                     // the source bytes
  uint64_t threads() const { return uint64_t(shape.ctas) * shape.warps_per_cta * shape.lanes; }
  uint64_t slot_at(uint64_t owner, size_t op) const { return dst + (owner * ops.size() + op) * slot; }
  uint64_t dst_bytes() const { return threads() * ops.size() * slot > 0 ? threads() * ops.size() * slot : 1; }  // to malloc
  uint64_t sig_at(uint64_t owner, size_t op) const { return sigs + (owner * ops.size() + op) * 8; }
  uint64_t sig_bytes() const { return threads() * ops.size() * 8 > 0 ? threads() * ops.size() * 8 : 8; }  // to malloc
};

// Whether thread t (CTA-major, shape.warps_per_cta x shape.lanes per CTA) runs op o, and whether it
// owns a destination slot for it (a collective put has one, its first caller's).
bool runs_op(const Op& o, uint64_t t, const gpu_sim::LaunchConfig& shape);
bool owns_slot(const Op& o, uint64_t t, const gpu_sim::LaunchConfig& shape);

class WorkloadRun {
 public:
  WorkloadRun(ModelWorld& world, const Workload& w) : world_(world), w_(w) {}

  // With one PE per process (WorldConfig::procs), each process fills, launches and checks its
  // own PE: the bytes that land in its memory, the atomics on its words.
  // Fill the bytes of every PE's sources (and the generated messages' send buffers) that some
  // operation reads, widened to whole words, with bytes drawn from the seed; the rest stays
  // as it was. Not for phantom heaps, which have no bytes.
  void fill_sources();
  // Launch every PE's threads on `s` (faults injected and the world attached by the caller).
  void launch(gpu_sim::Scheduler& s);

  // After the run: broken invariant, hang (also for a step limit), error (an operation
  // failed; without failover any error CQE) or completed, with what explains it (the weak
  // memory model's stale reads where they may). The invariants are checked once more at the end.
  sim::Verdict classify(gpu_sim::Scheduler& s, const gpu_sim::RunResult& r, bool failover) const;
  // Real memory: every destination slot and generated message against its source bytes,
  // and every put-with-signal's signal word.
  std::string check_bytes() const;
  // Some order of the atomics explains every result and every word's final value (of the
  // PEs in this process).
  std::string check_atomics() const;
  // One PE per process: every process's atomics, so each checks the words it holds (a
  // collective; nothing to do in one process).
  Status gather_atomics();

  uint64_t failed_ops() const { return failed_ops_; }
  uint64_t lost_results() const { return lost_results_; }
  uint8_t source_byte(uint32_t pe, uint64_t i) const;

 private:
  uint64_t source_word(uint32_t pe, uint64_t k) const;
  uint64_t first_difference(const uint8_t* got, uint32_t pe, uint64_t at, uint64_t n) const;
  ModelWorld& world_;
  const Workload& w_;
  // Operations that failed (with failover: that recovery could not save), and fetching
  // atomics applied once whose result was lost.
  uint64_t failed_ops_ = 0, lost_results_ = 0;
  AtomicCheck atomics_;
  std::string read_back_;  // the first GPU read-back that saw data not there (a signal before its data, a get after quiet)
};

// The whole of it: fill the sources, launch, attach the world, run under `so`, classify and
// check. "" when the run completed with the right bytes and atomics, else what broke. The
// caller made the world, placed `w` in its heap and injected any faults; the queue
// invariants are checked at each change of a QP's words (each_step: of every QP after every
// step, slower).
std::string run_workload(ModelWorld& world, const Workload& w, gpu_sim::SchedOptions so, bool each_step = false);

}  // namespace doorbell::ibgda
