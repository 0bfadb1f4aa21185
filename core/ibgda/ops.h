// GPU-initiated RMA and atomics on the symmetric heap (SPEC §1, §4): put / get (non-blocking
// and blocking), fetch atomics through the ibuf ring, non-fetch atomics into ibuf slot 0
// (post_on_qp.h), on the QP qp_select.h picks — or, with failover on, the one failover.h
// picks by health. Addresses are heap offsets, valid on every PE.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/ibgda/amo_op.h"
#include "core/ibgda/failover.h"

namespace doorbell::ibgda {

template <class C>
DOORBELL_HD OpResult rma_nbi(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff, uint64_t bytes,
                             uint32_t pe, QpSelector sel) {
  if (bytes == 0) return OpResult::kOk;
  if (failover_on(st)) {
    LogEntry e;
    e.kind = op == mlx5::WqeOpcode::kRdmaWrite ? LogEntry::kPut : LogEntry::kGet;
    e.slot = select_slot(ctx, st, pe, sel), e.pe = pe, e.a = loff, e.b = roff, e.bytes = bytes;
    return nbi_failover(ctx, st, e);
  }
#ifdef __CUDA_ARCH__
  const DevQp qp = select_qp(ctx, st, pe, sel);  // a copy: its fields stay in registers
#else
  const DevQp& qp = select_qp(ctx, st, pe, sel);  // by reference: on the CPU model the copy costs a put
#endif
  uint64_t base;
  uint32_t n;
  return post_rma(ctx, st, qp, op, loff, roff, bytes, pe, &base, &n);
}

// put: local heap [src, +bytes) -> dest on pe.
template <class C>
DOORBELL_HD OpResult put_nbi(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe, QpSelector sel = {}) {
  return rma_nbi(ctx, st, mlx5::WqeOpcode::kRdmaWrite, src, dest, bytes, pe, sel);
}
// get: pe's heap [src, +bytes) -> local dest.
template <class C>
DOORBELL_HD OpResult get_nbi(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe, QpSelector sel = {}) {
  return rma_nbi(ctx, st, mlx5::WqeOpcode::kRdmaRead, dest, src, bytes, pe, sel);
}

// Wait for everything this PE has submitted on every QP (with failover: on every QP that
// has not failed, then this thread's logged operations, replayed where their QP failed).
template <class C>
DOORBELL_HD OpResult quiet_all(C& ctx, const DevState& st) {
  const uint32_t nqp = qps_per_set(st);
  for (uint32_t i = 0; i < nqp * (failover_on(st) ? 2 : 1); ++i) {
    const DevQp& qp = i < nqp ? st.qps[i] : st.backups[i - nqp];
    if (!enter(ctx, qp)) continue;
    const OpResult r = quiet(ctx, st, qp);
    note_outcome(ctx, qp, r);
    leave(ctx, qp);
    if (r == OpResult::kTimeout || (r != OpResult::kOk && !failover_on(st))) return r;
  }
  return failover_on(st) ? quiet_log(ctx, st) : OpResult::kOk;
}

template <class C>
DOORBELL_HD OpResult put(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = put_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  if (failover_on(st)) return quiet_log(ctx, st);
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));
}
template <class C>
DOORBELL_HD OpResult get(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = get_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  if (failover_on(st)) return quiet_log(ctx, st);
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));  // quiet issues the CST when one is needed
}

