// Seed 004's kernel-less P2P transport (psm_p2p, "PassSm"): no communication kernel. Per
// connection (a sender GPU, a receiver GPU, a channel) a send proxy copies the user's data
// into the receiver's FIFO slot and a receive proxy copies it from the slot into the user's
// buffer, each with cudaMemcpyAsync on its own non-blocking stream and an event per slot.
// The two coordinate only through a host shared-memory block (p2pShm) that both write:
//   sendMem.head          the send proxy's: steps whose copy into the FIFO completed
//   recvMem.tail          the receive proxy's: steps the sender may fill (its credit)
//   recvMem.connFifo[s]   a slot's size: the sender sets it when the slot is full, the
//                         receiver sets it back to -1 (free) when it emptied the slot
// A call is an Args (ncclProxyArgs) of Subs (ncclProxySubArgs), one per peer per channel;
// each Sub's steps are [base, base + nsteps), base carried across back-to-back calls by the
// connection's step counter on each side. One source for the CPU model and CUDA: the proxies
// reach memory, streams and events only through their host `H`:
//   uint64_t load(const uint64_t*); void store(uint64_t*, uint64_t)   shared words
//   void memcpy_async(const End&, void* dst, const void* src, uint64_t n)   on the end's stream
//   void record(const End&, uint32_t slot); bool query(const End&, uint32_t slot)   a slot's event
//   bool ready()                                                       the call's readyEvent
//
// What the seed leaves open is a Choice, so a scenario can pick the seed's reading.
#pragma once

#include <algorithm>
#include <cstdint>

