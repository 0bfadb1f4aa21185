// The IBGDA send path (SPEC §4), one source for the CPU model and CUDA: reserve WQEBBs,
// submit in reservation order with the three doorbell rules, post (DBR then BlueFlame under
// a lock), poll the collapsed CQ rebuilding the 64-bit consumer index from the 16-bit
// wqe_counter, quiet. Functions taking `C& ctx` run in one thread unless named _warp.
#pragma once

#include <bit>
#include <cstdint>

#include "core/exec/context.h"
#include "core/ibgda/ordering.h"
#include "core/ibgda/state.h"
#include "core/sync/publish_windows.h"
#include "core/sync/submit_rule.h"
#include "hw/mlx5/wqe.h"

namespace doorbell::ibgda {

// kQpFailed: the QP was marked FAILED while the call waited; what the call reserved was not
// posted (failover.h retries it on the other path). kResultLost: a fetching atomic was
// applied exactly once, but its response was lost with the QP (not recoverable).
// kMaybePosted (failover's QPs only; elsewhere the failure): the ring failed after the call
// counted its WQEs for publishing, so another submitter's claim may still publish and ring
// them; failover settles the call by the recovery's verdict, as a posted one.
enum class OpResult : uint8_t { kOk, kTimeout, kCqError, kQpFailed, kResultLost, kMaybePosted };

// True once failover marked the QP FAILED: its waits give up instead of spinning on a ring
// whose progress may never come (the QP is in ERR, a reservation was abandoned).
template <class C>
DOORBELL_HD bool qp_failed(C& ctx, const DevQp& qp) {
  return qp.hp != nullptr && ctx.load(exec::gpu_scope, exec::acquire, &qp.hp->state) == uint64_t(Health::kFailed);
}

DOORBELL_HD sync::Windows windows(const DevQp& qp) { return {qp.mv->win_count, sync::window_shift(qp.nwqes)}; }

DOORBELL_HD uint8_t* wqe_at(const DevQp& qp, uint64_t idx) { return qp.wq + (idx & (qp.nwqes - 1)) * mlx5::kWqebb; }

// A WQE built in thread-local memory; publish_wqe writes it to the ring through the context.
struct WqeStage {
  alignas(16) uint8_t b[mlx5::kWqebb] = {};
  template <class Seg>
  DOORBELL_HD Seg* at(uint32_t off) {
    return reinterpret_cast<Seg*>(b + off);
  }
};

// Write a WQE at `w`: its segments after the control segment (`seg_bytes` of `segs`) first,
// then the control segment's second word, then its first 8 bytes (opcode, index, QPN, DS) as
// one store, so a reader that sees them sees it whole.
template <class C>
DOORBELL_HD_HOT void publish_wqe_segs(C& ctx, const Options& o, uint8_t* w, const void* segs, uint32_t seg_bytes, uint64_t idx,
                                      mlx5::WqeOpcode op, uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se, uint8_t ds) {
  const mlx5::SegWords c = mlx5::ctrl_words(uint16_t(idx), op, opmod, qpn, fm_ce_se, ds);
  auto* ctrl = reinterpret_cast<uint64_t*>(w);
  if (dropped(o, kOrderCtrlLast)) ctx.store(exec::gpu_scope, exec::relaxed, ctrl, c.w0);
  // Segments in 16-byte stores (a ring slot is 64-byte aligned: said, so that a copy has no
  // unaligned path).
  ctx.write_bytes(__builtin_assume_aligned(w + 16, 16), segs, seg_bytes);
  ctx.store(exec::gpu_scope, exec::relaxed, ctrl + 1, c.w1);
  if (!dropped(o, kOrderCtrlLast)) ctx.store(exec::gpu_scope, exec::relaxed, ctrl, c.w0);
}

// A staged WQE of `ds` octowords (its first WQEBB when `ds` > 4).
template <class C>
DOORBELL_HD_HOT void publish_wqe(C& ctx, const Options& o, uint8_t* w, WqeStage& s, uint64_t idx, mlx5::WqeOpcode op,
                             uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se, uint8_t ds) {
  publish_wqe_segs(ctx, o, w, s.b + 16, uint32_t(ds > 4 ? 3 : ds - 1) * mlx5::kDsBytes, idx, op, opmod, qpn, fm_ce_se, ds);
}

// A WQE of one WQEBB whose segments were built in registers (mlx5's *_words): no staging
// copy through thread-local memory on the GPU (gpu/run-post-bench's write phase). The words
// are stored as they are in memory, as set_seg would: little-endian.
static_assert(std::endian::native == std::endian::little, "SegWords are stored as little-endian words");
template <class C, uint32_t N>
DOORBELL_HD_HOT void publish_wqe(C& ctx, const Options& o, uint8_t* w, const mlx5::SegWords (&segs)[N], uint64_t idx,
                                 mlx5::WqeOpcode op, uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se) {
  static_assert(N >= 1 && N <= 3, "one WQEBB: the control segment and up to three more");
  publish_wqe_segs(ctx, o, w, segs, N * mlx5::kDsBytes, idx, op, opmod, qpn, fm_ce_se, uint8_t(N + 1));
}

// A WQE of two WQEBBs (`ds` > 4): the second (`s1`'s first `ds` - 4 octowords) at its own slot
// `w1` (after the ring's last slot comes its first), then the first as publish_wqe writes it.
template <class C>
DOORBELL_HD void publish_wqe2(C& ctx, const Options& o, uint8_t* w0, WqeStage& s0, uint8_t* w1, const WqeStage& s1, uint64_t idx,
                              mlx5::WqeOpcode op, uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se, uint8_t ds) {
  ctx.write_bytes(w1, s1.b, uint32_t(ds - 4) * mlx5::kDsBytes);
  publish_wqe(ctx, o, w0, s0, idx, op, opmod, qpn, fm_ce_se, ds);
}

// Keep the first error a poller saw, but let a root cause replace a flush: after an error
// the NIC flushes every later WQE into the same collapsed slot, so a poller often sees only
// a WR_FLUSH_ERR while another sees the CQE that caused it.
template <class C>
DOORBELL_HD void record_error(C& ctx, const DevState& st, uint64_t word) {
  if (st.error == nullptr) return;
  uint64_t seen = ctx.atomic_cas(exec::gpu_scope, st.error, 0, word);
  const auto flush = uint8_t(mlx5::CqeSyndrome::kWrFlushErr);
  while (seen != 0 && error_syndrome(seen) == flush && error_syndrome(word) != flush) {
    const uint64_t was = ctx.atomic_cas(exec::gpu_scope, st.error, seen, word);
    if (was == seen) break;
    seen = was;
  }
}

// Bytes 56..63 of the QP's collapsed CQE (qpn, wqe_counter big-endian, signature, op_own),
// read in one load.
DOORBELL_HD const uint64_t* cqe_tail(const DevQp& qp) {
  return reinterpret_cast<const uint64_t*>(reinterpret_cast<const uint8_t*>(qp.cqe) + 56);
}

// Whether `w`, a CQE tail this thread read, is an error CQE; if so it is recorded (st.error).
template <class C>
DOORBELL_HD bool error_cqe(C& ctx, const DevState& st, const DevQp& qp, uint64_t w) {
  if (!mlx5::cqe_opcode_is_error(mlx5::cqe_tail_opcode(w))) return false;
  const uint64_t head = ctx.load(exec::system_scope, exec::relaxed, cqe_tail(qp) - 1);  // bytes 48..55: syndrome is byte 55
  record_error(ctx, st, error_word(mlx5::cqe_word6_syndrome(head), qp.qpn, mlx5::cqe_tail_wqe_counter(w)));
  return true;
}

// Whether a thread waiting on this QP's words must give up: its QP failed (failover's health),
// or its CQ shows an error (looked at every 64th poll). Without failover nothing else says
// so, and the wait may never end: a thread whose poll met the error gave up its reservation
// unwritten, and the WQEs behind it are never published or posted. A wait keeps one exit for
// both: a second one out of reserve's wait cost lanes posting in turn their overlap
// (gpu/run-post-bench, one QP, thread-scope puts).
template <class C>
DOORBELL_HD OpResult ring_failed(C& ctx, const DevState& st, const DevQp& qp, uint64_t polls) {
  return qp_failed(ctx, qp) ? OpResult::kQpFailed
         : (polls & 63) == 63 && error_cqe(ctx, st, qp, ctx.load(exec::system_scope, exec::relaxed, cqe_tail(qp)))
             ? OpResult::kCqError
             : OpResult::kOk;
}

// Wait until everything below `idx` has completed; fail on an error CQE (recorded in
// st.error) rather than spin on it.
template <class C>
DOORBELL_HD OpResult poll_cq(C& ctx, const DevState& st, const DevQp& qp, uint64_t idx) {
  using namespace exec;
  if (ctx.load(gpu_scope, acquire, &qp.mv->cons_idx) >= idx) return OpResult::kOk;
  // The 16-bit wqe_counter can only be trusted for posted WQEs. (Polls are relaxed, as
  // every poll below: exec::poll_acquired says why.)
  for (uint64_t p, polls = 0; (p = ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx)) < idx; ++polls) {
    if (OpResult f = ring_failed(ctx, st, qp, polls); f != OpResult::kOk) return f;
    if (!ctx.spin("poll_cq: prod_idx >= idx", &qp.mv->prod_idx, p)) return OpResult::kTimeout;
  }
  const uint64_t* tail = cqe_tail(qp);
  uint16_t wc = 0;
  for (uint64_t polls = 0;; ++polls) {
    const uint64_t w = polls == 0 ? read_cqe_tail(ctx, st.opt, tail) : ctx.load(system_scope, relaxed, tail);
    wc = mlx5::cqe_tail_wqe_counter(w);
    if (error_cqe(ctx, st, qp, w)) return OpResult::kCqError;
    // Done once wqe_counter + 1 reaches idx (the -2 makes wqe_counter + 1 == idx wrap out).
    if (uint16_t(uint16_t(idx) - wc - 2) >= qp.nwqes) {
      cqe_acquired(ctx, st.opt, polls);
      completion_released(ctx, st.opt, polls);
      break;
    }
    if (ctx.load(gpu_scope, relaxed, &qp.mv->cons_idx) >= idx) {  // another thread did it
      poll_acquired(ctx, gpu_scope, 1);
      return OpResult::kOk;
    }
    if (qp_failed(ctx, qp)) return OpResult::kQpFailed;  // e.g. its CQ overran: no CQE will come
    if (!ctx.spin("poll_cq: CQE wqe_counter", tail, wc)) return OpResult::kTimeout;
  }
  // wqe_counter + 1 is at or above idx (the test above), within 2^16 of it.
  const uint16_t wc1 = uint16_t(wc + 1);
  const uint64_t cons = st.opt.plant.no_carry ? (idx & ~uint64_t(0xffff)) | wc1 : mlx5::widen16(idx, wc1);
  // Raised, never stored: a slower poller's older value must not move it back.
  if (st.opt.plant.cons_store) ctx.store(gpu_scope, relaxed, &qp.mv->cons_idx, cons);
  else ctx.atomic_max(gpu_scope, &qp.mv->cons_idx, cons);
  return OpResult::kOk;
}