// Warp-collective put or get: every lane calls with the same arguments; lane i writes pieces
// i, i+32, ...; one reservation and one submission for the warp (NVSHMEM's warp-scope RMA).
template <class C>
DOORBELL_HD OpResult rma_nbi_warp(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff, uint64_t bytes, uint32_t pe) {
  const QpSelector by_warp{QpSelector::kByWarp, 0};
  OpResult r = OpResult::kOk;
  if (failover_on(st)) {  // failover: one logged transfer by lane 0 (the log is per thread)
    if (ctx.lane() == 0) r = rma_nbi(ctx, st, op, loff, roff, bytes, pe, by_warp);
    return OpResult(ctx.shfl(uint64_t(r), 0));
  }
  const DevQp qp = select_qp(ctx, st, pe, by_warp);
  const uint32_t n = count_pieces(st, loff, roff, bytes, pe);
  if (n > max_transfer_wqes(qp)) {  // more pieces than one reservation may take: lane 0 posts it in parts
    if (ctx.lane() == 0) r = rma_nbi(ctx, st, op, loff, roff, bytes, pe, by_warp);
    return OpResult(ctx.shfl(uint64_t(r), 0));
  }
  uint64_t base = 0;
  if (ctx.lane() == 0) r = reserve(ctx, st, qp, n, &base);
  base = ctx.shfl(base, 0);
  if (OpResult(ctx.shfl(uint64_t(r), 0)) != OpResult::kOk) return OpResult(ctx.shfl(uint64_t(r), 0));
  // Walk the pieces; each lane writes its own.
  uint64_t left = bytes;
  for (uint64_t i = 0; left != 0; ++i) {
    const heap::Piece p = heap::first_piece(st.keys, heap_base(st, st.my_pe), heap_base(st, pe), loff, roff, left, pe, key_dev(st, qp));
    left -= p.bytes;
    if (i % ctx.warp_size() == ctx.lane()) {
      const bool shifted = op == mlx5::WqeOpcode::kRdmaRead && planted(st.opt.plant.warp_get_shifted);
      write_rma_wqe(ctx, st, qp, op, base + i, p, pe, left == 0 ? mlx5::kCtrlCqUpdate : 0, shifted ? 8 : 0);
    }
    loff += p.bytes, roff += p.bytes;
  }
  ctx.syncwarp();
  if (ctx.lane() == 0) {
    if (op == mlx5::WqeOpcode::kRdmaRead) ctx.atomic_max(exec::gpu_scope, &qp.mv->get_head, base + n);  // quiet's CST covers it
    r = submit(ctx, st, qp, base, n);
  }
  return OpResult(ctx.shfl(uint64_t(r), 0));
}
template <class C>
DOORBELL_HD OpResult put_nbi_warp(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  return rma_nbi_warp(ctx, st, mlx5::WqeOpcode::kRdmaWrite, src, dest, bytes, pe);
}
template <class C>
DOORBELL_HD OpResult get_nbi_warp(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  return rma_nbi_warp(ctx, st, mlx5::WqeOpcode::kRdmaRead, dest, src, bytes, pe);
}

// Warp-collective batch of thread puts: every lane calls with its own [src, +bytes) -> dest
// (bytes may be 0), all to `pe`; the warp takes one reservation for every lane's pieces and
// submits once, only the warp's last WQE asking for a CQE. This is what NVSHMEM's
// thread-scope put does when it finds the whole warp converged on one PE.
template <class C>
DOORBELL_HD OpResult put_nbi_lanes(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  if (failover_on(st)) {  // failover logs per thread: each lane on its own, in turn
    OpResult r = OpResult::kOk;
    for (uint32_t k = 0; k < ctx.warp_size(); ++k)
      if (ctx.lane() == k) r = put_nbi(ctx, st, dest, src, bytes, pe, QpSelector{QpSelector::kByWarp, 0});
    return r;
  }
  const DevQp qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  const uint64_t mine = count_pieces(st, src, dest, bytes, pe);
  uint64_t end = mine;  // inclusive prefix sum of the lanes' piece counts
  for (uint32_t d = 1; d < ctx.warp_size(); d <<= 1) {
    const uint64_t below = ctx.shfl(end, ctx.lane() >= d ? ctx.lane() - d : ctx.lane());
    if (ctx.lane() >= d) end += below;
  }
  const uint64_t total = ctx.shfl(end, ctx.warp_size() - 1);
  if (total == 0) return OpResult::kOk;
  // More pieces than one reservation may take: each lane posts its own, in parts.
  if (total > max_transfer_wqes(qp)) return put_nbi(ctx, st, dest, src, bytes, pe, QpSelector{QpSelector::kByWarp, 0});
  uint64_t base = 0;
  OpResult r = OpResult::kOk;
  if (ctx.lane() == 0) r = reserve(ctx, st, qp, uint32_t(total), &base);
  base = ctx.shfl(base, 0);
  r = OpResult(ctx.shfl(uint64_t(r), 0));
  if (r != OpResult::kOk) return r;
  if (mine != 0) {
    const uint64_t first = base + end - mine;
    write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, first, src, dest, bytes, pe, end == total);
  }
  ctx.syncwarp();
  if (ctx.lane() == 0) r = submit(ctx, st, qp, base, uint32_t(total));
  return OpResult(ctx.shfl(uint64_t(r), 0));
}

