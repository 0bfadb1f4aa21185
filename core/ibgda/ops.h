// GPU-initiated RMA and atomics on the symmetric heap (SPEC §1, §4): put / get (non-blocking
// and blocking), fetch atomics through the ibuf ring, non-fetch atomics into ibuf slot 0
// (post_on_qp.h), on the QP qp_select.h picks — or, with failover on, the one failover.h
// picks by health. Addresses are heap offsets, valid on every PE.
#pragma once

#include <cstdint>

#include "core/ibgda/failover.h"

namespace doorbell::ibgda {

template <class C>
DOORBELL_HD OpResult rma_nbi(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff, uint64_t bytes,
                             uint32_t pe, QpSelector sel) {
  if (bytes == 0) return OpResult::kOk;
  if (st.backups != nullptr) {
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
  for (uint32_t i = 0; i < nqp * (st.backups != nullptr ? 2 : 1); ++i) {
    const DevQp& qp = i < nqp ? st.qps[i] : st.backups[i - nqp];
    if (!enter(ctx, qp)) continue;
    const OpResult r = quiet(ctx, st, qp);
    note_outcome(ctx, qp, r);
    leave(ctx, qp);
    if (r == OpResult::kTimeout || (r != OpResult::kOk && st.backups == nullptr)) return r;
  }
  return st.backups != nullptr ? quiet_log(ctx, st) : OpResult::kOk;
}

template <class C>
DOORBELL_HD OpResult put(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = put_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  if (st.backups != nullptr) return quiet_log(ctx, st);
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));
}
template <class C>
DOORBELL_HD OpResult get(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = get_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  if (st.backups != nullptr) return quiet_log(ctx, st);
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));  // quiet issues the CST when one is needed
}

// Warp-collective put: every lane calls with the same arguments; lane i writes pieces
// i, i+32, ...; one reservation and one submission for the warp.
template <class C>
DOORBELL_HD OpResult put_nbi_warp(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  if (st.backups != nullptr) {  // failover: one logged put by lane 0 (the log is per thread)
    OpResult r = OpResult::kOk;
    if (ctx.lane() == 0) r = put_nbi(ctx, st, dest, src, bytes, pe, QpSelector{QpSelector::kByWarp, 0});
    return OpResult(ctx.shfl(uint64_t(r), 0));
  }
  const DevQp qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  const uint32_t n = count_pieces(st, src, dest, bytes, pe);
  OpResult r = OpResult::kOk;
  if (n > max_transfer_wqes(qp)) {  // more pieces than one reservation may take: lane 0 posts it in parts
    if (ctx.lane() == 0) r = put_nbi(ctx, st, dest, src, bytes, pe, QpSelector{QpSelector::kByWarp, 0});
    return OpResult(ctx.shfl(uint64_t(r), 0));
  }
  uint64_t base = 0;
  if (ctx.lane() == 0) r = reserve(ctx, st, qp, n, &base);
  base = ctx.shfl(base, 0);
  if (OpResult(ctx.shfl(uint64_t(r), 0)) != OpResult::kOk) return OpResult(ctx.shfl(uint64_t(r), 0));
  // Walk the pieces; each lane writes its own.
  uint64_t loff = src, roff = dest, left = bytes;
  for (uint64_t i = 0; left != 0; ++i) {
    const heap::Piece p = heap::first_piece(st.keys, st.heap_bases[st.my_pe], st.heap_bases[pe], loff, roff, left, pe, key_dev(st, qp));
    left -= p.bytes;
    if (i % ctx.warp_size() == ctx.lane()) {
      WqeStage s;
      mlx5::set_raddr_seg(s.at<mlx5::WqeRaddrSeg>(16), p.raddr, p.rkey);
      mlx5::set_data_seg(s.at<mlx5::WqeDataSeg>(32), uint32_t(p.bytes), p.lkey, p.laddr);
      publish_wqe(ctx, st.opt, wqe_at(qp, base + i), s, base + i, mlx5::WqeOpcode::kRdmaWrite, 0, qp.qpn,
                  left == 0 ? mlx5::kCtrlCqUpdate : 0, 3);
    }
    loff += p.bytes, roff += p.bytes;
  }
  ctx.syncwarp();
  if (ctx.lane() == 0) r = submit(ctx, st, qp, base, n);
  return OpResult(ctx.shfl(uint64_t(r), 0));
}