template <class C>
DOORBELL_HD OpResult post_send(C& ctx, const DevState& st, const DevQp& qp, uint64_t upto, uint64_t own_from);

// Reserve n WQEBBs; waits (polling the CQ) until the ring has room for them. The room it
// waits for may depend on WQEs that are written but unposted — their submitters skipped
// the doorbell because this reservation made resv_head != new — so the waiter posts them
// itself where the batch rule may not (num_requests_in_batch > depth deadlocks without it:
// IbgdaProtocol.NoHangForEveryBatchSizeAndQueueDepth). Elsewhere the rule posts them: the
// chain of submitters stops only at a reservation still waiting for room, more than
// depth - n past the last posted WQE; with batch + n <= depth that unposted span crosses a
// batch boundary, and the submitter whose span crossed it rang.
// (Waiters posting whatever they found ready rang a doorbell per WQE on an overfull ring:
// gpu/run-post-bench, 8 shared QPs, thread scope.)
// The wait stays in the function and its first poll in the loop: with the wait split out
// (the first poll peeled off) the GPU's thread-scope puts, 32 lanes of a warp on one QP,
// ran several times slower (gpu/run-post-bench row 1), as with post_send's lock below.
template <class C>
DOORBELL_HD_HOT OpResult reserve(C& ctx, const DevState& st, const DevQp& qp, uint32_t n, uint64_t* base) {
  using namespace exec;
  *base = ctx.atomic_add(gpu_scope, &qp.mv->resv_head, n);
  // The first look at the room, read beside the atomic (a value older than the reservation
  // only understates the room).
  const uint64_t* cons = &qp.mv->cons_idx;
  const uint64_t first = ctx.load(gpu_scope, acquire, cons);
  if (*base + n <= qp.nwqes) return OpResult::kOk;
  const uint64_t need = *base + n - qp.nwqes;
  for (uint64_t polls = 0;; ++polls) {
    if ((polls == 0 ? first : ctx.load(gpu_scope, relaxed, cons)) >= need) {
      poll_acquired(ctx, gpu_scope, polls);
      return OpResult::kOk;
    }
    if (OpResult f = ring_failed(ctx, st, qp, polls); f != OpResult::kOk) return f;  // abandoned with the ring
    const uint64_t prod = ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx);
    if (prod >= need) return poll_cq(ctx, st, qp, need);
    const uint64_t ready = ctx.load(gpu_scope, relaxed, &qp.mv->ready_head);
    if (ready > prod && st.opt.num_requests_in_batch + n > qp.nwqes) {
      if (OpResult r = post_send(ctx, st, qp, ready, ~uint64_t{0}); r != OpResult::kOk) return r;
    } else if (!ctx.spin("reserve: room (waiting for earlier WQEs to be written)", &qp.mv->ready_head, ready)) {
      return OpResult::kTimeout;
    }
  }
}