// Block-collective put or get: every thread of the CTA calls it with the same arguments; one
// warp (warp 0) issues it, as NVSHMEM's block-scope calls do, and the CTA waits for that
// warp. The result is warp 0's; other warps see kOk.
template <class C>
DOORBELL_HD OpResult put_nbi_block(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  OpResult r = OpResult::kOk;
  if (ctx.warp() == 0) r = put_nbi_warp(ctx, st, dest, src, bytes, pe);
  ctx.sync_cta();
  return r;
}
template <class C>
DOORBELL_HD OpResult get_nbi_block(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  OpResult r = OpResult::kOk;
  if (ctx.warp() == 0) r = get_nbi_warp(ctx, st, dest, src, bytes, pe);
  ctx.sync_cta();
  return r;
}

// ---- p and g: single values of 1..8 bytes ----

// A fetch through an ibuf slot (`issue(qp, &outcome)`) on the warp's QP to pe, or with
// failover on the path failover picks (fetch_failover; `idempotent`: a READ). *value: the
// slot's value when it ended.
template <class C, class Issue>
DOORBELL_HD OpResult fetch_by_warp(C& ctx, const DevState& st, uint32_t pe, bool idempotent, Issue issue, uint64_t* value) {
  const QpSelector by_warp{QpSelector::kByWarp, 0};
  if (failover_on(st)) return fetch_failover(ctx, st, select_slot(ctx, st, pe, by_warp), idempotent, issue, value);
  FetchOutcome f;
  const OpResult r = issue(select_qp(ctx, st, pe, by_warp), &f);
  *value = f.value;
  return r;
}

// p: the value's low `bytes` bytes to pe's heap at `dest`, as one inline WRITE on the warp's
// QP (nothing waits for it: quiet does; with failover it is logged, as a put).
template <class C>
DOORBELL_HD OpResult p_bytes(C& ctx, const DevState& st, uint64_t dest, uint64_t value, uint32_t bytes, uint32_t pe) {
  const QpSelector by_warp{QpSelector::kByWarp, 0};
  if (failover_on(st)) {
    LogEntry e;
    e.kind = LogEntry::kP, e.slot = select_slot(ctx, st, pe, by_warp), e.pe = pe, e.a = dest, e.b = value, e.bytes = bytes;
    return nbi_failover(ctx, st, e);
  }
  uint64_t idx;
  return p_on(ctx, st, select_qp(ctx, st, pe, by_warp), dest, value, bytes, pe, &idx);
}
template <class T, class C>
DOORBELL_HD OpResult p(C& ctx, const DevState& st, uint64_t dest, std::type_identity_t<T> value, uint32_t pe) {
  static_assert(sizeof(T) <= 8);
  uint64_t v = 0;
  __builtin_memcpy(&v, &value, sizeof(T));
  return p_bytes(ctx, st, dest, v, sizeof(T), pe);
}
// g: `bytes` bytes of pe's heap at `src`, read into an ibuf slot and returned in *value's low
// bytes (the rest zero). With failover a failed READ is issued again.
template <class C>
DOORBELL_HD OpResult g_bytes(C& ctx, const DevState& st, uint64_t src, uint32_t bytes, uint32_t pe, uint64_t* value) {
  uint64_t v = 0;
  const OpResult r = fetch_by_warp(ctx, st, pe, true, [&](const DevQp& qp, FetchOutcome* f) { return g_on(ctx, st, qp, src, bytes, pe, f); }, &v);
  if (r == OpResult::kOk) *value = bytes == 8 ? v : v & ((uint64_t(1) << (8 * bytes)) - 1);
  return r;
}
template <class T, class C>
DOORBELL_HD OpResult g(C& ctx, const DevState& st, uint64_t src, uint32_t pe, T* value) {
  static_assert(sizeof(T) <= 8);
  uint64_t v = 0;
  const OpResult r = g_bytes(ctx, st, src, sizeof(T), pe, &v);
  if (r == OpResult::kOk) __builtin_memcpy(value, &v, sizeof(T));
  return r;
}

