// The ring AllReduce NVLS is measured against (NCCL's ring, SIMPLE protocol), on the same
// contexts: per channel, each rank sends to the next through a FIFO of NCCL_STEPS slots in the
// next rank's memory (written across NVLink) and receives from the previous one. n - 1
// reduce-scatter steps (receive a chunk, combine it with my input, pass it on), then n - 1
// all-gather steps (pass the finished chunks around). Same flow-control rules as the NVLS
// primitives: a sender waits while head + NCCL_STEPS < step + 1, a receiver while tail < step +
// 1; the producer fences (acq_rel, system) before its relaxed step store.
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/nvls/collective.h"

namespace doorbell::nvls {

// Rank r's ends of its two connections, for one channel.
struct RingConn {
  uint8_t* send_fifo = nullptr;          // the next rank's receive FIFO (null: sizes only)
  uint64_t* send_tail = nullptr;         // the next rank's tail word
  const uint64_t* send_head = nullptr;   // my head word, which the next rank writes
  const uint8_t* recv_fifo = nullptr;    // my receive FIFO
  const uint64_t* recv_tail = nullptr;   // my tail word, which the previous rank writes
  uint64_t* recv_head = nullptr;         // the previous rank's head word
  uint64_t* counts = nullptr;            // mine: steps sent [0] and received [1] by earlier calls
};

// One channel (CTA) of rank a.rank's ring AllReduce. L (the link) charges the simulated time of
// a send: send_time(ctx, bytes) — nothing on a GPU.
template <class C, class L>
DOORBELL_HD bool ring_allreduce_cta(C& ctx, L& link, const Args& a, const RingConn& k, uint32_t c, uint32_t tid, uint32_t nthreads) {
  using namespace exec;
  const uint32_t n = a.nranks, es = dtype_bytes(a.dtype);
  const uint64_t slot = a.region.slot_bytes, per = step_of(a) / es;  // pieces of a step, in slots
  const uint64_t lo = a.count * c / a.channels, len = a.count * (c + 1) / a.channels - lo;
  auto chunk = [&](uint32_t i, uint64_t& b, uint64_t& e) {
    b = lo + len * i / n;
    e = lo + len * (i + 1) / n;
  };
  // Steps run on from call to call; every thread reads where this call starts.
  uint64_t sent = ctx.load(gpu_scope, relaxed, k.counts), got = ctx.load(gpu_scope, relaxed, k.counts + 1);
  bool ok = true;
  // Piece p (a slot's worth) of `src` (elements [b, e) of a chunk; null: sizes only).
  auto send = [&](const uint8_t* src, uint64_t b, uint64_t e, uint64_t p) {
    {
      const uint64_t x = b + p * per;
      const uint64_t bytes = (e - x < per ? e - x : per) * es;
      // Kept for the rule's sake: a rank alternates one piece out and one in, so it never gets
      // NCCL_STEPS ahead of the next (a planted skip of this wait goes unnoticed).
      if (tid == 0 && ok)
        ok = wait_until(ctx, system_scope, "ring send: slot free (step < head + NCCL_STEPS)", k.send_head,
                        [t = sent](uint64_t head) { return t + 1 <= head + kSteps; }) == WaitResult::kOk;
      ctx.sync_cta();
      if (src != nullptr && k.send_fifo != nullptr)
        move_slot(ctx, k.send_fifo + (sent % kSteps) * slot, src + (x - b) * es, bytes, tid, nthreads, a.warp_hunks);
      ctx.sync_cta();
      if (tid == 0) {
        link.send_time(ctx, bytes);
        ctx.fence(system_scope);
        ctx.store(system_scope, relaxed, k.send_tail, sent + 1);
      }
      ++sent;
    }
  };
  // Piece p of elements [b, e): combined into dst with `mine` (reduce-scatter) or copied.
  auto recv = [&](uint8_t* dst, const uint8_t* mine, uint64_t b, uint64_t e, uint64_t p) {
    {
      const uint64_t x = b + p * per;
      const uint64_t bytes = (e - x < per ? e - x : per) * es;
      if (tid == 0 && ok && !a.plants.receiver_ignores_tail)
        ok = wait_until(ctx, system_scope, "ring recv: data landed (tail > step)", k.recv_tail,
                        [t = got](uint64_t tail) { return tail >= t + 1; }) == WaitResult::kOk;
      ctx.sync_cta();
      if (dst != nullptr && k.recv_fifo != nullptr)
        for (uint64_t off = uint64_t(tid) * es; off < bytes; off += uint64_t(nthreads) * es) {
          uint8_t v[8];
          ctx.read_bytes(v, k.recv_fifo + (got % kSteps) * slot + off, es);
          uint8_t* d = dst + (x - b) * es + off;
          if (mine != nullptr) {
            uint8_t m[8];
            memcpy(m, mine + (x - b) * es + off, es);
            reduce_into(a.dtype, a.op, m, v, es);
            memcpy(d, m, es);
          } else {
            memcpy(d, v, es);
          }
        }
      ctx.sync_cta();
      if (tid == 0) {
        ctx.fence(system_scope);
        ctx.store(system_scope, relaxed, k.recv_head, got + 1);
      }
      ++got;
    }
  };
  auto in = [&](uint64_t b) { return a.input == nullptr ? nullptr : a.input + b * es; };
  auto out = [&](uint64_t b) { return a.output == nullptr ? nullptr : a.output + b * es; };
  // One ring step: send chunk s while receiving chunk v, a piece of each in turn (every rank
  // sends first, so a chunk longer than the FIFO must not be sent whole before receiving).
  auto step = [&](uint32_t s, bool s_from_input, uint32_t v, bool reduce) {
    uint64_t sb, se, vb, ve;
    chunk(s, sb, se);
    chunk(v, vb, ve);
    const uint64_t ps = (se - sb + per - 1) / per, pv = (ve - vb + per - 1) / per;
    for (uint64_t p = 0; p < (ps > pv ? ps : pv); ++p) {
      if (p < ps) send(s_from_input ? in(sb) : out(sb), sb, se, p);
      if (p < pv) recv(out(vb), reduce ? in(vb) : nullptr, vb, ve, p);
    }
  };
  const uint32_t r = a.rank;
  for (uint32_t i = 0; i + 1 < n; ++i) step((r + n - i) % n, i == 0, (r + 2 * n - i - 1) % n, true);  // reduce-scatter
  for (uint32_t i = 0; i + 1 < n; ++i) step((r + 1 + n - i) % n, false, (r + n - i) % n, false);      // all-gather
  ctx.sync_cta();  // every thread has read the counts
  if (tid == 0) {
    ctx.store(gpu_scope, relaxed, k.counts, sent);
    ctx.store(gpu_scope, relaxed, k.counts + 1, got);
  }
  return ok;
}

}  // namespace doorbell::nvls