// The DBR store and the doorbell, for a caller that already ordered the WQEs before them
// (ring_qp's fence, or the publish fence before ring_alone).
template <class C>
DOORBELL_HD void ring_fenced(C& ctx, const Options& o, const DevQp& qp, uint64_t to) {
  ctx.store(exec::system_scope, exec::relaxed, qp.dbr, mlx5::dbr_word(to));
  ring_nic_doorbell(ctx, o, qp.bf, mlx5::doorbell_value(to, qp.qpn));
}
// Ring a QP's NIC for every WQE below `to`: the doorbell record, then the BlueFlame store,
// each behind the fence its ordering names (`others`: the DBR covers WQEs other threads
// wrote). The one ringer: post_send on the GPU, and the host agents (the CPU proxy, the
// recovery watchdog) through a context of the host's stores.
template <class C>
DOORBELL_HD void ring_qp(C& ctx, const Options& o, const DevQp& qp, uint64_t to, bool others) {
  wqes_before_dbr(ctx, o, others);
  ring_fenced(ctx, o, qp, to);
}

// Make WQEs [.., upto) visible to the NIC: producer index, DBR, then the BlueFlame doorbell
// (or, in the CPU-handler variant, the host-visible producer word a proxy thread watches).
// WQEs from `own_from` on are the caller's, published by its own fence (publish_wqes).
template <class C>
DOORBELL_HD OpResult post_send(C& ctx, const DevState& st, const DevQp& qp, uint64_t upto, uint64_t own_from) {
  using namespace exec;
  // Submitted by now (read beside the lock CAS, not after it): the holder posts all of it,
  // so that ringers queued behind the lock find their WQEs posted and leave without
  // ringing. Without that, on a QP shared by many warps every submitter whose span
  // crossed a batch boundary rang in turn, each with its fences (gpu/run-post-bench).
  const uint64_t ready = ctx.load(gpu_scope, relaxed, &qp.mv->ready_head);
  while (ctx.atomic_cas(gpu_scope, &qp.mv->post_send_lock, 0, 1) != 0) {
    // Loads until the lock looks free, leaving once a holder covers upto: waiters that CAS
    // in a loop slowed the holder on the same line (submit's publish polls with loads too).
    // (The loop stays here: split out, lanes of one warp on one QP ran several times slower.)
    for (;;) {
      if (ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx) >= upto) return OpResult::kOk;  // it rings for these WQEs
      if (ctx.load(gpu_scope, relaxed, &qp.mv->post_send_lock) == 0) break;
      if (!ctx.spin("post_send: lock", &qp.mv->post_send_lock, 1)) return OpResult::kTimeout;
    }
  }
  const uint64_t to = ready > upto ? ready : upto;
  const uint64_t old = ctx.atomic_max(gpu_scope, &qp.mv->prod_idx, to);
  if (to > old) {
    if (st.opt.cpu_proxy) {
      publish_to_proxy(ctx, st.opt, &qp.mv->proxy_prod, to);
    } else {
      ring_qp(ctx, st.opt, qp, to, old < own_from || to > upto);
    }
  }
  // Relaxed: whatever the holder wrote for the NIC is already ordered before this store by
  // the fence of ring_nic_doorbell (or publish_to_proxy's); with upto <= old it wrote nothing.
  ctx.store(gpu_scope, relaxed, &qp.mv->post_send_lock, 0);
  return OpResult::kOk;
}