// ---- atomics ----

// Fetching atomic: on the warp's QP, result through its ibuf ring. A 4-byte result lands
// big-endian, as a ConnectX returns it (NVSHMEM swaps it too); an 8-byte one as it is.
template <class C>
DOORBELL_HD OpResult fetch_atomic(C& ctx, const DevState& st, const Amo& a, uint64_t off, uint32_t pe, uint64_t* result) {
  uint64_t v = 0;
  const OpResult r =
      fetch_by_warp(ctx, st, pe, false, [&](const DevQp& qp, FetchOutcome* f) { return fetch_atomic_on(ctx, st, qp, a, off, pe, f); }, &v);
  if (r == OpResult::kOk) *result = a.bytes == 4 ? mlx5::bswap32(uint32_t(v)) : v;
  return r;
}

// The AMOs NVSHMEM has, fetching and not, on 8-byte (T = uint64_t) or 4-byte (uint32_t)
// words; each posts the one WQE NVSHMEM 3.4.5 posts for it (Amo). Non-fetching ones name T
// (atomic_set<uint32_t>(...)); 8 bytes when they do not.
template <class T, class C>
DOORBELL_HD OpResult fetch_amo(C& ctx, const DevState& st, const Amo& a, uint64_t off, uint32_t pe, T* old) {
  uint64_t v = 0;
  const OpResult r = fetch_atomic(ctx, st, a, off, pe, &v);
  if (r == OpResult::kOk) *old = T(v);
  return r;
}
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch_add(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, amo_add(v, sizeof(T)), off, pe, old);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_compare_swap(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> cmp, std::type_identity_t<T> v,
                                         uint32_t pe, T* old) {
  const bool x = planted(st.opt.plant.cas_swapped);
  return fetch_amo(ctx, st, amo_compare_swap(x ? v : cmp, x ? cmp : v, sizeof(T)), off, pe, old);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_swap(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, amo_swap(v, sizeof(T)), off, pe, old);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch_or(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, amo_or(v, sizeof(T)), off, pe, old);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch_and(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, amo_and(v, sizeof(T)), off, pe, old);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch_xor(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, amo_xor(v, sizeof(T)), off, pe, old);
}