namespace doorbell::p2p::psm {

inline constexpr uint32_t kMaxWindow = 16;
inline constexpr uint64_t kSlotFree = ~0ull;  // connFifo[slot].size == -1

// The shared control block (p2pShm = ncclSendMem + ncclRecvMem), in host memory both proxies
// map. Where the seed's control block is per rank pair, the channels of a pair share one.
struct Shm {
  uint64_t head = 0;               // sendMem.head
  uint64_t tail = 0;               // recvMem.tail
  uint64_t size[kMaxWindow] = {};  // recvMem.connFifo[slot].size (set to kSlotFree at set-up)
};

// Where the sender's first credit comes from. The seed's set-up zeroes recvMem.tail and asks
// itself how the first `tail > base + transmitted` can hold (its Q2); these are the answers.
enum class FirstCredit : uint8_t {
  kSetUp,          // recvMem.tail = window when the block is made
  kReceiverStart,  // the receive proxy writes tail = base + window when its sub starts
  kNone,           // the seed's code as written: tail stays 0 until the receiver emptied a slot
};

struct Choices {
  uint32_t window = 8;              // FIFO slots: NCCL_STEPS (8), or 16
  uint64_t step_bytes = 512 << 10;  // a step's bytes (SIMPLE buffer / NCCL_STEPS: 512 KiB)
  uint64_t chunk_bytes = 0;         // slot stride when nonzero (2.21: recvFifo + chunkSize * slot); 0: step_bytes
  // 2.21 keeps the bytes posted (totalCopySize) and the copies (copied) in the args, shared
  // by all its subs; false: per sub.
  bool offsets_per_args = false;
  // The seed moves the connection's step counter (resources->step = base + nsteps) when a sub
  // finishes; NCCL's own progress moves it when the sub starts, so a sub that starts while an
  // earlier one on the connection still runs gets the next steps, not the same ones.
  bool step_at_done = false;
  FirstCredit first_credit = FirstCredit::kSetUp;
  bool free_is_zero = false;  // 2.26's set-up memsets connFifo to 0, so 0 (not -1) marks a free slot
  // net.cc's rule, which the seed copies: the receiver takes a slot once its size is not the
  // free mark, and waits while it is; false: a free slot behind head is refused as corrupt.
  bool recv_waits_for_size = false;
  uint64_t slot_stride() const { return chunk_bytes != 0 ? chunk_bytes : step_bytes; }
  uint64_t free_size() const { return free_is_zero ? 0 : kSlotFree; }
};

// Planted bugs, for tests only.
struct Plants {
  bool credit_before_copy_done = false;  // the receive proxy frees a slot before its copy out completed
  bool head_before_copy_done = false;    // the send proxy publishes a step before its copy in completed
  bool sender_ignores_credit = false;    // the send proxy fills a slot without the receiver's credit
};

// One side's end of a connection: the control block, the receiver's FIFO (mapped on both
// sides), this side's step counter (resources->step) and the slots' posted sizes.
struct End {
  Shm* shm = nullptr;
  uint32_t id = 0;           // the host's name for this end's stream and events
  uint8_t* fifo = nullptr;   // window * slot_stride bytes on the receiver's GPU (null: phantom)
  uint64_t step = 0;         // the next call's base
  uint64_t slot_size[kMaxWindow] = {};
};

// One peer on one channel of a call (ncclProxySubArgs).
struct Sub {
  End* end = nullptr;
  uint8_t* user = nullptr;    // send: the user's send buffer, recv: its receive buffer, at this sub's part (null: phantom)
  uint64_t bytes = 0;         // this sub's part of the call
  uint64_t base = 0, nsteps = 0, transmitted = 0, done = 0;
  uint64_t posted_bytes = 0;  // per-sub offset into `user` (offsets_per_args: the args' instead)
  uint64_t step_size = 0;     // the last step's size (subs[].stepSize)
  uint8_t* step_buff = nullptr;
  bool refused = false;       // the receive proxy refused a slot's size (bad_size): it stops
  uint64_t bad_size = 0;
  bool started = false;
  bool finished() const { return started && done == nsteps; }
};

// One call of one direction on one GPU (ncclProxyArgs).
struct Args {
  Sub* subs = nullptr;
  uint32_t nsubs = 0;
  bool ready = false;          // eventReady seen complete
  uint32_t done = 0;           // subs finished (doneCounter)
  uint64_t copied = 0;         // copies posted (seed: int copied)
  uint64_t total_copy_size = 0;  // bytes posted (size_t totalCopySize)
  bool finished() const { return done == nsubs; }
  uint64_t transmitted() const {  // the args' view: steps posted over its subs
    uint64_t n = 0;
    for (uint32_t i = 0; i < nsubs; ++i) n += subs[i].transmitted;
    return n;
  }
};

inline uint64_t steps_for(uint64_t bytes, uint64_t step_bytes) { return bytes == 0 ? 0 : (bytes + step_bytes - 1) / step_bytes; }

namespace detail {
// A sub's first round: base from the side's step counter (so back-to-back calls continue
// the connection's steps); a receiver that gives the first credit gives it now. A sub of no
// bytes is done at once.
template <class H>
void start(H& h, Args& a, Sub& s, bool send, const Choices& c) {
  if (s.started) return;
  s.started = true;
  s.base = s.end->step;
  s.nsteps = steps_for(s.bytes, c.step_bytes);
  if (!c.step_at_done) s.end->step = s.base + s.nsteps;
  if (!send && c.first_credit == FirstCredit::kReceiverStart) h.store(&s.end->shm->tail, s.base + c.window);
  if (s.nsteps == 0) ++a.done;
}
inline uint64_t& posted(Args& a, Sub& s, const Choices& c) { return c.offsets_per_args ? a.total_copy_size : s.posted_bytes; }
// The window has room for the sub's next step (transmitted < done + window) and steps remain.
inline bool window_open(const Sub& s, const Choices& c) { return s.transmitted < s.done + c.window && s.transmitted < s.nsteps; }
// Post the next step's copy between the user's buffer (at offset `off`) and its slot, in the
// direction of the proxy (`into_fifo`: the sender's), and record the slot's event behind it.
template <class H>
void post_step(H& h, Args& a, Sub& s, const Choices& c, uint32_t slot, uint64_t& off, uint64_t size, bool into_fifo) {
  s.step_size = size;
  s.step_buff = s.end->fifo != nullptr ? s.end->fifo + slot * c.slot_stride() : nullptr;
  uint8_t* user = s.user != nullptr && s.step_buff != nullptr ? s.user + off : nullptr;
  if (into_fifo) h.memcpy_async(*s.end, s.step_buff, user, size);
  else h.memcpy_async(*s.end, user, s.step_buff, size);
  h.record(*s.end, slot);
  off += size;
  ++a.copied;
  ++s.transmitted;
}
template <class H>
bool complete_oldest(H& h, Args& a, Sub& s, bool send, const Choices& c, const Plants& pl) {
  if (s.done >= s.transmitted) return false;
  const uint32_t slot = uint32_t((s.base + s.done) % c.window);
  const bool planted = send ? pl.head_before_copy_done : pl.credit_before_copy_done;
  if (!planted && !h.query(*s.end, slot)) return false;
  ++s.done;
  if (send) {  // the slot is full: its size, then the count the receiver reads
    h.store(&s.end->shm->size[slot], s.end->slot_size[slot]);
    h.store(&s.end->shm->head, s.base + s.done);
  } else {     // the slot is empty again: free it, then give the sender its credit
    h.store(&s.end->shm->size[slot], c.free_size());
    h.store(&s.end->shm->tail, s.base + s.done + c.window);
  }
  if (s.done == s.nsteps) {
    if (c.step_at_done) s.end->step = s.base + s.nsteps;
    ++a.done;
  }
  return true;
}
}  // namespace detail

// One round of the send proxy over the call's subs: post a copy of the next step into its
// slot when the window allows (transmitted < done + window) and the receiver gave credit
// (tail > base + transmitted); complete the oldest copy whose event finished. Returns whether
// anything moved.
template <class H>
bool send_progress(H& h, Args& a, const Choices& c, const Plants& pl = {}) {
  if (!a.ready && !(a.ready = h.ready())) return false;
  bool did = false;
  for (uint32_t i = 0; i < a.nsubs; ++i) {
    Sub& s = a.subs[i];
    detail::start(h, a, s, true, c);
    if (s.finished()) continue;
    if (detail::window_open(s, c) && (pl.sender_ignores_credit || h.load(&s.end->shm->tail) > s.base + s.transmitted)) {
      const uint32_t slot = uint32_t((s.base + s.transmitted) % c.window);
      uint64_t& off = detail::posted(a, s, c);
      const uint64_t size = std::min(c.step_bytes, s.bytes - std::min(off, s.bytes));
      s.end->slot_size[slot] = size;
      detail::post_step(h, a, s, c, slot, off, size, true);
      did = true;
    }
    did |= detail::complete_oldest(h, a, s, true, c, pl);
  }
  return did;
}

// One round of the receive proxy: post a copy out of the next slot once the sender's head
// passed it (head > base + transmitted), of the size the sender left there; free the slot and
// return credit once that copy's event finished.
template <class H>
bool recv_progress(H& h, Args& a, const Choices& c, const Plants& pl = {}) {
  if (!a.ready && !(a.ready = h.ready())) return false;
  bool did = false;
  for (uint32_t i = 0; i < a.nsubs; ++i) {
    Sub& s = a.subs[i];
    detail::start(h, a, s, false, c);
    if (s.finished() || s.refused) continue;
    if (detail::window_open(s, c) && h.load(&s.end->shm->head) > s.base + s.transmitted) {
      const uint32_t slot = uint32_t((s.base + s.transmitted) % c.window);
      uint64_t& off = detail::posted(a, s, c);
      const uint64_t size = h.load(&s.end->shm->size[slot]);
      if (size == c.free_size() && c.recv_waits_for_size) {
        did |= detail::complete_oldest(h, a, s, false, c, pl);
        continue;
      }
      // The size comes from shared memory: never trusted with a copy's length.
      if (size == c.free_size() || size == kSlotFree || size == 0 || size > c.step_bytes || size > s.bytes - std::min(off, s.bytes)) {
        s.refused = true, s.bad_size = size;
        continue;
      }
      detail::post_step(h, a, s, c, slot, off, size, false);
      did = true;
    }
    did |= detail::complete_oldest(h, a, s, false, c, pl);
  }
  return did;
}

// A connection's control block, set up before the first call: every slot free, the sender's
// credit a full window (or none yet, as the choice says).
inline void set_up(Shm& shm, const Choices& c) {
  shm.head = 0;
  shm.tail = c.first_credit == FirstCredit::kSetUp ? c.window : 0;
  for (uint64_t& s : shm.size) s = c.free_size();
}

}  // namespace doorbell::p2p::psm