// Whether a submitter may ring by itself when alone (lock_early, submit_alone). (The CPU
// proxy's publish keeps its own order; the plant rings only on batch boundaries.)
DOORBELL_HD bool may_be_alone(const Options& o) { return !o.cpu_proxy && !o.plant.no_idle_doorbell; }

// A submitter alone on its QP — nobody reserved after it (`resv` == next, read beside the
// publish fence) and every WQE before it published (ready_head at its base) — would ring by
// the submit rule's idle clause anyway, so it publishes and rings under the post lock, which
// it holds: ready_head (no one else moves it from base) and prod_idx are raised by atomics
// whose results it does not wait for, where the general path waits for the publish CAS and
// for prod_idx's atomic. The publish fence already ordered its own WQEs before ready_head
// and the DBR; where the ring covers others' unposted WQEs (`prod`, read beside taking the
// lock, below base) they are fenced again.
template <class C>
DOORBELL_HD_HOT void ring_alone(C& ctx, const DevState& st, const DevQp& qp, uint64_t base, uint64_t next, uint64_t prod) {
  using namespace exec;
  wqes_before_dbr(ctx, st.opt, prod != base);
  // Raised (reductions: nobody reads the results), never stored: a slower raiser's older value
  // must not move them back. Nothing orders them before the DBR store when no fence precedes
  // it; the host watchdog that re-rings from prod_idx without the lock (sim/ibgda/recovery.cc)
  // does so only after the QP sat still for its window.
  exec::reduce_max(ctx, gpu_scope, &qp.mv->ready_head, next);
  exec::reduce_max(ctx, gpu_scope, &qp.mv->prod_idx, next);
  ring_fenced(ctx, st.opt, qp, next);  // its fence orders these before the unlock
  ctx.store(gpu_scope, relaxed, &qp.mv->post_send_lock, 0);
  // Counted too, for the windows' other submitters (a later one that counted before this
  // landed learns it on a later look, publish_counted); last, where the ring's fence does
  // not wait for it.
  sync::count_published(ctx, windows(qp), base, next);
}