// Non-fetching atomic: the result lands in ibuf slot 0 and nobody waits for it. With failover
// it is logged and replayed only if the verdict says it never reached the responder;
// `ordered` (put-with-signal's signal): only behind this thread's logged operations of its
// slot (ordered_failover).
template <class C>
DOORBELL_HD OpResult nonfetch_amo(C& ctx, const DevState& st, const Amo& a, uint64_t off, uint32_t pe, bool ordered = false) {
  const QpSelector by_warp{QpSelector::kByWarp, 0};
  if (failover_on(st)) {
    LogEntry e;
    e.kind = LogEntry::kAmo, e.ordered = ordered, e.slot = select_slot(ctx, st, pe, by_warp), e.pe = pe, e.a = off, e.amo = a;
    return ordered ? ordered_failover(ctx, st, e) : nbi_failover(ctx, st, e);
  }
  uint64_t idx;
  uint32_t n;
  return amo_on(ctx, st, select_qp(ctx, st, pe, by_warp), a, off, pe, &idx, &n);
}
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_add(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe) {
  // NVSHMEM posts every non-fetching add as MASKED_FA (one WQEBB at either width).
  return nonfetch_amo(ctx, st, Amo{mlx5::WqeOpcode::kAtomicMaskedFa, sizeof(T), v}, off, pe);
}
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_set(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe) {
  return nonfetch_amo(ctx, st, amo_swap(v, sizeof(T)), off, pe);
}
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_and(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe) {
  return nonfetch_amo(ctx, st, amo_and(v, sizeof(T)), off, pe);
}
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_or(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe) {
  return nonfetch_amo(ctx, st, amo_or(v, sizeof(T)), off, pe);
}
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_xor(C& ctx, const DevState& st, uint64_t off, std::type_identity_t<T> v, uint32_t pe) {
  return nonfetch_amo(ctx, st, amo_xor(v, sizeof(T)), off, pe);
}

// NVSHMEM's inc forms: add 1.
template <class T = uint64_t, class C>
DOORBELL_HD OpResult atomic_inc(C& ctx, const DevState& st, uint64_t off, uint32_t pe) {
  return atomic_add<T>(ctx, st, off, 1, pe);
}
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch_inc(C& ctx, const DevState& st, uint64_t off, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, Amo{mlx5::WqeOpcode::kAtomicMaskedFa, sizeof(T), 1}, off, pe, old);  // MASKED_FA at both widths, as NVSHMEM's FETCH_INC
}

// NVSHMEM's atomic_fetch: MASKED_FA adding 0 (docs/nvshmem-device-ops.md 1).
template <class T, class C>
DOORBELL_HD OpResult atomic_fetch(C& ctx, const DevState& st, uint64_t off, uint32_t pe, T* old) {
  return fetch_amo(ctx, st, Amo{mlx5::WqeOpcode::kAtomicMaskedFa, sizeof(T), 0}, off, pe, old);
}

// Every AMO above by name, for callers that pick one at run time (workloads, scenario
// replay): T is the word (uint32_t or uint64_t); `cmp` is compare-swap's, `old` is written
// by the fetching ones only.
// (AmoOp: amo_op.h.)
template <class T, class C>
DOORBELL_HD OpResult amo(C& ctx, const DevState& st, AmoOp k, uint64_t off, T v, T cmp, uint32_t pe, T* old) {
  switch (k) {
    case AmoOp::kFetchAdd: return atomic_fetch_add<T>(ctx, st, off, v, pe, old);
    case AmoOp::kCompareSwap: return atomic_compare_swap<T>(ctx, st, off, cmp, v, pe, old);
    case AmoOp::kSwap: return atomic_swap<T>(ctx, st, off, v, pe, old);
    case AmoOp::kFetchAnd: return atomic_fetch_and<T>(ctx, st, off, v, pe, old);
    case AmoOp::kFetchOr: return atomic_fetch_or<T>(ctx, st, off, v, pe, old);
    case AmoOp::kFetchXor: return atomic_fetch_xor<T>(ctx, st, off, v, pe, old);
    case AmoOp::kFetchInc: return atomic_fetch_inc<T>(ctx, st, off, pe, old);
    case AmoOp::kAdd: return atomic_add<T>(ctx, st, off, v, pe);
    case AmoOp::kInc: return atomic_inc<T>(ctx, st, off, pe);
    case AmoOp::kSet: return atomic_set<T>(ctx, st, off, v, pe);
    case AmoOp::kAnd: return atomic_and<T>(ctx, st, off, v, pe);
    case AmoOp::kOr: return atomic_or<T>(ctx, st, off, v, pe);
    case AmoOp::kXor: return atomic_xor<T>(ctx, st, off, v, pe);
  }
  return OpResult::kCqError;  // not reached: every AmoOp is above
}

