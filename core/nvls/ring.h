// The ring AllReduce NVLS is measured against (NCCL's ring, SIMPLE protocol), on the same
// contexts: per channel, each rank sends to the next through a FIFO of NCCL_STEPS slots in the
// next rank's memory (written across NVLink) and receives from the previous one. As NCCL's
// runRing: the channel's part goes in loops of nranks chunks of at most ALLREDUCE_CHUNKSTEPS
// steps; each loop is 2n - 1 primitives (send, recvReduceSend, recvReduceCopySend,
// recvCopySend, recv), each on one chunk in SlicePerChunk slices of StepPerSlice steps. Every
// slice takes its steps whether or not it carries data (a short chunk's second slice is
// empty), so both ends of a connection count the same steps. A sender waits while head +
// NCCL_STEPS < step + StepPerSlice, a receiver while tail < step + StepPerSlice; the producer
// fences (acq_rel, system) before its relaxed step store.
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/nvls/collective.h"

namespace doorbell::nvls {

inline constexpr uint32_t kRingStepsPerSlice = 2;   // ALLREDUCE_SLICESTEPS
inline constexpr uint32_t kRingSlicesPerChunk = 2;  // ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS

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
  const uint64_t slot = a.region.slot_bytes, per = step_of(a) / es;  // elements a step carries
  const uint64_t lo = a.count * c / a.channels, len = a.count * (c + 1) / a.channels - lo;
  const uint64_t slice_max = per * kRingStepsPerSlice, chunk_max = slice_max * kRingSlicesPerChunk;
  // Steps run on from call to call (always a whole number of slices); every thread reads where
  // this call starts.
  uint64_t sent = ctx.load(gpu_scope, relaxed, k.counts), got = ctx.load(gpu_scope, relaxed, k.counts + 1);
  bool ok = true;
  const bool data = a.input != nullptr && k.send_fifo != nullptr;  // else sizes only
  enum Prim : uint8_t { kSend, kRecvReduceSend, kRecvReduceCopySend, kRecvCopySend, kRecv };
  // One primitive on elements [b, b + ne) of the channel's part.
  auto prim = [&](Prim p, uint64_t b, uint64_t ne) {
    const bool recv = p != kSend, send = p != kRecv, reduce = p == kRecvReduceSend || p == kRecvReduceCopySend,
               out = p == kRecvReduceCopySend || p == kRecvCopySend || p == kRecv;
    // Two halves of the chunk, each at most a slice (NCCL: divUp(nelem, SlicePerChunk)).
    const uint64_t half = (ne + kRingSlicesPerChunk - 1) / kRingSlicesPerChunk;
    for (uint32_t sl = 0; sl < kRingSlicesPerChunk; ++sl) {
      const uint64_t off = half * sl < ne ? half * sl : ne, cnt = ne - off < half ? ne - off : half;
      if (tid == 0 && ok && recv && !a.plants.receiver_ignores_tail)
        ok = wait_until(ctx, system_scope, "ring recv: data landed (tail >= step + StepPerSlice)", k.recv_tail,
                        [t = got](uint64_t tail) { return tail >= t + kRingStepsPerSlice; }) == WaitResult::kOk;
      if (tid == 0 && ok && send && !a.plants.sender_ignores_head)
        ok = wait_until(ctx, system_scope, "ring send: slots free (step + StepPerSlice <= head + NCCL_STEPS)", k.send_head,
                        [t = sent](uint64_t head) { return t + kRingStepsPerSlice <= head + kSteps; }) == WaitResult::kOk;
      ctx.sync_cta();
      // The slice's elements, a slice's steps in a row of the FIFO (sent and got stay even, so
      // they never wrap).
      uint8_t* to = data && send ? k.send_fifo + (sent % kSteps) * slot : nullptr;
      const uint8_t* from = data && recv ? k.recv_fifo + (got % kSteps) * slot : nullptr;
      const uint64_t x = lo + b + off;  // the slice's first element
      if (data && p == kSend) {
        move_slot(ctx, to, a.input + x * es, cnt * es, tid, nthreads, a.warp_hunks);
      } else if (data) {
        for (uint64_t e = tid; e < cnt; e += nthreads) {
          uint8_t v[8];
          ctx.read_bytes(v, from + e * es, es);
          if (reduce) {
            uint8_t m[8];
            memcpy(m, a.input + (x + e) * es, es);
            reduce_into(a.dtype, a.op, m, v, es);
            memcpy(v, m, es);
          }
          if (out) memcpy(a.output + (x + e) * es, v, es);
          if (send) ctx.write_bytes(to + e * es, v, es);
        }
      }
      ctx.sync_cta();
      if (tid == 0) {
        if (send) {
          link.send_time(ctx, cnt * es);
          ctx.fence(system_scope);
          ctx.store(system_scope, relaxed, k.send_tail, sent + kRingStepsPerSlice);
        }
        if (recv) {
          ctx.fence(system_scope);
          ctx.store(system_scope, relaxed, k.recv_head, got + kRingStepsPerSlice);
        }
      }
      if (send) sent += kRingStepsPerSlice;
      if (recv) got += kRingStepsPerSlice;
    }
  };
  const uint32_t r = a.rank;
  for (uint64_t done = 0; done < len;) {
    // This loop's chunk: nranks of them cover what is left, none above ALLREDUCE_CHUNKSTEPS.
    const uint64_t left = len - done, chunk = (left + n - 1) / n < chunk_max ? (left + n - 1) / n : chunk_max;
    auto run = [&](Prim p, uint32_t i) {
      const uint64_t b = done + chunk * i;
      prim(p, b, b < len ? (len - b < chunk ? len - b : chunk) : 0);
    };
    run(kSend, (r + n - 1) % n);
    for (uint32_t j = 2; j < n; ++j) run(kRecvReduceSend, (r + n - j) % n);
    run(kRecvReduceCopySend, r);
    for (uint32_t j = 1; j + 1 < n; ++j) run(kRecvCopySend, (r + n - j) % n);
    run(kRecv, (r + 1) % n);
    done += chunk * n < left ? chunk * n : left;
  }
  ctx.sync_cta();  // every thread has read the counts
  if (tid == 0) {
    ctx.store(gpu_scope, relaxed, k.counts, sent);
    ctx.store(gpu_scope, relaxed, k.counts + 1, got);
  }
  return ok;
}

}  // namespace doorbell::nvls
