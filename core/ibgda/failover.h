// QP failover on the device (seed 002, SPEC §5). Each main QP has a backup to the same PE.
// A thread picks the main QP unless it is FAILED (then the backup), counts itself in as a
// user while inside the send protocol, and after each operation updates the QP's health
// from the outcome: an error CQE, or a wait given up because someone else marked the QP
// FAILED, marks it FAILED; a success on a SUSPECTED / RECOVERING QP marks it GOOD.
//
// The host's recovery (sim/ibgda/recovery.cc) waits until a FAILED QP has no users,
// drains it, learns from the peer how far the responder executed it (next_rcv_psn), resets
// both ends and leaves that as the epoch's verdict. Threads then replay what did not
// complete: an RDMA READ is simply issued again; a WRITE or an atomic only if the verdict
// says it never reached the responder, so no atomic is applied twice and no write lands
// again after its signal did. A fetch whose atomic was applied but whose response was lost
// cannot be recovered: it fails (an unrecoverable error, with the root cause recorded).
//
// Non-blocking operations (put, get, p, every non-fetching AMO, signals) are remembered in
// the calling thread's replay log until its next quiet, which completes or replays each of
// them; blocking ones (fetching AMOs, g) are settled before they return.
#pragma once

#include <cstdint>

#include "core/ibgda/post_on_qp.h"
#include "core/ibgda/qp_select.h"