// Warp-collective batch of thread puts: every lane calls with its own [src, +bytes) -> dest
// (bytes may be 0), all to `pe`; the warp takes one reservation for every lane's pieces and
// submits once, only the warp's last WQE asking for a CQE. This is what NVSHMEM's
// thread-scope put does when it finds the whole warp converged on one PE.
template <class C>
DOORBELL_HD OpResult put_nbi_lanes(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  if (st.backups != nullptr) {  // failover logs per thread: each lane on its own, in turn
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

// Block-collective put: every thread of the CTA calls it with the same arguments; one warp
// (warp 0) issues it, as NVSHMEM's block-scope calls do, and the CTA waits for that warp.
// The result is warp 0's; other warps see kOk.
template <class C>
DOORBELL_HD OpResult put_nbi_block(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  OpResult r = OpResult::kOk;
  if (ctx.warp() == 0) r = put_nbi_warp(ctx, st, dest, src, bytes, pe);
  ctx.sync_cta();
  return r;
}

// ---- atomics ----

// Fetching atomic: on the warp's QP, result through its ibuf ring.
template <class C>
DOORBELL_HD OpResult fetch_atomic(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t off, uint32_t pe, uint64_t swap_add,
                                  uint64_t compare, uint64_t* result) {
  const QpSelector sel{QpSelector::kByWarp, 0};
  if (st.backups != nullptr) return fetch_failover(ctx, st, select_slot(ctx, st, pe, sel), op, off, pe, swap_add, compare, result);
  FetchOutcome f;
  const OpResult r = fetch_atomic_on(ctx, st, select_qp(ctx, st, pe, sel), op, off, pe, swap_add, compare, &f);
  if (r == OpResult::kOk) *result = f.value;
  return r;
}

template <class C>
DOORBELL_HD OpResult atomic_fetch_add(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return fetch_atomic(ctx, st, mlx5::WqeOpcode::kAtomicFa, off, pe, v, 0, old);
}
template <class C>
DOORBELL_HD OpResult atomic_compare_swap(C& ctx, const DevState& st, uint64_t off, uint64_t cmp, uint64_t v, uint32_t pe,
                                         uint64_t* old) {
  const bool x = planted(st.opt.plant.cas_swapped);
  return fetch_atomic(ctx, st, mlx5::WqeOpcode::kAtomicCs, off, pe, x ? cmp : v, x ? v : cmp, old);
}

// Operations mlx5 has no single 8-byte, one-WQEBB atomic for (swap, and, or, xor): a
// compare-and-swap loop on the remote word.
template <class C, class F>
DOORBELL_HD OpResult atomic_fetch_op(C& ctx, const DevState& st, uint64_t off, uint32_t pe, F next, uint64_t* old) {
  uint64_t cur;
  if (OpResult r = atomic_fetch_add(ctx, st, off, 0, pe, &cur); r != OpResult::kOk) return r;
  for (;;) {
    uint64_t seen;
    if (OpResult r = atomic_compare_swap(ctx, st, off, cur, next(cur), pe, &seen); r != OpResult::kOk) return r;
    if (seen == cur) break;
    cur = seen;
  }
  *old = cur;
  return OpResult::kOk;
}

template <class C>
DOORBELL_HD OpResult atomic_swap(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return atomic_fetch_op(ctx, st, off, pe, [v](uint64_t) { return v; }, old);
}
template <class C>
DOORBELL_HD OpResult atomic_fetch_or(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return atomic_fetch_op(ctx, st, off, pe, [v](uint64_t c) { return c | v; }, old);
}
template <class C>
DOORBELL_HD OpResult atomic_fetch_and(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return atomic_fetch_op(ctx, st, off, pe, [v](uint64_t c) { return c & v; }, old);
}
template <class C>
DOORBELL_HD OpResult atomic_fetch_xor(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return atomic_fetch_op(ctx, st, off, pe, [v](uint64_t c) { return c ^ v; }, old);
}

// Non-fetching add: the result lands in ibuf slot 0 and nobody waits for it.
template <class C>
DOORBELL_HD OpResult atomic_add(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe) {
  const QpSelector sel{QpSelector::kByWarp, 0};
  if (st.backups != nullptr) {
    LogEntry e;
    e.kind = LogEntry::kAdd, e.slot = select_slot(ctx, st, pe, sel), e.pe = pe, e.a = off, e.b = v;
    return nbi_failover(ctx, st, e);
  }
  uint64_t idx;
  return add_on(ctx, st, select_qp(ctx, st, pe, sel), off, v, pe, &idx);
}

}  // namespace doorbell::ibgda
