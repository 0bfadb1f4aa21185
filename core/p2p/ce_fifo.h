// The copy-engine P2P transport (SPEC §8, seed 004), one source for the CPU model and CUDA:
// a connection's FIFO of NCCL_STEPS slots of step_bytes each, the GPU kernel's sides (the
// sender stages a step in its own buffer and posts its size and the tail; the receiver waits
// for the proxy's tail, consumes the slot and returns it through head) and the send proxy's
// progress, which copies staged steps into the receiver's FIFO with cudaMemcpyAsync on its
// stream and publishes the tail once the step's event completed.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::p2p {

inline constexpr uint32_t kSteps = 8;        // NCCL_STEPS
inline constexpr uint64_t kSlotFree = ~0ull;  // connFifo[slot].size of an empty slot (-1)

// Host memory mapped for both GPUs and the proxies (NCCL's p2pShm).
struct ConnShm {
  uint64_t staged = 0;      // ceRecvMem.tail: steps the sender kernel staged (the proxy's recvTail)
  uint64_t tail = 0;        // recvMem.tail: steps whose copy landed in the receiver's FIFO
  uint64_t head = 0;        // sendMem.head: steps the receiver consumed (the sender's sendHead)
  uint64_t size[kSteps] = {kSlotFree, kSlotFree, kSlotFree, kSlotFree, kSlotFree, kSlotFree, kSlotFree, kSlotFree};
};

struct Conn {
  ConnShm* shm = nullptr;
  uint8_t* send_buf = nullptr;   // ceDevBuff, on the sender GPU: kSteps * step_bytes
  uint8_t* recv_fifo = nullptr;  // on the receiver GPU (opened through IPC): kSteps * step_bytes
  uint64_t step_bytes = 0;       // SIMPLE buffer / NCCL_STEPS (4 MiB / 8 = 512 KiB in NCCL)
  // Registered buffers (direct): the proxy copies step s of the sub from src_direct + s *
  // step_bytes straight to dst_direct + s * step_bytes; the kernel only moves the counters.
  const uint8_t* src_direct = nullptr;
  uint8_t* dst_direct = nullptr;
  bool direct = false;           // registered buffers (src/dst_direct; null pointers: sizes only)
  uint64_t direct_bytes = 0;     // the operation's bytes: a direct copy stays inside them
};

// Planted bugs, for tests only.
struct Plants {
  bool sender_ignores_head = false;      // stage a step without waiting for its slot to be free
  bool tail_before_copy_done = false;    // publish the tail without the slot's event completed
  bool reads_after_head = false;         // the receiver hands the slot back, then copies it out
  bool head_relaxed = false;             // the receiver hands the slot back with a relaxed store
  bool tail_on_previous_event = false;   // the proxy publishes a step's tail on the step before's event
  bool size_not_freed = false;           // the receiver hands a slot back without freeing its size
};

// How a kernel side ended: kBadSlot, the receiver found a slot without a valid size (a step
// it was told had landed, but no sender staged).
enum class CeResult : uint8_t { kOk, kTimeout, kBadSlot };

DOORBELL_HD uint64_t steps_for(uint64_t bytes, uint64_t step_bytes) { return (bytes + step_bytes - 1) / step_bytes; }

// Sender kernel side: stage `bytes` from src (null: phantom) as steps base, base + 1, ...
template <class C>
DOORBELL_HD CeResult ce_send(C& ctx, const Conn& c, uint64_t base, const uint8_t* src, uint64_t bytes, const Plants& pl) {
  using namespace exec;
  const uint64_t n = steps_for(bytes, c.step_bytes);
  for (uint64_t s = 0; s < n; ++s) {
    const uint64_t step = base + s, slot = step % kSteps;
    if (!pl.sender_ignores_head &&
        wait_until(ctx, system_scope, "p2p send: slot free (step < head + NCCL_STEPS)", &c.shm->head,
                   [step](uint64_t head) { return step < head + kSteps; }) != WaitResult::kOk)
      return CeResult::kTimeout;
    const uint64_t size = bytes - s * c.step_bytes < c.step_bytes ? bytes - s * c.step_bytes : c.step_bytes;
    if (src != nullptr) ctx.write_bytes(c.send_buf + slot * c.step_bytes, src + s * c.step_bytes, size);
    ctx.store(system_scope, relaxed, &c.shm->size[slot], size);
    // The proxy (host) copies what it sees staged: data and size before the count.
    ctx.store(system_scope, release, &c.shm->staged, step + 1);
  }
  return CeResult::kOk;
}