// The post lock for a poster whose WQEs start at `base`: held only if every WQE before base
// was published (ready_head, read beside the CAS, at base; it cannot pass base before this
// poster publishes its n > 0 WQEBBs, so it stays there; with n = 0 a later reserver's publish
// may move it, and then submit finds resv_head past base and unlocks). Puts and gets try it
// right after their reservation (post_pieces), so that its round trip runs beside the WQE
// writes and the publish fence instead of after them; submit rings under it if nobody
// reserved after the poster, else unlocks. (Lanes of a warp posting in
// turn ran up to ~1.9x as fast, no longer bimodal per process; the shared-QP lane-0 rows ~8 %
// slower: docs/benchmarks.md.)
struct EarlyLock {
  bool held = false;
  uint64_t prod = 0;  // prod_idx, read beside the CAS
};
template <class C>
DOORBELL_HD_HOT EarlyLock lock_early(C& ctx, const DevState& st, const DevQp& qp, uint64_t base) {
  using namespace exec;
  EarlyLock l;
  if (!may_be_alone(st.opt)) return l;
  const uint64_t lock = ctx.atomic_cas(gpu_scope, &qp.mv->post_send_lock, 0, 1);
  const uint64_t ready = ctx.load(gpu_scope, relaxed, &qp.mv->ready_head);
  l.prod = ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx);
  l.held = lock == 0;
  if (l.held && ready != base) ctx.store(gpu_scope, relaxed, &qp.mv->post_send_lock, 0), l.held = false;
  return l;
}

// A poster that did not take the lock early takes it at submit when nobody reserved after it
// (the same probe as lock_early's, written out: called through lock_early, the post
// bench's PTX changed throughout, unmeasured, and its thread rows follow nvcc's layout), and rings
// alone. Returns false, having changed nothing, when it is not alone or the lock is taken.
template <class C>
DOORBELL_HD_HOT bool submit_alone(C& ctx, const DevState& st, const DevQp& qp, uint64_t base, uint64_t next, uint64_t resv) {
  using namespace exec;
  if (resv != next) return false;
  const uint64_t lock = ctx.atomic_cas(gpu_scope, &qp.mv->post_send_lock, 0, 1);
  const uint64_t ready = ctx.load(gpu_scope, relaxed, &qp.mv->ready_head), prod = ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx);
  if (lock != 0) return false;
  if (ready != base) {  // earlier WQEs still being written: the general path
    ctx.store(gpu_scope, relaxed, &qp.mv->post_send_lock, 0);
    return false;
  }
  ring_alone(ctx, st, qp, base, next, prod);
  return true;
}

