// The IBGDA operations on one given QP (SPEC §1, §4): RMA split at heap-chunk boundaries,
// one RDMA WQE per piece, only the last one asking for a CQE; atomic WQEs whose result
// lands in the QP's ibuf. ops.h picks the QP (and failover.h, when a QP fails, another).
#pragma once

#include <cstdint>

#include "core/ibgda/queue.h"

namespace doorbell::ibgda {

// How many pieces [loff, +bytes) -> [roff, +bytes) on pe splits into at chunk ends (the
// same on every NIC: NIC 0's table answers).
DOORBELL_HD uint32_t count_pieces(const DevState& st, uint64_t loff, uint64_t roff, uint64_t bytes, uint32_t pe) {
  uint32_t n = 0;
  while (bytes != 0) {
    const heap::Piece p = heap::first_piece(st.keys, heap_base(st, st.my_pe), heap_base(st, pe), loff, roff, bytes, pe, 0);
    loff += p.bytes, roff += p.bytes, bytes -= p.bytes, ++n;
  }
  return n;
}

// How many bytes of [loff, +bytes) -> [roff, +bytes) the first `cap` pieces cover.
DOORBELL_HD uint64_t bytes_in_pieces(const DevState& st, uint64_t loff, uint64_t roff, uint64_t bytes, uint32_t pe, uint32_t cap) {
  uint64_t done = 0;
  for (uint32_t n = 0; n < cap && done < bytes; ++n)
    done += heap::first_piece(st.keys, heap_base(st, st.my_pe), heap_base(st, pe), loff + done, roff + done, bytes - done, pe, 0).bytes;
  return done;
}
// The most WQEs one transfer reserves at once: half a ring. A transfer of more pieces goes out
// as several (one reservation larger than the ring would wait for room forever).
DOORBELL_HD uint32_t max_transfer_wqes(const DevQp& qp) { return qp.nwqes / 2 > 0 ? qp.nwqes / 2 : 1; }

// The first piece of [loff, +bytes) -> [roff, +bytes) on pe, with `qp`'s NIC's keys.
DOORBELL_HD_HOT heap::Piece qp_piece(const DevState& st, const DevQp& qp, uint64_t loff, uint64_t roff, uint64_t bytes, uint32_t pe) {
  return heap::first_piece(st.keys, heap_base(st, st.my_pe), heap_base(st, pe), loff, roff, bytes, pe, key_dev(st, qp));
}

// A DCI's WQE to `pe` carries that PE's DCT as a half address vector right after the control
// segment (docs/nvshmem-device-ops.md 7); an RC WQE none. Returns the DS it took: every
// segment after it moves by as many octowords.
DOORBELL_HD const DcTarget& dc_target(const DevState& st, const DevQp& qp, uint32_t pe) { return st.dcts[pe * st.num_devices + qp.dev]; }
DOORBELL_HD_HOT uint32_t stage_av(const DevState& st, const DevQp& qp, uint32_t pe, WqeStage& s) {
  if (!qp.dci) return 0;
  const DcTarget& t = dc_target(st, qp, pe);
  mlx5::set_half_av_seg(s.at<mlx5::WqeAvSeg>(16), t.key, t.dctn, t.lid);
  return 1;
}

// One RDMA WRITE / READ WQE for piece `p` at `idx`, its segments built in registers: an RC
// WQE has the remote address and data segments, a DCI's the PE's half address vector first.
// (`laddr_shift`: a planted misplacement, 0 otherwise.) Aligned, so that CudaCtx's copy
// folds its alignment test and the words stay in registers.
template <class C>
DOORBELL_HD_HOT void write_rma_wqe(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t idx, const heap::Piece& p,
                                   uint32_t pe, uint8_t fm_ce_se, uint64_t laddr_shift = 0) {
  const mlx5::SegWords raddr = mlx5::raddr_words(p.raddr, p.rkey), data = mlx5::data_words(uint32_t(p.bytes), p.lkey, p.laddr + laddr_shift);
  if (qp.dci) {
    const DcTarget& t = dc_target(st, qp, pe);
    alignas(16) const mlx5::SegWords segs[3] = {mlx5::half_av_words(t.key, t.dctn, t.lid), raddr, data};
    publish_wqe(ctx, st.opt, wqe_at(qp, idx), segs, idx, op, 0, qp.qpn, fm_ce_se);
  } else {
    alignas(16) const mlx5::SegWords segs[2] = {raddr, data};
    publish_wqe(ctx, st.opt, wqe_at(qp, idx), segs, idx, op, 0, qp.qpn, fm_ce_se);
  }
}

// Write the RDMA WRITE / READ WQEs for a transfer at [base, base + pieces), signalling the
// last unless the caller's batch has a later WQE that will. `first`, if given, is the
// transfer's first piece (qp_piece), already looked up. Each later piece is looked up after
// the WQE before it is written: as a select beside the first, nvcc issued its loads on every
// put, from L2 after reserve's acquire had emptied L1 (lone puts 2-3 % slower).
template <class C>
DOORBELL_HD_HOT void write_rma_wqes(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t base, uint64_t loff,
                                uint64_t roff, uint64_t bytes, uint32_t pe, bool signal_last = true,
                                const heap::Piece* first = nullptr) {
  if (bytes == 0) return;
  heap::Piece p = first != nullptr ? *first : qp_piece(st, qp, loff, roff, bytes, pe);
  for (uint64_t idx = base;; ++idx) {
    loff += p.bytes, roff += p.bytes, bytes -= p.bytes;
    write_rma_wqe(ctx, st, qp, op, idx, p, pe, bytes == 0 && signal_last ? mlx5::kCtrlCqUpdate : 0);
    if (bytes == 0) return;
    p = qp_piece(st, qp, loff, roff, bytes, pe);
  }
}

// Reserve, write and submit the n pieces of a transfer on `qp` at *base.
template <class C>
DOORBELL_HD_HOT OpResult post_pieces(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff,
                                 uint64_t bytes, uint32_t pe, uint32_t n, uint64_t* base, const heap::Piece* first = nullptr) {
  if (OpResult r = reserve(ctx, st, qp, n, base); r != OpResult::kOk) return r;
  const EarlyLock early = lock_early(ctx, st, qp, *base);
  write_rma_wqes(ctx, st, qp, op, *base, loff, roff, bytes, pe, true, first);
  if (op == mlx5::WqeOpcode::kRdmaRead) ctx.atomic_max(exec::gpu_scope, &qp.mv->get_head, *base + n);
  return submit(ctx, st, qp, *base, n, early);
}

// post_rma for a transfer of any number of pieces, `head` its first.
template <class C>
DOORBELL_HD_RARE OpResult post_rma_pieces(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff,
                                          uint64_t bytes, uint32_t pe, uint64_t* base, uint32_t* n, const heap::Piece& head) {
  const uint32_t cap = max_transfer_wqes(qp);
  uint64_t first = ~0ull;
  // [*base, *base + *n) from the first part on, for what may have been posted.
  auto span = [&](OpResult r, uint32_t last) {
    *n = last;
    if (first != ~0ull && (r == OpResult::kOk || r == OpResult::kMaybePosted)) *n = uint32_t(*base + *n - first), *base = first;
    return r;
  };
  // A part ends at a piece boundary, so the rest keeps the other pieces: no recount. Each
  // part's first piece is looked up here, so that the last post_pieces always gets one (a
  // select between `head` and none put a lookup's loads on every put, as write_rma_wqes says).
  heap::Piece part_head = head;
  for (*n = head.bytes == bytes && bytes != 0 ? 1 : count_pieces(st, loff, roff, bytes, pe); *n > cap; *n -= cap) {
    const uint64_t part = bytes_in_pieces(st, loff, roff, bytes, pe, cap);
    if (OpResult r = post_pieces(ctx, st, qp, op, loff, roff, part, pe, cap, base, &part_head); r != OpResult::kOk) return span(r, cap);
    if (first == ~0ull) first = *base;
    loff += part, roff += part, bytes -= part;
    part_head = qp_piece(st, qp, loff, roff, bytes, pe);
  }
  return span(post_pieces(ctx, st, qp, op, loff, roff, bytes, pe, *n, base, &part_head), *n);
}

// Reserve, write and submit a transfer on `qp`; its WQEs lie in [*base, *base + *n). One of
// more than max_transfer_wqes pieces goes out in parts, and the span then also holds other
// threads' WQEs between them: polling to its end covers every part. A part that fails may
// leave earlier ones posted: failover logs such a transfer as partial and issues it whole
// again once its QP is drained (failover.h).
template <class C>
DOORBELL_HD_HOT OpResult post_rma(C& ctx, const DevState& st, const DevQp& qp, mlx5::WqeOpcode op, uint64_t loff, uint64_t roff,
                              uint64_t bytes, uint32_t pe, uint64_t* base, uint32_t* n) {
  // A transfer within one heap chunk at both ends (the usual case) is one piece, counted and
  // written from one key lookup.
  const heap::Piece head = qp_piece(st, qp, loff, roff, bytes, pe);
#ifndef __CUDA_ARCH__
  // The host posts a one-piece transfer by itself, the general case out of line in host
  // builds (DOORBELL_HD_RARE: fewer instructions a put). The device keeps one path: shaped
  // so, its thread-scope puts ran slower on one QP and on 128 own QPs (gpu/run-post-bench
  // rows 1 and 3).
  if (head.bytes == bytes && bytes != 0) return *n = 1, post_pieces(ctx, st, qp, op, loff, roff, bytes, pe, 1, base, &head);
#endif
  return post_rma_pieces(ctx, st, qp, op, loff, roff, bytes, pe, base, n, head);
}

// An atomic as its WQE carries it, as NVSHMEM 3.4.5 encodes each operation
// (docs/nvshmem-device-ops.md §1): 8-byte fetch-add and compare-swap are ATOMIC_FA / CS;
// everything else, and every 4-byte operation, is an extended (masked) atomic. A masked FA's
// `compare` is its field boundary (all ones: no carries, an XOR); a masked CS replaces the
// bits of swap_mask with swap's where (word ^ compare) & compare_mask is zero.
struct Amo {
  mlx5::WqeOpcode op = mlx5::WqeOpcode::kAtomicFa;
  uint32_t bytes = 8;  // operand size: 4 or 8
  uint64_t swap_add = 0, compare = 0, swap_mask = 0, compare_mask = 0;
  // An 8-byte masked CS has two atomic segments: two WQEBBs (then a NOP carries the CQE).
  DOORBELL_HD uint32_t wqebbs() const { return op == mlx5::WqeOpcode::kAtomicMaskedCs && bytes == 8 ? 2 : 1; }
  DOORBELL_HD uint64_t ones() const { return bytes == 8 ? ~uint64_t{0} : 0xffff'ffffull; }
};
DOORBELL_HD Amo amo_add(uint64_t v, uint32_t bytes) {  // fetch-add: 8 bytes ATOMIC_FA
  return bytes == 8 ? Amo{mlx5::WqeOpcode::kAtomicFa, 8, v} : Amo{mlx5::WqeOpcode::kAtomicMaskedFa, 4, v};
}
DOORBELL_HD Amo amo_xor(uint64_t v, uint32_t bytes) {
  Amo a{mlx5::WqeOpcode::kAtomicMaskedFa, bytes, v};
  a.compare = a.ones();
  return a;
}
DOORBELL_HD Amo amo_masked_cs(uint64_t swap, uint64_t swap_mask, uint32_t bytes) {  // swap, set, and, or
  return Amo{mlx5::WqeOpcode::kAtomicMaskedCs, bytes, swap, 0, swap_mask, 0};
}
DOORBELL_HD Amo amo_swap(uint64_t v, uint32_t bytes) { return amo_masked_cs(v, bytes == 8 ? ~uint64_t{0} : 0xffff'ffffull, bytes); }
DOORBELL_HD Amo amo_and(uint64_t v, uint32_t bytes) { return amo_masked_cs(v, ~v & (bytes == 8 ? ~uint64_t{0} : 0xffff'ffffull), bytes); }
DOORBELL_HD Amo amo_or(uint64_t v, uint32_t bytes) { return amo_masked_cs(v, v, bytes); }
DOORBELL_HD Amo amo_compare_swap(uint64_t cmp, uint64_t v, uint32_t bytes) {
  if (bytes == 8) return Amo{mlx5::WqeOpcode::kAtomicCs, 8, v, cmp};
  return Amo{mlx5::WqeOpcode::kAtomicMaskedCs, 4, v, cmp, 0xffff'ffffull, 0xffff'ffffull};
}

// The WQEBBs an atomic takes on its QP: its own, and the WQE that carries the CQE after it
// when it may not: a NOP after a two-WQEBB one (poll_cq reads a CQE's wqe_counter as the end
// of a one-WQEBB WQE), or, with `cst`, a CST. On a DCI the address vector makes every atomic
// two WQEBBs, as NVSHMEM reserves them.
DOORBELL_HD uint32_t amo_wqebbs(const Amo& a, bool dci = false, bool cst = false) {
  const uint32_t own = a.wqebbs() == 2 || dci ? 2 : 1;
  return own == 1 && !cst ? 1 : own + 1;
}

// The rkey of pe's heap word at `off`, for qp's NIC (its chunk: the offset over the chunk size).
DOORBELL_HD const heap::KeyEntry& rkey_at(const DevState& st, const DevQp& qp, uint64_t off, uint32_t pe) {
  const uint64_t at = planted(st.opt.plant.chunk_of_address) ? heap_base(st, pe) + off : off;
  return heap::rkey_entry(st.keys, uint32_t(at >> st.keys.log2_granularity), pe, key_dev(st, qp));
}

// The atomic WQE(s) at `idx` on pe's word at `off`, result into local `result_addr`: the
// atomic, then (two WQEBBs) a NOP with the CQE request, or with `cst` (a fetch on a GPU
// without write ordering) a CST, as NVSHMEM posts them. Segments: [AV,] raddr, the atomic
// segment(s), the data segment; past 64 bytes they go on in the second WQEBB.
template <class C>
DOORBELL_HD void write_atomic_wqe(C& ctx, const DevState& st, const DevQp& qp, uint64_t idx, const Amo& a, uint64_t off, uint32_t pe,
                                  uint64_t result_addr, bool cst = false) {
  const heap::KeyEntry& rk = rkey_at(st, qp, off, pe);
  const bool masked = a.op == mlx5::WqeOpcode::kAtomicMaskedCs || a.op == mlx5::WqeOpcode::kAtomicMaskedFa;
  const uint8_t opmod = masked ? mlx5::ext_atomic_opmod(a.bytes) : 0;
  const uint64_t swap_mask = planted(st.opt.plant.amo_mask_inverted) ? ~a.swap_mask & a.ones() : a.swap_mask;
  WqeStage s, s1;
  auto at = [&](uint32_t o) -> uint8_t* { return o < mlx5::kWqebb ? s.b + o : s1.b + (o - mlx5::kWqebb); };
  uint32_t o = 16 + 16 * stage_av(st, qp, pe, s);
  mlx5::set_raddr_seg(reinterpret_cast<mlx5::WqeRaddrSeg*>(at(o)), heap_base(st, pe) + off, rk.key), o += 16;
  if (a.bytes == 4) {
    const bool cs = a.op == mlx5::WqeOpcode::kAtomicMaskedCs;
    mlx5::set_seg(at(o), mlx5::masked32_words(uint32_t(a.swap_add), uint32_t(a.compare), cs ? uint32_t(swap_mask) : 0,
                                              cs ? uint32_t(a.compare_mask) : 0)), o += 16;
  } else {
    mlx5::set_atomic_seg(reinterpret_cast<mlx5::WqeAtomicSeg*>(at(o)), a.swap_add, a.compare), o += 16;
    if (a.wqebbs() == 2) mlx5::set_atomic_seg(reinterpret_cast<mlx5::WqeAtomicSeg*>(at(o)), swap_mask, a.compare_mask), o += 16;
  }
  mlx5::set_data_seg(reinterpret_cast<mlx5::WqeDataSeg*>(at(o)), a.bytes, qp.ibuf_lkey, result_addr), o += 16;
  const auto ds = uint8_t(o / 16);
  if (ds <= 4 && !cst) return publish_wqe(ctx, st.opt, wqe_at(qp, idx), s, idx, a.op, opmod, qp.qpn, mlx5::kCtrlCqUpdate, ds);
  if (ds <= 4) publish_wqe(ctx, st.opt, wqe_at(qp, idx), s, idx, a.op, opmod, qp.qpn, 0, ds);
  else publish_wqe2(ctx, st.opt, wqe_at(qp, idx), s, wqe_at(qp, idx + 1), s1, idx, a.op, opmod, qp.qpn, 0, ds);
  const uint64_t tail = idx + (ds <= 4 ? 1 : 2);
  if (cst) return write_cst(ctx, st, qp, tail);
  WqeStage nop;
  publish_wqe(ctx, st.opt, wqe_at(qp, tail), nop, tail, mlx5::WqeOpcode::kNop, 0, qp.qpn, mlx5::kCtrlCqUpdate, 2);
}

// put-with-signal in one reservation on `qp`, as NVSHMEM 3.4.5 posts it when a warp can
// write every piece (docs/nvshmem-device-ops.md §4): the n pieces' WRITEs asking for no CQE,
// then the signal's atomic at `sig` (and, after a two-WQEBB one, its NOP), one submission;
// RC runs them in order, so the signal lands after the data. `lanes` threads of one warp call
// it together (1: a thread alone); lane k writes piece k, lane n the atomic. Planted
// (signal_first): the atomic first, the pieces after it, the last asking for the CQE.
template <class C>
DOORBELL_HD OpResult put_signal_on(C& ctx, const DevState& st, const DevQp& qp, uint64_t dest, uint64_t src, uint64_t bytes, uint32_t n,
                                   uint64_t sig, const Amo& a, uint32_t pe, uint32_t lanes) {
  const bool first = planted(st.opt.plant.signal_first);
  const uint32_t lane = lanes == 1 ? 0 : ctx.lane(), amo_n = amo_wqebbs(a, qp.dci), total = n + amo_n;
  uint64_t base = 0;
  OpResult r = OpResult::kOk;
  if (lane == 0) r = reserve(ctx, st, qp, total, &base);
  if (lanes > 1) base = ctx.shfl(base, 0), r = OpResult(ctx.shfl(uint64_t(r), 0));
  if (r != OpResult::kOk) return r;
  const uint64_t data = first ? base + amo_n : base;
  for (uint32_t i = 0; i < n; ++i) {
    const heap::Piece p = qp_piece(st, qp, src, dest, bytes, pe);
    if (i % lanes == lane) write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, data + i, src, dest, p.bytes, pe, first && i == n - 1, &p);
    src += p.bytes, dest += p.bytes, bytes -= p.bytes;
  }
  if (n % lanes == lane) write_atomic_wqe(ctx, st, qp, first ? base : base + n, a, sig, pe, reinterpret_cast<uint64_t>(qp.ibuf));
  if (lanes > 1) ctx.syncwarp();
  if (lane == 0) r = submit(ctx, st, qp, base, total);
  return lanes > 1 ? OpResult(ctx.shfl(uint64_t(r), 0)) : r;
}

// What a fetching atomic on one QP left behind: its WQE index (valid once posted) and the
// ibuf slot's value when the call ended (the result, or `kResultUnset` if none landed).
inline constexpr uint64_t kResultUnset = 0xdead'beef'dead'beefull;
struct FetchOutcome {
  uint64_t idx = 0;
  bool posted = false;
  uint64_t value = kResultUnset;
};

// A fetch through the ibuf ring on `qp`: reserve a slot, post the n WQEBBs `write(base,
// slot address)` writes, wait for the CQE, read the slot, release it. The slot is preset to
// kResultUnset, so after an error the caller can tell whether the response landed before
// the QP failed. Fetching atomics and g take it.
template <class C, class Write>
DOORBELL_HD OpResult fetch_on(C& ctx, const DevState& st, const DevQp& qp, uint32_t n, Write write, FetchOutcome* out) {
  using namespace exec;
  const uint64_t slot = ctx.atomic_add(gpu_scope, &qp.mv->ibuf_head, 1);
  if (wait_until(ctx, "fetch_atomic: ibuf slot free", &qp.mv->ibuf_tail,
                 [&](uint64_t t) { return slot - t < qp.ibuf_nslots + (planted(st.opt.plant.ibuf_one_too_many) ? 1 : 0); }) != WaitResult::kOk)
    return OpResult::kTimeout;
  auto* res = reinterpret_cast<uint64_t*>(qp.ibuf + (1 + (slot & (qp.ibuf_nslots - 1))) * kIbufSlotBytes);
  if (qp.hp != nullptr) ctx.store(system_scope, relaxed, res, kResultUnset);
  uint64_t base = 0;
  OpResult r = reserve(ctx, st, qp, n, &base);
  if (r == OpResult::kOk) {
    write(base, reinterpret_cast<uint64_t>(res));
    r = submit(ctx, st, qp, base, n);
    out->idx = base;
    out->posted = r == OpResult::kOk || r == OpResult::kMaybePosted;
  }
  if (r == OpResult::kOk) r = poll_cq(ctx, st, qp, base + n);
  const bool late = planted(st.opt.plant.early_release) || planted(st.opt.plant.result_read_late);
  if (!late && r != OpResult::kTimeout && out->posted) out->value = ctx.load(system_scope, acquire, res);
  // Release in order: a later slot may not be reused before this one. (Planted: a release
  // counted, whoever's slot it frees.)
  if (planted(st.opt.plant.ibuf_release_unowned)) {
    ctx.fence(gpu_scope);
    (void)ctx.atomic_add(gpu_scope, &qp.mv->ibuf_tail, 1);
  } else {
    if (wait_until(ctx, "fetch_atomic: release in order", &qp.mv->ibuf_tail, [slot](uint64_t t) { return t == slot; }) !=
        WaitResult::kOk)
      return OpResult::kTimeout;
    ctx.store(gpu_scope, release, &qp.mv->ibuf_tail, slot + 1);
  }
  if (planted(st.opt.plant.early_release) && r != OpResult::kTimeout && out->posted) out->value = ctx.load(system_scope, acquire, res);
  if (planted(st.opt.plant.result_read_late) && r != OpResult::kTimeout && out->posted) ctx.read_bytes(&out->value, res, sizeof out->value);
  return r;
}

// Fetching atomic on `qp`, its result through an ibuf slot.
template <class C>
DOORBELL_HD OpResult fetch_atomic_on(C& ctx, const DevState& st, const DevQp& qp, const Amo& a, uint64_t off, uint32_t pe,
                                     FetchOutcome* out) {
  const bool cst = !st.opt.may_skip_cst && !planted(st.opt.plant.fetch_without_cst);
  return fetch_on(ctx, st, qp, amo_wqebbs(a, qp.dci, cst), [&](uint64_t base, uint64_t res) { write_atomic_wqe(ctx, st, qp, base, a, off, pe, res, cst); },
                  out);
}

// g on `qp`: an RDMA READ of 1..8 bytes of pe's word at `off` into an ibuf slot (NVSHMEM's g,
// docs/nvshmem-device-ops.md §3: ds 3, CQ_UPDATE; without GPU write ordering a CST after it
// carries the CQE); out->value holds the bytes as memory does (little-endian, the rest of
// the slot's word unspecified).
template <class C>
DOORBELL_HD OpResult g_on(C& ctx, const DevState& st, const DevQp& qp, uint64_t off, uint32_t bytes, uint32_t pe, FetchOutcome* out) {
  const bool cst = !st.opt.may_skip_cst && !planted(st.opt.plant.fetch_without_cst);
  return fetch_on(ctx, st, qp, cst ? 2 : 1, [&](uint64_t base, uint64_t res) {
    const heap::KeyEntry& rk = rkey_at(st, qp, off, pe);
    WqeStage s;
    const uint32_t a = stage_av(st, qp, pe, s);
    mlx5::set_raddr_seg(s.at<mlx5::WqeRaddrSeg>(16 + 16 * a), heap_base(st, pe) + off, rk.key);
    mlx5::set_data_seg(s.at<mlx5::WqeDataSeg>(32 + 16 * a), bytes, qp.ibuf_lkey, res);
    publish_wqe(ctx, st.opt, wqe_at(qp, base), s, base, mlx5::WqeOpcode::kRdmaRead, 0, qp.qpn, cst ? 0 : mlx5::kCtrlCqUpdate, uint8_t(3 + a));
    if (cst) write_cst(ctx, st, qp, base + 1);
  }, out);
}

// p on `qp`: an inline RDMA WRITE of the value's 1..8 bytes to pe's heap at `off` (NVSHMEM's p,
// docs/nvshmem-device-ops.md §3): ds 3, the inline header BE32(bytes | inline flag) at 32,
// the bytes at 36 as memory holds them (no swap), CQ_UPDATE. *idx: its WQEBB.
template <class C>
DOORBELL_HD OpResult p_on(C& ctx, const DevState& st, const DevQp& qp, uint64_t off, uint64_t value, uint32_t bytes, uint32_t pe,
                          uint64_t* idx) {
  if (planted(st.opt.plant.peer_unwrapped) && pe == 0 && st.my_pe + 1 == st.npes) pe = st.npes;  // "the next PE", unwrapped
  if (OpResult r = reserve(ctx, st, qp, 1, idx); r != OpResult::kOk) return r;
  const heap::KeyEntry& rk = rkey_at(st, qp, off, pe);
  WqeStage s;
  const uint32_t a = stage_av(st, qp, pe, s), o = 16 * a;
  mlx5::set_raddr_seg(s.at<mlx5::WqeRaddrSeg>(16 + o), heap_base(st, pe) + off, rk.key);
  s.at<mlx5::WqeInlineSeg>(32 + o)->byte_count.set((planted(st.opt.plant.p_short) ? bytes - 1 : bytes) | mlx5::kInlineSegFlag);
  for (uint32_t i = 0; i < bytes; ++i) s.b[36 + o + i] = uint8_t(value >> (8 * i));
  publish_wqe(ctx, st.opt, wqe_at(qp, *idx), s, *idx, mlx5::WqeOpcode::kRdmaWrite, 0, qp.qpn, mlx5::kCtrlCqUpdate, uint8_t(3 + a));
  return submit(ctx, st, qp, *idx, 1);
}

// Non-fetching atomic on `qp`: its result lands in ibuf slot 0 and nobody waits for it.
// *idx: its first WQEBB; *n: how many it took.
template <class C>
DOORBELL_HD OpResult amo_on(C& ctx, const DevState& st, const DevQp& qp, const Amo& a, uint64_t off, uint32_t pe, uint64_t* idx,
                            uint32_t* n) {
  *n = amo_wqebbs(a, qp.dci);
  if (OpResult r = reserve(ctx, st, qp, *n, idx); r != OpResult::kOk) return r;
  write_atomic_wqe(ctx, st, qp, *idx, a, off, pe, reinterpret_cast<uint64_t>(qp.ibuf));
  return submit(ctx, st, qp, *idx, *n);
}

}  // namespace doorbell::ibgda