// Receiver kernel side: consume steps base, base + 1, ... into dst (null: phantom).
template <class C>
DOORBELL_HD CeResult ce_recv(C& ctx, const Conn& c, uint64_t base, uint8_t* dst, uint64_t bytes, const Plants& pl = {}) {
  using namespace exec;
  const uint64_t n = steps_for(bytes, c.step_bytes);
  for (uint64_t s = 0; s < n; ++s) {
    const uint64_t step = base + s, slot = step % kSteps;
    // Acquire: the copy the proxy saw complete is visible before the slot is read.
    if (wait_until(ctx, system_scope, "p2p recv: tail > step", &c.shm->tail, [step](uint64_t tail) { return tail > step; }) !=
        WaitResult::kOk)
      return CeResult::kTimeout;
    const uint64_t size = ctx.load(system_scope, relaxed, &c.shm->size[slot]);
    if (size > c.step_bytes || size != (bytes - s * c.step_bytes < c.step_bytes ? bytes - s * c.step_bytes : c.step_bytes))
      return CeResult::kBadSlot;
    if (dst != nullptr && !pl.reads_after_head) ctx.read_bytes(dst + s * c.step_bytes, c.recv_fifo + slot * c.step_bytes, size);
    if (!pl.size_not_freed) ctx.store(system_scope, relaxed, &c.shm->size[slot], kSlotFree);
    // Release: the slot's reads are done before the sender may stage into it again.
    if (pl.head_relaxed) ctx.store(system_scope, relaxed, &c.shm->head, step + 1);
    else ctx.store(system_scope, release, &c.shm->head, step + 1);
    if (dst != nullptr && pl.reads_after_head) ctx.read_bytes(dst + s * c.step_bytes, c.recv_fifo + slot * c.step_bytes, size);
  }
  return CeResult::kOk;
}

// One send operation (NCCL's proxy sub-args): steps [base, base + nsteps).
struct ProxySub {
  uint64_t base = 0, nsteps = 0, transmitted = 0, done = 0;
  uint64_t bad_size = 0;  // a staged slot's size beyond the slot: the proxy stops, nothing copied
  bool finished() const { return done == nsteps; }
};

// One round of the send proxy's progress on a sub (SPEC §8): post a copy when a slot is free
// (transmitted < done + NCCL_STEPS) and the kernel staged the step (staged > base +
// transmitted); complete when the oldest copy's event finished, publishing the tail. H is
// the host's CUDA and shared memory: load / store of shared words, memcpy_async on the
// connection's stream, record / query of the slot's event. Returns whether anything moved.
template <class H>
bool send_proxy_progress(H& h, const Conn& c, ProxySub& sub, const Plants& pl) {
  bool did = false;
  if (sub.bad_size != 0) return false;
  if (sub.transmitted < sub.done + kSteps && sub.transmitted < sub.nsteps &&
      h.load(&c.shm->staged) > sub.base + sub.transmitted) {
    const uint64_t slot = (sub.base + sub.transmitted) % kSteps;
    const uint64_t size = h.load(&c.shm->size[slot]);
    // Shared memory the GPU writes is not trusted with a copy's length.
    const uint64_t room = c.direct ? c.direct_bytes - std::min(c.direct_bytes, sub.transmitted * c.step_bytes) : c.step_bytes;
    if (size > room || size == 0) {
      sub.bad_size = size;
      return false;
    }
    if (c.direct) {  // step s of the operation, s counted from the sub's base
      const bool phantom = c.dst_direct == nullptr || c.src_direct == nullptr;
      h.memcpy_async(phantom ? nullptr : c.dst_direct + sub.transmitted * c.step_bytes,
                     phantom ? nullptr : c.src_direct + sub.transmitted * c.step_bytes, size);
    } else {
      const bool phantom = c.recv_fifo == nullptr || c.send_buf == nullptr;  // sizes only
      h.memcpy_async(phantom ? nullptr : c.recv_fifo + slot * c.step_bytes, phantom ? nullptr : c.send_buf + slot * c.step_bytes, size);
    }
    h.record(slot);
    ++sub.transmitted;
    did = true;
  }
  if (sub.done < sub.transmitted) {
    const uint64_t slot = (sub.base + sub.done) % kSteps;
    if (pl.tail_before_copy_done || h.query(pl.tail_on_previous_event ? (slot + kSteps - 1) % kSteps : slot)) {
      ++sub.done;
      h.store(&c.shm->tail, sub.base + sub.done);
      did = true;
    }
  }
  return did;
}

}  // namespace doorbell::p2p