// Publish WQEs [base, base+n) in reservation order and ring by the submit rule
// (core/sync/submit_rule.h). Whether it may be alone is read before the publish fence, whose
// wait then covers the load. `early`: the post lock as lock_early left it; held, the call
// rings alone if nobody reserved after it, else unlocks and takes the general path.
template <class C>
DOORBELL_HD_HOT OpResult submit(C& ctx, const DevState& st, const DevQp& qp, uint64_t base, uint32_t n, const EarlyLock& early = {}) {
  using namespace exec;
  const uint64_t next = base + n;
  const bool alone_ok = may_be_alone(st.opt);
  uint64_t resv = alone_ok ? ctx.load(gpu_scope, relaxed, &qp.mv->resv_head) : 0;
  publish_wqes(ctx, st.opt);
  if (early.held) {
    if (resv == next) return ring_alone(ctx, st, qp, base, next, early.prod), OpResult::kOk;
    ctx.store(gpu_scope, relaxed, &qp.mv->post_send_lock, 0);
  } else if (alone_ok && submit_alone(ctx, st, qp, base, next, resv)) {
    return OpResult::kOk;
  }
  OpResult failed = OpResult::kOk;  // an earlier reservation was abandoned (ring_failed)
  uint64_t moved = 0;
  switch (sync::publish_counted(ctx, &qp.mv->ready_head, &qp.mv->resv_head, windows(qp), base, next, "submit: ready_head >= next",
                                [&](uint64_t polls) { return (failed = ring_failed(ctx, st, qp, polls)) != OpResult::kOk; }, &moved)) {
    case sync::Publish::kOk: break;
    case sync::Publish::kTimeout: return OpResult::kTimeout;
    case sync::Publish::kAbandoned: return qp.hp != nullptr ? OpResult::kMaybePosted : failed;
  }
  if (moved == 0) return OpResult::kOk;  // another submitter published these WQEs, and rings by the rule
  resv = ctx.load(gpu_scope, relaxed, &qp.mv->resv_head);
  const uint64_t prod = ctx.load(gpu_scope, relaxed, &qp.mv->prod_idx);
  // WQEs past this call's own were written by others: the ring fences for them.
  if (sync::must_ring(prod, moved, n, resv, st.opt.num_requests_in_batch, st.opt.plant.no_idle_doorbell))
    return post_send(ctx, st, qp, moved, moved > next ? moved : base);
  return OpResult::kOk;
}

// A consistency WQE (CST) at `idx`: a fenced DUMP reading one byte of ibuf slot 0; its
// completion means every earlier READ and fetch has landed.
template <class C>
DOORBELL_HD void write_cst(C& ctx, const DevState& st, const DevQp& qp, uint64_t idx) {
  WqeStage s;
  mlx5::set_data_seg(s.at<mlx5::WqeDataSeg>(16), 1, qp.ibuf_lkey, reinterpret_cast<uint64_t>(qp.ibuf));
  publish_wqe(ctx, st.opt, wqe_at(qp, idx), s, idx, mlx5::WqeOpcode::kDump, 0, qp.qpn, mlx5::kCtrlCqUpdate | mlx5::kCtrlFmFence, 2);
}
// A CST alone. Returns the index after it.
template <class C>
DOORBELL_HD OpResult post_cst(C& ctx, const DevState& st, const DevQp& qp, uint64_t* end) {
  uint64_t base;
  if (OpResult r = reserve(ctx, st, qp, 1, &base); r != OpResult::kOk) return r;
  write_cst(ctx, st, qp, base);
  *end = base + 1;
  return submit(ctx, st, qp, base, 1);
}

// Wait for every submitted WQE of this QP; without GPU write ordering, a CST first makes
// sure outstanding READ data has landed.
template <class C>
DOORBELL_HD OpResult quiet(C& ctx, const DevState& st, const DevQp& qp) {
  using namespace exec;
  uint64_t upto = ctx.load(gpu_scope, acquire, &qp.mv->ready_head);
  uint64_t gets = 0;
  if (!st.opt.may_skip_cst && !planted(st.opt.plant.quiet_without_cst) && (gets = ctx.load(gpu_scope, relaxed, &qp.mv->get_head)) >
                                  ctx.load(gpu_scope, relaxed, &qp.mv->get_tail)) {
    if (OpResult r = post_cst(ctx, st, qp, &upto); r != OpResult::kOk) return r;
  }
  if (OpResult r = poll_cq(ctx, st, qp, upto); r != OpResult::kOk) return r;
  if (gets != 0) ctx.atomic_max(gpu_scope, &qp.mv->get_tail, gets);
  return OpResult::kOk;
}

}  // namespace doorbell::ibgda