// ---- fence ----

// NVSHMEM 3.4.5's fence (docs/nvshmem-device-ops.md §5): ordering of this PE's puts and AMOs
// per peer. With one QP in all, RC already orders them: nothing to do. Otherwise wait for what
// every QP has submitted, posting nothing (no CST, unlike quiet: a fence orders writes, it
// does not make READ data visible), then a system-scope fence. NVSHMEM sets no fence bit on
// any data WQE. With failover an operation may be replayed on a backup QP after later ones
// landed, so a fence there is a quiet (which completes and replays the thread's log).
template <class C>
DOORBELL_HD OpResult fence_all(C& ctx, const DevState& st) {
  if (failover_on(st)) return quiet_all(ctx, st);
  const uint32_t nqp = qps_per_set(st);
  if (nqp <= 1) return OpResult::kOk;
  for (uint32_t i = 0; i < nqp; ++i) {
    const DevQp& qp = st.qps[i];
    if (OpResult r = poll_cq(ctx, st, qp, ctx.load(exec::gpu_scope, exec::acquire, &qp.mv->ready_head)); r != OpResult::kOk) return r;
  }
  ctx.fence(exec::system_scope);
  return OpResult::kOk;
}

// ---- signals ----

// put-with-signal (NVSHMEM's putmem_signal_nbi): the data, then the 8-byte signal update on
// the same QP (RC keeps the order, so the signal lands after the data; NVSHMEM sets no fence
// bit either): set as an 8-byte masked compare-swap, add as a masked fetch-add. Data in one
// heap chunk goes in one reservation with the signal (put_signal_on), as NVSHMEM posts it;
// data spanning chunks goes as put_nbi's, then the signal in its own reservation, as NVSHMEM
// does then, and so does a transfer whose one reservation would take more than half the ring
// (NVSHMEM's rings are 64 deep at least; a smaller one could never fit it). With failover
// on, the data and then the signal go through the thread's log, the signal ordered behind
// the data (nonfetch_amo's `ordered`: on the QP and in the epoch the data went, else after
// the data completed).
enum class SignalOp : uint8_t { kSet, kAdd };
DOORBELL_HD Amo signal_amo(uint64_t signal, SignalOp op) {
  return op == SignalOp::kSet ? amo_swap(signal, 8) : Amo{mlx5::WqeOpcode::kAtomicMaskedFa, 8, signal};
}
// The signal update alone (NVSHMEM's signal_op), on the warp's QP. `ordered`: behind this
// thread's earlier operations on it, even across a failover (put-with-signal's).
template <class C>
DOORBELL_HD OpResult signal_op(C& ctx, const DevState& st, uint64_t sig, uint64_t signal, SignalOp op, uint32_t pe, bool ordered = false) {
  return nonfetch_amo(ctx, st, signal_amo(signal, op), sig, pe, ordered);
}
template <class C>
DOORBELL_HD OpResult put_signal_nbi(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint64_t sig,
                                    uint64_t signal, SignalOp op, uint32_t pe) {
  const QpSelector by_warp{QpSelector::kByWarp, 0};
  const bool first = planted(st.opt.plant.signal_first);
  if (planted(st.opt.plant.signal_other_qp)) {  // RC orders a QP's requests, not two QPs'
    if (OpResult r = put_nbi(ctx, st, dest, src, bytes, pe, by_warp); r != OpResult::kOk) return r;
    uint64_t idx;
    uint32_t n;
    const QpSelector next{QpSelector::kIndex, ctx.cta() * ctx.warps_per_cta() + ctx.warp() + 1};
    return amo_on(ctx, st, select_qp(ctx, st, pe, next), signal_amo(signal, op), sig, pe, &idx, &n);
  }
  if (!failover_on(st) && bytes != 0) {
    const DevQp qp = select_qp(ctx, st, pe, by_warp);
    const Amo a = signal_amo(signal, op);
    if (1 + amo_wqebbs(a, qp.dci) <= max_transfer_wqes(qp) && qp_piece(st, qp, src, dest, bytes, pe).bytes == bytes)
      return put_signal_on(ctx, st, qp, dest, src, bytes, 1, sig, a, pe, 1);
  }
  if (first)
    if (OpResult r = signal_op(ctx, st, sig, signal, op, pe); r != OpResult::kOk) return r;
  if (OpResult r = put_nbi(ctx, st, dest, src, bytes, pe, by_warp); r != OpResult::kOk) return r;
  return first ? OpResult::kOk : signal_op(ctx, st, sig, signal, op, pe, true);
}
// Warp-collective put-with-signal (every lane, the same arguments; NVSHMEM's _warp form): one
// reservation for the pieces and the signal, lane k writing piece k, when the data is at most
// warp_size - 1 pieces and the whole fits half the ring; otherwise, or with failover, lane 0
// posts it as a thread.
template <class C>
DOORBELL_HD OpResult put_signal_nbi_warp(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint64_t sig,
                                         uint64_t signal, SignalOp op, uint32_t pe) {
  const DevQp qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  const Amo a = signal_amo(signal, op);
  const uint32_t n = failover_on(st) ? ctx.warp_size() : count_pieces(st, src, dest, bytes, pe);
  if (n < ctx.warp_size() && n + amo_wqebbs(a, qp.dci) <= max_transfer_wqes(qp))
    return put_signal_on(ctx, st, qp, dest, src, bytes, n, sig, a, pe, ctx.warp_size());
  OpResult r = OpResult::kOk;
  if (ctx.lane() == 0) r = put_signal_nbi(ctx, st, dest, src, bytes, sig, signal, op, pe);
  return OpResult(ctx.shfl(uint64_t(r), 0));
}
// Block-collective: warp 0 issues it (as put_nbi_block), the CTA waits for it.
template <class C>
DOORBELL_HD OpResult put_signal_nbi_block(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint64_t sig,
                                          uint64_t signal, SignalOp op, uint32_t pe) {
  OpResult r = OpResult::kOk;
  if (ctx.warp() == 0) r = put_signal_nbi_warp(ctx, st, dest, src, bytes, sig, signal, op, pe);
  ctx.sync_cta();
  return r;
}

