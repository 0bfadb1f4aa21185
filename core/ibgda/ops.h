// GPU-initiated RMA and atomics on the symmetric heap (SPEC §1, §4): put / get (non-blocking
// and blocking) split at heap-chunk boundaries, one RDMA WQE per piece, only the last one
// asking for a CQE; fetch atomics through the ibuf ring (slots reserved and released in
// order); non-fetch atomics into ibuf slot 0. Addresses are heap offsets, valid on every PE.
#pragma once

#include <cstdint>

#include "core/ibgda/qp_select.h"
#include "core/ibgda/queue.h"

namespace doorbell::ibgda {

// How many pieces [loff, +bytes) -> [roff, +bytes) on pe splits into at chunk ends.
DOORBELL_HD uint32_t count_pieces(const DevState& st, uint64_t loff, uint64_t roff, uint64_t bytes, uint32_t pe) {
  uint32_t n = 0;
  while (bytes != 0) {
    const heap::Piece p = heap::first_piece(st.keys, st.heap_bases[st.my_pe], st.heap_bases[pe], loff, roff, bytes, pe);
    loff += p.bytes, roff += p.bytes, bytes -= p.bytes, ++n;
  }
  return n;
}

// Write the RDMA WRITE / READ WQEs for a transfer at [base, base + pieces), signalling the last.
template <class C>
DOORBELL_HD void write_rma_wqes(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t base, uint64_t loff,
                                uint64_t roff, uint64_t bytes, uint32_t pe) {
  for (uint64_t idx = base; bytes != 0; ++idx) {
    const heap::Piece p = heap::first_piece(st.keys, st.heap_bases[st.my_pe], st.heap_bases[pe], loff, roff, bytes, pe);
    WqeStage s;
    mlx5::set_raddr_seg(s.at<mlx5::WqeRaddrSeg>(16), p.raddr, p.rkey);
    mlx5::set_data_seg(s.at<mlx5::WqeDataSeg>(32), uint32_t(p.bytes), p.lkey, p.laddr);
    loff += p.bytes, roff += p.bytes, bytes -= p.bytes;
    publish_wqe(ctx, st.opt, wqe_at(qp, idx), s, idx, op, 0, qp.qpn, bytes == 0 ? mlx5::kCtrlCqUpdate : 0, 3);
  }
}

template <class C>
DOORBELL_HD OpResult rma_nbi(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff, uint64_t bytes,
                             uint32_t pe, QpSelector sel) {
  if (bytes == 0) return OpResult::kOk;
  const DevQp& qp = select_qp(ctx, st, pe, sel);
  const uint32_t n = count_pieces(st, loff, roff, bytes, pe);
  uint64_t base;
  if (OpResult r = reserve(ctx, st, qp, n, &base); r != OpResult::kOk) return r;
  write_rma_wqes(ctx, st, qp, op, base, loff, roff, bytes, pe);
  if (op == mlx5::WqeOpcode::kRdmaRead) ctx.atomic_max(exec::gpu_scope, &qp.mv->get_head, base + n);
  return submit(ctx, st, qp, base, n);
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

// Wait for everything this PE has submitted on every QP.
template <class C>
DOORBELL_HD OpResult quiet_all(C& ctx, const DevState& st) {
  for (uint32_t i = 0; i < st.npes * st.num_rc_per_pe; ++i)
    if (OpResult r = quiet(ctx, st, st.qps[i]); r != OpResult::kOk) return r;
  return OpResult::kOk;
}

template <class C>
DOORBELL_HD OpResult put(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = put_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));
}
template <class C>
DOORBELL_HD OpResult get(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  QpSelector sel{QpSelector::kByWarp, 0};
  if (OpResult r = get_nbi(ctx, st, dest, src, bytes, pe, sel); r != OpResult::kOk) return r;
  return quiet(ctx, st, select_qp(ctx, st, pe, sel));  // quiet issues the CST when one is needed
}