namespace doorbell::ibgda {

inline constexpr uint32_t kFailoverAttempts = 8;  // tries per operation before it fails for good

struct LogEntry {
  enum Kind : uint8_t { kPut, kGet, kP, kAmo } kind = kPut;
  bool backup = false;   // which QP of the slot carried it
  // A signal: it may land only after every earlier entry of its slot (put-with-signal's
  // data), so it goes on their QP in their epoch, where RC keeps the order, or waits.
  bool ordered = false;
  bool posted = true;    // false: an ordered entry still waiting for those before it
  // A transfer in parts whose ring failed after it began: some parts may still run on that
  // QP, the rest never will, and no verdict says which. Replayed whole once it is drained.
  bool partial = false;
  bool failed = false;   // within one quiet_log: failed for good (dropped once reported)
  uint32_t slot = 0, pe = 0;
  uint64_t a = 0, b = 0, bytes = 0;  // put / get: local and remote heap offsets; p: remote offset, value; AMO: offset
  Amo amo;               // kAmo
  uint64_t epoch = 0, begin = 0, end = 0;  // its WQEs [begin, end) in that epoch of that QP
  uint32_t tries = 1;    // issues so far: each operation has kFailoverAttempts of its own
};
inline constexpr uint32_t kLogEntries = 16;
struct ReplayLog {
  uint32_t n = 0;
  LogEntry e[kLogEntries];
};

template <class C>
DOORBELL_HD ReplayLog& my_log(C& ctx, const DevState& st) {
  const uint32_t t = (ctx.cta() * ctx.warps_per_cta() + ctx.warp()) * ctx.warp_size() + ctx.lane();
  return st.logs[t % st.log_threads];  // the host sizes logs for the launch (ModelWorld::failover_threads)
}

// Count this thread in as a user of `qp` unless it FAILED. The count is made visible before
// the health is read; recovery writes the health before it reads the count, so one of the
// two always sees the other.
template <class C>
DOORBELL_HD bool enter(C& ctx, const DevQp& qp) {
  using namespace exec;
  if (qp.hp == nullptr) return true;
  ctx.atomic_add(gpu_scope, &qp.hp->users, 1);
  ctx.fence(system_scope);
  if (ctx.load(system_scope, acquire, &qp.hp->state) != uint64_t(Health::kFailed)) return true;
  ctx.atomic_add(gpu_scope, &qp.hp->users, ~uint64_t(0));
  return false;
}
// Leave: everything this thread wrote to the QP's words is visible before the count drops
// (recovery resets those words once it reads 0).
template <class C>
DOORBELL_HD void leave(C& ctx, const DevQp& qp) {
  if (qp.hp == nullptr) return;
  ctx.fence(exec::system_scope);
  ctx.atomic_add(exec::gpu_scope, &qp.hp->users, ~uint64_t(0));
}

// Health from an operation's outcome (called while still a user).
template <class C>
DOORBELL_HD void note_outcome(C& ctx, const DevQp& qp, OpResult r) {
  using namespace exec;
  if (qp.hp == nullptr || r == OpResult::kTimeout) return;
  uint64_t* s = &qp.hp->state;
  uint64_t h = ctx.load(gpu_scope, relaxed, s);
  if (r == OpResult::kOk) {
    if (h == uint64_t(Health::kSuspected) || h == uint64_t(Health::kRecovering)) ctx.atomic_cas(gpu_scope, s, h, uint64_t(Health::kGood));
    return;
  }
  while (h != uint64_t(Health::kFailed)) {
    const uint64_t was = ctx.atomic_cas(gpu_scope, s, h, uint64_t(Health::kFailed));
    if (was == h) break;
    h = was;
  }
}

struct Path {
  const DevQp* qp = nullptr;
  bool backup = false;
};

// Enter the main QP of `slot`, else its backup; while both are FAILED, wait for a recovery.
template <class C>
DOORBELL_HD OpResult enter_path(C& ctx, const DevState& st, uint32_t slot, Path* p) {
  const DevQp& main = st.qps[slot];
  const DevQp& backup = st.backups[slot];
  for (;;) {
    if (enter(ctx, main)) return *p = {&main, false}, OpResult::kOk;
    if (enter(ctx, backup)) return *p = {&backup, true}, OpResult::kOk;
    if (ctx.load(exec::gpu_scope, exec::acquire, &main.hp->dead) != 0 || ctx.load(exec::gpu_scope, exec::acquire, &backup.hp->dead) != 0)
      return OpResult::kCqError;  // the peer is gone
    if (!ctx.spin("failover: main and backup QP both FAILED (waiting for a recovery)", &main.hp->state,
                  uint64_t(Health::kFailed)))
      return OpResult::kTimeout;
  }
}

DOORBELL_HD const DevQp& path_qp(const DevState& st, uint32_t slot, bool backup) {
  return backup ? st.backups[slot] : st.qps[slot];
}

// The verdict on WQE `idx` of `epoch` on `qp`: 1 it reached the responder, 0 it did not, -1
// unknown (the peer is gone, or so many recoveries passed that the verdict was overwritten),
// kVerdictWaitGivenUp when the wait for it was given up (the original may still run).
// Waits until a recovery has ended that epoch.
inline constexpr int kVerdictWaitGivenUp = -2;
template <class C>
DOORBELL_HD int verdict(C& ctx, const DevQp& qp, uint64_t epoch, uint64_t idx) {
  using namespace exec;
  for (uint64_t e; (e = ctx.load(gpu_scope, acquire, &qp.hp->epoch)) <= epoch;) {
    if (ctx.load(gpu_scope, acquire, &qp.hp->dead) != 0) return -1;
    if (!ctx.spin("failover: verdict of the failed QP's recovery (epoch)", &qp.hp->epoch, e)) return kVerdictWaitGivenUp;
  }
  const uint64_t applied = ctx.load(gpu_scope, acquire, &qp.hp->applied[epoch % kVerdicts]);
  // Read the epoch again: had kVerdicts more recoveries passed meanwhile, the slot was reused.
  if (ctx.load(gpu_scope, acquire, &qp.hp->epoch) - epoch > kVerdicts || applied == kVerdictUnknown) return -1;
  return idx < applied ? 1 : 0;
}

// Whether an ordered entry of `slot` issued now on the path `backup` in `epoch` lands after
// every earlier entry of its slot: all of them went there too. (One completed on another
// path or in an earlier epoch counts against it as well: the log cannot tell, and the
// quiet that settles it costs only time.)
DOORBELL_HD bool behind_its_slot(const ReplayLog& log, uint32_t slot, bool backup, uint64_t epoch) {
  for (uint32_t i = 0; i < log.n; ++i)
    if (log.e[i].slot == slot && (!log.e[i].posted || log.e[i].backup != backup || log.e[i].epoch != epoch)) return false;
  return true;
}

// nbi_issue's p and atomics, out of line on the device: inlined beside post_rma in every put
// path's failover branch, they changed how nvcc laid out the put's own path.
template <class C>
DOORBELL_HD_OUTLINED OpResult issue_value_op(C& ctx, const DevState& st, const DevQp& qp, const LogEntry& e, uint64_t* begin, uint32_t* n) {
  if (e.kind == LogEntry::kAmo) return amo_on(ctx, st, qp, e.amo, e.a, e.pe, begin, n);
  *n = 1;
  return p_on(ctx, st, qp, e.a, e.b, uint32_t(e.bytes), e.pe, begin);
}

// Issue a non-blocking operation on the main QP or its backup; once posted, or maybe posted
// (kMaybePosted: a claim may still publish it), it goes into the thread's replay log (which
// has room), and quiet_log settles it. A call that did not post (the QP failed under it
// before its submit counted it) is issued again on the other path. An ordered entry that
// would not land behind its slot's goes into the log unposted: a quiet issues it once they
// are complete.
template <class C>
DOORBELL_HD OpResult nbi_issue(C& ctx, const DevState& st, LogEntry e) {
  ReplayLog& log = my_log(ctx, st);
  for (uint32_t attempt = 0;; ++attempt) {
    Path p;
    if (OpResult r = enter_path(ctx, st, e.slot, &p); r != OpResult::kOk) return r;
    const uint64_t epoch = ctx.load(exec::gpu_scope, exec::relaxed, &p.qp->hp->epoch);  // stable while a user
    if (e.ordered && !planted(st.opt.plant.signal_unordered) && !behind_its_slot(log, e.slot, p.backup, epoch)) {
      leave(ctx, *p.qp);
      e.posted = false;
      log.e[log.n++] = e;
      return OpResult::kOk;
    }
    OpResult r;
    uint32_t n = 1;
    if (e.kind == LogEntry::kAmo || e.kind == LogEntry::kP) r = issue_value_op(ctx, st, *p.qp, e, &e.begin, &n);
    else
      r = post_rma(ctx, st, *p.qp, e.kind == LogEntry::kPut ? mlx5::WqeOpcode::kRdmaWrite : mlx5::WqeOpcode::kRdmaRead, e.a,
                   e.b, e.bytes, e.pe, &e.begin, &n);
    note_outcome(ctx, *p.qp, r);
    // (Issued again at once on the other path, a partial transfer's stale parts could land
    // after the replay, and after a signal behind it.)
    e.partial = r != OpResult::kOk && r != OpResult::kTimeout && (e.kind == LogEntry::kPut || e.kind == LogEntry::kGet) &&
                count_pieces(st, e.a, e.b, e.bytes, e.pe) > max_transfer_wqes(*p.qp);
    if (r == OpResult::kMaybePosted || e.partial) r = OpResult::kOk;  // settled at quiet, not issued again now
    if (r == OpResult::kOk) {
      e.backup = p.backup, e.posted = true;
      e.end = e.begin + n;
      e.epoch = epoch;
      log.e[log.n++] = e;
    }
    leave(ctx, *p.qp);
    // Anything else means the call posted nothing (its reservation was abandoned with the
    // ring, whether it saw the FAILED mark or the error CQE itself): issue it again.
    if (r == OpResult::kOk || r == OpResult::kTimeout || attempt + 1 == kFailoverAttempts) return r;
  }
}

// Settle one logged operation (quiet_log's step): poll the QP that carried it (with a CST
// first for a get when the GPU lacks write ordering), and when that QP failed, wait for the
// recovery's verdict — until then the original may still run — and issue again what must
// be: a get or a partial transfer whatever happened to it, a put, p or atomic only if it
// never reached the responder. An unposted entry is issued if it would now land behind every
// earlier entry of its slot (behind_its_slot), else logged unposted again. kOk: it completed,
// or is back in the log; otherwise it is not (quiet_log keeps it).
template <class C>
DOORBELL_HD OpResult settle(C& ctx, const DevState& st, LogEntry& e) {
  if (!e.posted) return nbi_issue(ctx, st, e);  // (into e's place: quiet_log took it out)
  const DevQp& qp = path_qp(st, e.slot, e.backup);
  OpResult r = OpResult::kQpFailed;
  if (enter(ctx, qp)) {
    if (!e.partial && ctx.load(exec::gpu_scope, exec::relaxed, &qp.hp->epoch) == e.epoch)
      r = e.kind == LogEntry::kGet && !st.opt.may_skip_cst ? quiet(ctx, st, qp) : poll_cq(ctx, st, qp, e.end);
    if (r != OpResult::kTimeout && r != OpResult::kQpFailed) note_outcome(ctx, qp, r);  // (kQpFailed: marked already)
    leave(ctx, qp);
  }
  if (r == OpResult::kOk || r == OpResult::kTimeout) return r;
  // A write whose last WQE the responder executed landed whole (RC: in order): writing it
  // again could undo what a peer wrote after seeing its signal. A READ whose request
  // executed may still have lost its response: it is always read again.
  const bool write = e.kind == LogEntry::kPut || e.kind == LogEntry::kP;
  const int v = verdict(ctx, qp, e.epoch, write ? e.end - 1 : e.begin);
  if (v < 0) return v == kVerdictWaitGivenUp ? OpResult::kTimeout : OpResult::kCqError;
  if ((e.kind == LogEntry::kAmo || write) && v == 1 && !e.partial && !st.opt.plant.replay_applied) return OpResult::kOk;
  if (e.partial && planted(st.opt.plant.partial_landed)) return OpResult::kOk;
  if (e.kind != LogEntry::kAmo && st.opt.plant.no_replay) return OpResult::kOk;
  if (e.tries >= kFailoverAttempts) return OpResult::kCqError;
  ++e.tries;
  return nbi_issue(ctx, st, e);  // (into e's place)
}

DOORBELL_HD bool slot_failed(const ReplayLog& log, uint32_t slot) {
  for (uint32_t i = 0; i < log.n; ++i)
    if (log.e[i].slot == slot && log.e[i].failed) return true;
  return false;
}

inline constexpr uint32_t kAnySlot = ~0u, kNoSlot = ~0u - 1;  // quiet_log's `report`: every slot, none

// Complete every logged operation of this thread, in rounds: each settles every entry
// (settle) until each is done or failed for good. A failure does not stop the others: an
// entry to a dead peer would otherwise hold up every later one to healthy peers, and fill
// the log. An unposted entry of a failed one's slot (a signal whose data failed) fails with
// it. Returns the first failure, of `report`'s entries only unless kAnySlot, and drops the
// failed entries it reports: nothing of them can land any more (their QP was drained, their
// peer is gone, or they were never posted), so later signals of their slot need not wait.
// Failures not reported stay for the next quiet. A kTimeout (a wait given up: the original
// may still run) returns at once, what was not done kept in the log.
template <class C>
DOORBELL_HD OpResult quiet_log(C& ctx, const DevState& st, uint32_t report = kAnySlot) {
  ReplayLog& log = my_log(ctx, st);
  OpResult first = OpResult::kOk;
  // In place: a round takes entry i out and puts back at most one entry per entry taken (the
  // same one failed, or its issue), so what it puts back, at log.n <= i, is never one still
  // to take.
  for (bool open = log.n != 0; open;) {
    const uint32_t n = log.n;
    uint32_t failed = 0;
    log.n = 0;
    for (uint32_t i = 0; i < n; ++i) {
      LogEntry e = log.e[i];
      if (!e.failed) {
        const OpResult r = !e.posted && slot_failed(log, e.slot) ? OpResult::kCqError : settle(ctx, st, e);
        if (r == OpResult::kOk) continue;
        if (r == OpResult::kTimeout) {  // e was not logged again: keep it and the rest
          log.e[log.n++] = e;
          for (uint32_t k = i + 1; k < n; ++k) log.e[log.n++] = log.e[k];
          first = r;
          break;
        }
        e.failed = true;
        if (first == OpResult::kOk && (report == kAnySlot || e.slot == report)) first = r;
      }
      log.e[log.n++] = e, ++failed;
    }
    open = first != OpResult::kTimeout && log.n != failed;
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < log.n; ++i)
    if (!log.e[i].failed || (report != kAnySlot && log.e[i].slot != report)) log.e[kept] = log.e[i], log.e[kept++].failed = false;
  log.n = kept;
  return first;
}

// A non-blocking operation with failover; a full log is completed (quiet) first, its
// failures left for the caller's quiet. Only a log full of failures reports them here: the
// call returns their error and issues nothing.
template <class C>
DOORBELL_HD OpResult nbi_failover(C& ctx, const DevState& st, const LogEntry& e) {
  for (uint32_t report = kNoSlot; my_log(ctx, st).n == kLogEntries; report = kAnySlot)
    if (OpResult r = quiet_log(ctx, st, report); r != OpResult::kOk) return r;
  return nbi_issue(ctx, st, e);
}

// An ordered operation (put-with-signal's signal) with failover: when it had to wait for the
// earlier ones of its slot, they are completed and it is sent now, not at the caller's
// next quiet (a peer may be waiting for it before this thread quiets). It fails only with
// its slot: other slots' failures are left to the next quiet.
template <class C>
DOORBELL_HD OpResult ordered_failover(C& ctx, const DevState& st, const LogEntry& e) {
  if (OpResult r = nbi_failover(ctx, st, e); r != OpResult::kOk) return r;
  const ReplayLog& log = my_log(ctx, st);
  return log.e[log.n - 1].posted ? OpResult::kOk : quiet_log(ctx, st, e.slot);
}

// A fetch through an ibuf slot with failover (`issue(qp, &outcome)`: a fetching atomic, or
// g's READ): a READ is simply issued again after a failure; an atomic is reconciled by the
// recovery's verdict, never applied twice.
template <class C, class Issue>
DOORBELL_HD OpResult fetch_failover(C& ctx, const DevState& st, uint32_t slot, bool idempotent, Issue issue, uint64_t* result) {
  for (uint32_t attempt = 0; attempt < kFailoverAttempts; ++attempt) {
    Path p;
    if (OpResult r = enter_path(ctx, st, slot, &p); r != OpResult::kOk) return r;
    FetchOutcome f;
    const OpResult r = issue(*p.qp, &f);
    note_outcome(ctx, *p.qp, r);
    const uint64_t epoch = ctx.load(exec::gpu_scope, exec::relaxed, &p.qp->hp->epoch);
    leave(ctx, *p.qp);
    if (r == OpResult::kOk) return *result = f.value, r;
    if (r == OpResult::kTimeout) return r;
    if (idempotent || !f.posted) continue;  // a READ, or nothing reached the NIC: issue it again
    const int v = verdict(ctx, *p.qp, epoch, f.idx);
    if (v == kVerdictWaitGivenUp) return OpResult::kTimeout;
    if (v == 0) continue;     // never executed: safe to issue again
    if (v == 1 && f.value != kResultUnset) return *result = f.value, OpResult::kOk;  // its response landed first
    return v == 1 ? OpResult::kResultLost : OpResult::kCqError;  // not recoverable, and not repeated
  }
  return OpResult::kCqError;
}

}  // namespace doorbell::ibgda