// Wait until this PE's signal word at heap offset `sig` compares true with `value` (NVSHMEM's
// signal_wait_until: local polling only); *seen: the value that did. A NIC writes the word:
// system scope.
enum class Cmp : uint8_t { kEq, kNe, kGt, kGe, kLt, kLe };
template <class C>
DOORBELL_HD OpResult signal_wait_until(C& ctx, const DevState& st, uint64_t sig, Cmp cmp, uint64_t value, uint64_t* seen) {
  const auto* word = reinterpret_cast<const uint64_t*>(heap_base(st, st.my_pe) + sig);
  const auto holds = [cmp, value](uint64_t v) {
    switch (cmp) {
      case Cmp::kEq: return v == value;
      case Cmp::kNe: return v != value;
      case Cmp::kGt: return v > value;
      case Cmp::kGe: return v >= value;
      case Cmp::kLt: return v < value;
      case Cmp::kLe: return v <= value;
    }
    return false;
  };
  uint64_t last = 0;
  if (exec::wait_until(ctx, exec::system_scope, "signal_wait_until", word, [&](uint64_t v) { return last = v, holds(v); }) !=
      exec::WaitResult::kOk)
    return OpResult::kTimeout;
  *seen = last;
  return OpResult::kOk;
}

}  // namespace doorbell::ibgda