// Warp-collective put: every lane calls with the same arguments; lane i writes pieces
// i, i+32, ...; one reservation and one submission for the warp.
template <class C>
DOORBELL_HD OpResult put_nbi_warp(C& ctx, const DevState& st, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t pe) {
  const DevQp& qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  const uint32_t n = count_pieces(st, src, dest, bytes, pe);
  uint64_t base = 0;
  OpResult r = OpResult::kOk;
  if (ctx.lane() == 0) r = reserve(ctx, st, qp, n, &base);
  base = ctx.shfl(base, 0);
  if (OpResult(ctx.shfl(uint64_t(r), 0)) != OpResult::kOk) return OpResult(ctx.shfl(uint64_t(r), 0));
  // Walk the pieces; each lane writes its own.
  uint64_t loff = src, roff = dest, left = bytes;
  for (uint64_t i = 0; left != 0; ++i) {
    const heap::Piece p = heap::first_piece(st.keys, st.heap_bases[st.my_pe], st.heap_bases[pe], loff, roff, left, pe);
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

// One atomic WQE (CS or FA) on pe's 8-byte word at `off`, result into local `result_addr`.
template <class C>
DOORBELL_HD void write_atomic_wqe(C& ctx, const DevState& st, const DevQp& qp, uint64_t idx, mlx5::WqeOpcode op, uint64_t off,
                                  uint32_t pe, uint64_t swap_add, uint64_t compare, uint64_t result_addr) {
  const heap::KeyEntry& rk = heap::rkey_entry(st.keys, uint32_t(off >> st.keys.log2_granularity), pe);
  WqeStage s;
  mlx5::set_raddr_seg(s.at<mlx5::WqeRaddrSeg>(16), st.heap_bases[pe] + off, rk.key);
  mlx5::set_atomic_seg(s.at<mlx5::WqeAtomicSeg>(32), swap_add, compare);
  mlx5::set_data_seg(s.at<mlx5::WqeDataSeg>(48), 8, qp.ibuf_lkey, result_addr);
  publish_wqe(ctx, st.opt, wqe_at(qp, idx), s, idx, op, 0, qp.qpn, mlx5::kCtrlCqUpdate, 4);
}

// Fetching atomic: reserve an ibuf slot, post, wait for the CQE, read, release the slot.
template <class C>
DOORBELL_HD OpResult fetch_atomic(C& ctx, const DevState& st, mlx5::WqeOpcode op, uint64_t off, uint32_t pe, uint64_t swap_add,
                                  uint64_t compare, uint64_t* result) {
  using namespace exec;
  const DevQp& qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  const uint64_t slot = ctx.atomic_add(gpu_scope, &qp.mv->ibuf_head, 1);
  if (wait_until(ctx, "fetch_atomic: ibuf slot free", &qp.mv->ibuf_tail,
                 [&](uint64_t t) { return slot - t < qp.ibuf_nslots; }) != WaitResult::kOk)
    return OpResult::kTimeout;
  const auto* res = reinterpret_cast<uint64_t*>(qp.ibuf + (1 + (slot & (qp.ibuf_nslots - 1))) * kIbufSlotBytes);
  uint64_t base;
  OpResult r = reserve(ctx, st, qp, 1, &base);
  if (r == OpResult::kOk) {
    write_atomic_wqe(ctx, st, qp, base, op, off, pe, swap_add, compare, reinterpret_cast<uint64_t>(res));
    r = submit(ctx, st, qp, base, 1);
  }
  if (r == OpResult::kOk) r = poll_cq(ctx, st, qp, base + 1);
  if (r == OpResult::kOk) *result = ctx.load(system_scope, acquire, res);
  // Release in order: a later slot may not be reused before this one.
  if (wait_until(ctx, "fetch_atomic: release in order", &qp.mv->ibuf_tail, [slot](uint64_t t) { return t == slot; }) !=
      WaitResult::kOk)
    return OpResult::kTimeout;
  ctx.store(gpu_scope, release, &qp.mv->ibuf_tail, slot + 1);
  return r;
}

template <class C>
DOORBELL_HD OpResult atomic_fetch_add(C& ctx, const DevState& st, uint64_t off, uint64_t v, uint32_t pe, uint64_t* old) {
  return fetch_atomic(ctx, st, mlx5::WqeOpcode::kAtomicFa, off, pe, v, 0, old);
}
template <class C>
DOORBELL_HD OpResult atomic_compare_swap(C& ctx, const DevState& st, uint64_t off, uint64_t cmp, uint64_t v, uint32_t pe,
                                         uint64_t* old) {
  return fetch_atomic(ctx, st, mlx5::WqeOpcode::kAtomicCs, off, pe, v, cmp, old);
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
  const DevQp& qp = select_qp(ctx, st, pe, QpSelector{QpSelector::kByWarp, 0});
  uint64_t base;
  if (OpResult r = reserve(ctx, st, qp, 1, &base); r != OpResult::kOk) return r;
  write_atomic_wqe(ctx, st, qp, base, mlx5::WqeOpcode::kAtomicFa, off, pe, v, 0, reinterpret_cast<uint64_t>(qp.ibuf));
  return submit(ctx, st, qp, base, 1);
}

}  // namespace doorbell::ibgda
