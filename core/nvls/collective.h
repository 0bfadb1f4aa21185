// NVLS ReduceScatter and AllReduce (SPEC §7, seed 003), one source for the CPU model and CUDA.
// Every rank heads one slice of the data (nHeads = nRanks); each (head, channel) owns a
// multicast region bound on every rank, holding a reduce FIFO, a broadcast FIFO and four step
// flags, each member with its own copy:
//   scatter   (every rank, per head h): copy my part for h into my copy of h's reduce FIFO,
//             post red_tail (my copy);
//   reduce    (head h only): wait until the MIN of red_tail over all members covers the step
//             (multimem.ld_reduce.acquire.min), multimem.ld_reduce the slot from every member,
//             then ReduceScatter writes my output, AllReduce multimem.st's the result into
//             every member's broadcast FIFO; post red_head (and bc_tail) with multimem.st;
//   gather    (AllReduce, every rank, per head h): wait for my copy of h's bc_tail, copy the
//             slot into my output, post bc_head (my copy), which the head min-polls.
// Flow control as NCCL's primitives: a sender waits while head + NCCL_STEPS < step + 1, a
// receiver while tail < step + 1. A producer fences (acq_rel, system) and then stores its step
// relaxed; consumers poll with acquire. Steps run on from call to call — each role keeps where
// its next call starts in its own region copy — so calls of any size and kind follow each other
// without clearing anything. A CTA takes one (role, head, channel), its threads split as
// NCCL's primitives split them (Threads): workers wait and move data, a sync warp posts. The reduce may be shared
// by `reducers` CTAs, each taking its own share of every step with its own red_head / bc_tail
// (consumers wait for the least of them): on a GPU without a switch the reduce moves the
// remote bytes, and one CTA per channel cannot keep the links busy. A wait that gives up (a GPU
// timeout) leaves the CTA running through its steps without waiting, so no barrier is left
// unmatched; the call then returns false.
//
// The multicast view M of a region (the model's switch, CUDA's emulation over peer pointers, or
// the real multimem instructions) offers: uc(off) — this member's own copy; ld_reduce(ctx, off,
// t, op, pack, out); st(ctx, off, src, bytes) — to every member; ld_min(ctx, off) — min over
// members of an 8-byte flag, acquire; st_flag(ctx, off, v) — a relaxed store to every member;
// charge_reduce / charge_local(ctx, bytes) — the simulated time a step's data takes (the
// model's timed schedule; nothing on a GPU); reads_done(ctx) — before a post that frees what
// the CTA read (Post::kFrees). Null input and output: sizes only (phantom).
//
// Registered buffers (Args::registered; NCCL's NVLS user-buffer registration): every rank's
// output (kOutput), or its input and output (kBoth), bound to multicast objects of their own
// (mcs.output(), mcs.input(); offsets in bytes). With the output registered, AllReduce's reduce
// multimem.st's straight into every member's output without waiting for bc_head, and the
// gather only waits and posts, unfenced (no broadcast FIFO data, no copy). With the input too,
// no data goes through the reduce FIFO either: a part is one step, the scatter only posts and waits, and the reduce ld_reduces every
// member's input. A member's red_tail then says its call has started (its input is ready, its
// output may be written); with the input registered its scatter waits, before the call ends,
// until every reducer freed its step (no peer still reads my input); an AllReduce gather's wait
// for bc_tail says my output is whole.
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "base/nvls/pack.h"
#include "base/nvls/reduce.h"

namespace doorbell::nvls {

inline constexpr uint32_t kSteps = 8;  // NCCL_STEPS

enum class Registered : uint8_t { kNone, kOutput, kBoth };  // which user buffers are bound to multicast

// Planted bugs, for tests only.
struct Plants {
  bool sender_ignores_head = false;  // scatter (ring: send) without waiting for a free slot
  bool own_flag_not_min = false;     // the head polls its own copy of a flag, not the min
  bool wrong_pack = false;           // 16-byte packs whatever the type and op
  bool receiver_ignores_tail = false;  // ring: read a slot without waiting for it to land
  bool first_reducer_only = false;   // scatter and gather wait for reducer 0's flag, not the least
  bool reducer_frees_early = false;  // a reducer's thread 0 frees the reduce slot before the CTA barrier after the loads
  bool broadcast_posted_early = false;  // a reducer's thread 0 posts bc_tail before the CTA barrier after the broadcast stores
  bool post_fence_gpu = false;       // a staged slot is posted behind a .gpu fence: other GPUs' reducers read it
  bool input_released_early = false;  // registered input: a call ends without waiting for the reducers to have read it
  bool gather_frees_late = false;     // a gather frees the step it read (bc_head = step), one behind the step past it
  bool post_send_fences_own_stores = false;  // PostSend fences only when it stored step data itself (the sync warp stores none)
};

inline constexpr uint32_t kMaxReducers = 4;

// A region's layout: the flags and this member's step bases (where each role's next call
// starts), each on its own 128-byte line, then two FIFOs of kSteps slots (a sizes-only run
// maps the flags alone).
struct Region {
  static constexpr uint64_t kFlagBytes = (4 + 4 * kMaxReducers) * 128;
  uint64_t slot_bytes = 0;
  DOORBELL_HD uint64_t flag(uint32_t i) const { return 128ull * i; }
  DOORBELL_HD uint64_t red(uint64_t step) const { return kFlagBytes + (step % kSteps) * slot_bytes; }
  DOORBELL_HD uint64_t bc(uint64_t step) const { return kFlagBytes + (kSteps + step % kSteps) * slot_bytes; }
  DOORBELL_HD uint64_t bytes() const { return kFlagBytes + 2 * kSteps * slot_bytes; }
};
// The lines: the flags and step bases every member's scatter and gather own, then each
// reducer's four (reducer_flag). Step bases: the reduce FIFO's (scatter, reduce) and the
// broadcast FIFO's (reduce, gather) — a ReduceScatter call moves only the first pair.
enum Flag : uint32_t {
  kRedTail = 0, kBcHead = 1, kScatterBase = 2, kGatherBase = 3,
  kRedHead = 4, kBcTail = 5, kReduceBase = 6, kBroadcastBase = 7  // reducer 0's
};
DOORBELL_HD constexpr uint32_t reducer_flag(Flag f, uint32_t j) { return f + 4 * j; }

struct Args {
  uint32_t nranks = 2, rank = 0, channels = 1;
  uint32_t reducers = 1;  // CTAs sharing each reduce step, 1..kMaxReducers
  DType dtype = DType::kF32;
  RedOp op = RedOp::kSum;
  bool allreduce = true;
  // AllReduce: elements per rank in and out. ReduceScatter: elements out per rank (in: nranks x).
  uint64_t count = 0;
  Region region;
  // Bytes a step moves: a multiple of 16 up to the slot (0: the slot). Chosen per call, as
  // NCCL sizes its chunks by the message: small steps fill the pipeline sooner, large ones
  // pay fewer flag round trips.
  uint64_t step_bytes = 0;
  const uint8_t* input = nullptr;  // this rank's (null: phantom, sizes only)
  uint8_t* output = nullptr;
  Registered registered = Registered::kNone;  // user buffers bound to multicast objects (mcs.input(), mcs.output())
  // A sync warp that only posts (Threads). NCCL's structure; off by default on GPUs, where a
  // CTA of 16 warps lost more copy rate to it than the overlapped fences gave back (docs/nvls.md).
  bool sync_warp = false;
  // Hunks a warp wide (split_packs), NCCL's reduceCopy split; off by default on GPUs, where it
  // measured slower than hunks the CTA's width (docs/nvls.md).
  bool warp_hunks = false;
  Plants plants;
};

// The CTAs a rank launches: per channel, a scatter CTA per head, the reducers of its own head
// and (AllReduce) a gather CTA per head.
DOORBELL_HD uint32_t ctas_per_channel(const Args& a) { return a.nranks * (a.allreduce ? 2 : 1) + a.reducers; }
DOORBELL_HD uint32_t ctas_per_rank(const Args& a) { return a.channels * ctas_per_channel(a); }

// Elements [lo, hi) of head h, channel c, in the slice's own numbering.
struct Part {
  uint64_t lo = 0, hi = 0;
};
// Boundaries fall on 16-byte multiples (so copies and packs stay aligned); the last part takes
// the remainder.
DOORBELL_HD Part part_of(const Args& a, uint32_t h, uint32_t c) {
  const uint64_t al = 16 / dtype_bytes(a.dtype);
  auto cut = [al](uint64_t total, uint64_t i, uint64_t parts) { return i == parts ? total : total * i / parts / al * al; };
  const uint64_t head_lo = a.allreduce ? cut(a.count, h, a.nranks) : 0;
  const uint64_t head_hi = a.allreduce ? cut(a.count, h + 1, a.nranks) : a.count;
  const uint64_t n = head_hi - head_lo;
  return {head_lo + cut(n, c, a.channels), head_lo + cut(n, c + 1, a.channels)};
}
// Where head h's part starts in this rank's input (ReduceScatter: block h of nranks).
DOORBELL_HD uint64_t input_base(const Args& a, uint32_t h) { return a.allreduce ? 0 : a.count * h; }

// A role's words on its own line of this member's region copy: its step base (word 0) and, for
// a sender, its last view of its consumers' heads (word 1).
enum RoleWord : uint32_t { kStepBase = 0, kSeenHead = 1 };
template <class M>
DOORBELL_HD uint64_t* role_word(M& mc, const Args& a, uint32_t which, RoleWord w) {
  return reinterpret_cast<uint64_t*>(mc.uc(a.region.flag(which) + 8 * w));
}

// Where this role's steps start: every thread reads its own region copy's word (written at the
// end of the previous call by thread 0, after a barrier).
template <class C, class M>
DOORBELL_HD uint64_t role_base(C& ctx, M& mc, const Args& a, uint32_t which) {
  return ctx.load(exec::gpu_scope, exec::relaxed, role_word(mc, a, which, kStepBase));
}
template <class C, class M>
DOORBELL_HD void end_role(C& ctx, M& mc, const Args& a, uint32_t which, uint64_t next, uint32_t tid) {
  ctx.sync_cta();  // every thread has read the base
  if (tid == 0) ctx.store(exec::gpu_scope, exec::relaxed, role_word(mc, a, which, kStepBase), next);
}

// A sender's last view of its consumers' heads (the least it polled), kept beside its step
// base for the next call: heads only grow, so a call's first steps need no poll where the
// consumers were that far already (that poll, serial acquire loads, held up every call's
// first step). Read at the role's start, written by the thread that polls, before end_role.
template <class C, class M>
DOORBELL_HD uint64_t seen_base(C& ctx, M& mc, const Args& a, uint32_t which) {
  return ctx.load(exec::gpu_scope, exec::relaxed, role_word(mc, a, which, kSeenHead));
}
template <class C, class M>
DOORBELL_HD void keep_seen(C& ctx, M& mc, const Args& a, uint32_t which, uint64_t seen) {
  ctx.store(exec::gpu_scope, exec::relaxed, role_word(mc, a, which, kSeenHead), seen);
}

DOORBELL_HD uint64_t step_of(const Args& a) {
  return a.step_bytes != 0 && a.step_bytes < a.region.slot_bytes ? a.step_bytes : a.region.slot_bytes;
}
// The registration a call runs with. A ReduceScatter writes only its own output, so a
// registered output alone changes nothing; and an input whose blocks (count elements each) do
// not start on 16 bytes goes through the FIFOs (multimem packs must be aligned).
DOORBELL_HD Registered registered_mode(const Args& a) {
  if (a.allreduce || a.registered != Registered::kBoth) return a.allreduce ? a.registered : Registered::kNone;
  return a.count * dtype_bytes(a.dtype) % 16 == 0 ? Registered::kBoth : Registered::kNone;
}

// Elements a step of part p moves: the slot's (or step_bytes'), or with registered buffers
// (no slot) the whole part.
DOORBELL_HD uint64_t step_elems(const Args& a, const Part& p) {
  if (registered_mode(a) == Registered::kBoth) return p.hi > p.lo ? p.hi - p.lo : 1;
  return step_of(a) / dtype_bytes(a.dtype);
}
DOORBELL_HD uint64_t steps_of(const Args& a, const Part& p) {
  const uint64_t per = step_elems(a, p);
  return (p.hi - p.lo + per - 1) / per;
}

// Step s of part p: its first element and its bytes (the last step may be short).
DOORBELL_HD void step_span(const Args& a, const Part& p, uint64_t s, uint64_t& lo, uint64_t& bytes) {
  const uint64_t per = step_elems(a, p);
  lo = p.lo + s * per;
  bytes = (p.hi - lo < per ? p.hi - lo : per) * dtype_bytes(a.dtype);
}

// How a CTA's threads split n bytes taken `pack` bytes at a time: in hunks of U packs per
// thread, `lanes` threads to a hunk (nthreads a multiple of it) — a lane takes the packs lane,
// lane + lanes, ... of a hunk, so the U loads a thread issues before its stores are in flight
// together, and the lanes' loads of one u are one span. Group g of the nthreads / lanes takes
// hunks g, g + groups, ...; the packs past the last whole hunk go one at a time over all
// threads. hunk(off, stride): the thread's first pack and the distance to its next; one(off):
// a single pack. Returns where whole packs end (what is past it is the caller's tail).
template <uint32_t U, class Hunk, class One>
DOORBELL_HD uint64_t split_packs(uint64_t n, uint32_t pack, uint32_t tid, uint32_t nthreads, uint32_t lanes, Hunk hunk, One one) {
  const uint64_t span = uint64_t(U) * lanes * pack, whole = n / span, stride = uint64_t(lanes) * pack;
  for (uint64_t h = tid / lanes; h < whole; h += nthreads / lanes) hunk(h * span + (tid % lanes) * uint64_t(pack), stride);
  const uint64_t packs_end = n / pack * pack;
  for (uint64_t off = whole * span + uint64_t(tid) * pack; off < packs_end; off += uint64_t(nthreads) * pack) one(off);
  return packs_end;
}
// The threads that share a hunk: a warp, as NCCL's reduceCopy splits its work (seed 003;
// Args::warp_hunks, where the CTA is whole warps), or all of them.
template <class C>
DOORBELL_HD uint32_t hunk_lanes(const C& ctx, bool warp_hunks, uint32_t nthreads) {
  return warp_hunks && nthreads % ctx.warp_size() == 0 ? ctx.warp_size() : nthreads;
}

// A slot's bytes between private and shared memory across the CTA's threads, 16 at a time in
// hunks of 8 per thread (split_packs; warp-wide with `warp_hunks`): each thread first reads its 8
// pieces, then writes them, so that many loads are in flight (one at a time, a GPU copy runs
// at load latency; 8 in flight moved more than 4 under load, gpu/run-nvls-bench). Plain
// accesses through the context: the weak model sees them.
template <class C>
DOORBELL_HD void move_slot(C& ctx, uint8_t* dst, const uint8_t* src, uint64_t n, uint32_t tid, uint32_t nthreads, bool warp_hunks) {
  constexpr uint32_t kUnroll = 8;
  auto hunk = [&](uint64_t off, uint64_t stride) {
    alignas(16) uint8_t v[kUnroll][16];
    for (uint32_t u = 0; u < kUnroll; ++u) ctx.read_bytes(v[u], src + off + u * stride, 16);
    for (uint32_t u = 0; u < kUnroll; ++u) ctx.write_bytes(dst + off + u * stride, v[u], 16);
  };
  auto one = [&](uint64_t off) {
    alignas(16) uint8_t v[16];
    ctx.read_bytes(v, src + off, 16);
    ctx.write_bytes(dst + off, v, 16);
  };
  const uint64_t whole = split_packs<kUnroll>(n, 16, tid, nthreads, hunk_lanes(ctx, warp_hunks, nthreads), hunk, one);
  if (whole < n && tid == 0) {  // (the last piece, under 16 bytes)
    alignas(16) uint8_t v[16];
    ctx.read_bytes(v, src + whole, n - whole);
    ctx.write_bytes(dst + whole, v, n - whole);
  }
}

// Where a polled value comes from: the MIN over members of a flag (multimem
// ld_reduce.acquire.min), this member's copy, or the least of this member's copies of every
// reducer's flag.
enum class From { kMembersMin, kOwn, kReducersMin };

// Poll until pred(value) holds. `seen` is the value this thread last read of the same flag:
// flags only grow, so a value that already satisfies pred needs no new poll (NCCL keeps such
// step caches too) — and its acquire, made then, still orders what follows.
template <class C, class M, class Pred>
DOORBELL_HD bool wait_flag(C& ctx, M& mc, const Args& a, Flag flag, From from, const char* what, uint64_t& seen, Pred pred) {
  using namespace exec;
  if (pred(seen)) return true;
  const uint64_t off = a.region.flag(flag);
  for (;;) {
    uint64_t v;
    if (from == From::kMembersMin) {
      v = mc.ld_min(ctx, off);
    } else {
      v = ~0ull;
      const uint32_t n = from == From::kOwn || a.plants.first_reducer_only ? 1 : a.reducers;
      for (uint32_t j = 0; j < n; ++j) {
        const uint64_t x =
            ctx.load(system_scope, acquire, reinterpret_cast<const uint64_t*>(mc.uc(a.region.flag(reducer_flag(flag, j)))));
        v = x < v ? x : v;
      }
    }
    seen = v;
    if (pred(v)) return true;
    if (!ctx.spin(what, reinterpret_cast<const uint64_t*>(mc.uc(off)), v)) return false;
  }
}

inline constexpr uint32_t kReduceUnroll = 4;  // packs per thread in a hunk
// A view that can keep a hunk's loads in flight together (CUDA's emulation: remote loads are
// microseconds) takes the hunk at once (ld_reduce_n).
template <class M, class C>
inline constexpr bool kTakesHunks = requires(M& mc, C& ctx, uint8_t (&acc)[kReduceUnroll][16]) {
  mc.template ld_reduce_n<kReduceUnroll>(ctx, uint64_t(0), uint64_t(0), DType::kF32, RedOp::kSum, uint32_t(16), acc);
};
struct ReduceSpan {
  uint64_t src;
  uint8_t* out;
  bool bcast;
  uint64_t bc_off, n;
};
// The reduce step's data: bytes [0, n) at `src` of view `mc` reduced over all members, into
// this rank's `out`, or (bcast) every member's copy at `bc_off` of view `to` through
// multimem.st: the reduce slot and the broadcast slot of a region, or with registered buffers
// the inputs and the outputs. Hunks of 4 packs per thread (split_packs), then single packs,
// then the unaligned tail element by element. T and O are the type and op, constants
// (Const, with_type_op) or not.
template <class C, class M, class To, class T, class O>
DOORBELL_HD_OUTLINED void reduce_loops(C& ctx, M& mc, To& to, const Args& a, ReduceSpan r, uint32_t tid, uint32_t nthreads, T t, O op) {
  constexpr uint32_t kUnroll = kReduceUnroll;
  const uint32_t es = dtype_bytes(t);
  const uint32_t pack = a.plants.wrong_pack ? 16 : multimem_pack_bytes(t, op);
  alignas(16) uint8_t acc[kUnroll][16];
  auto put = [&](uint64_t off, uint32_t bytes, const uint8_t* v) {
    if (r.bcast) to.st(ctx, r.bc_off + off, v, bytes);
    else if (r.out != nullptr) ctx.write_bytes(r.out + off, v, bytes);
  };
  auto one = [&](uint64_t off, uint32_t bytes) {
    mc.ld_reduce(ctx, r.src + off, t, op, bytes, acc[0]);
    put(off, bytes, acc[0]);
  };
  // A hunk: every load of the thread's kUnroll packs before any store, so they are in flight
  // together (remote loads are long).
  auto hunk = [&](uint64_t off, uint64_t stride) {
    if constexpr (kTakesHunks<M, C>)
      mc.template ld_reduce_n<kUnroll>(ctx, r.src + off, stride, t, op, pack, acc);
    else
      for (uint32_t u = 0; u < kUnroll; ++u) mc.ld_reduce(ctx, r.src + off + u * stride, t, op, pack, acc[u]);
    for (uint32_t u = 0; u < kUnroll; ++u) put(off + u * stride, pack, acc[u]);
  };
  const uint32_t lanes = hunk_lanes(ctx, a.warp_hunks, nthreads);
  const uint64_t packs_end = pack == 0 ? 0 : split_packs<kUnroll>(r.n, pack, tid, nthreads, lanes, hunk, [&](uint64_t off) { one(off, pack); });
  for (uint64_t off = packs_end + uint64_t(tid) * es; off < r.n; off += uint64_t(nthreads) * es) one(off, es);
}
// On a view that takes a hunk at once (a GPU's), one loop per (type, op): the reduce's
// switches per pack made a reduce CTA instruction-bound (docs/nvls.md). The model's views run
// one loop for every pair.
template <class C, class M, class To>
DOORBELL_HD void reduce_copy(C& ctx, M& mc, const Args& a, uint64_t src, uint8_t* out, To& to, bool bcast, uint64_t bc_off, uint64_t n,
                             uint32_t tid, uint32_t nthreads) {
  const ReduceSpan r{src, out, bcast, bc_off, n};
  if constexpr (kTakesHunks<M, C>)
    with_type_op(a.dtype, a.op, [&](auto t, auto op) { reduce_loops(ctx, mc, to, a, r, tid, nthreads, t, op); });
  else
    reduce_loops(ctx, mc, to, a, r, tid, nthreads, a.dtype, a.op);
}

// A role group's threads (NCCL's ThreadPerSync where no role has more than 8 peers).
inline constexpr uint32_t kGroup = 8;
// A role CTA's threads, as NCCL's primitives split them (seed 003). With Args::sync_warp and two
// or more warps the last is a sync warp: it only posts, so a post's system-scope fence
// (microseconds) overlaps the next step's wait and copy. The other warps are workers: WaitRecv
// (thread 0; a gather's, a thread per reducer from 0, wait_each_reducer) polls what the role
// consumes, WaitSend (thread 8) the free slots it produces into, both at once; every worker
// moves data, and they meet at a barrier of their own (1) before each step's data. PostRecv
// (frees what was consumed) and PostSend (publishes what was produced) are the sync warp's
// first and last threads. Without a sync warp every thread is a
// worker and thread 0 waits and posts alone (the GPU default: splitting the waits and posts
// over threads of a 16-warp CTA measured 1-3 % slower, docs/nvls.md).
struct Threads {
  uint32_t n, workers, wait_recv, wait_send, post_recv, post_send;
};
template <class C>
DOORBELL_HD Threads threads_of(const C& ctx, const Args& a, uint32_t nthreads) {
  const uint32_t w = ctx.warp_size();  // (whole warps only: bar.sync counts them)
  if (!a.sync_warp || nthreads < 2 * w || nthreads % w != 0) return {nthreads, nthreads, 0, 0, 0, 0};
  const uint32_t workers = nthreads - w;
  return {nthreads, workers, 0, workers > kGroup ? kGroup : workers - 1, workers, nthreads - 1};
}
// A wait over every reducer's copy of `flag`, one thread each from thread `first`, as NCCL
// gives each peer its own thread of a group of 8 (seed 003): they poll at once, where one
// thread's loop over the reducers made serial acquire loads — a gather's WaitRecv at the end
// of every AllReduce step, and a scatter's last wait, with its input registered, for every
// reducer to have read it (the reducers end apart). A group narrower than the reducers (the
// model's small CTAs) has a thread wait for several in turn. `seen`: the least value this
// thread last read of its own. (A scatter's WaitSend before each step stays one thread's
// loop: its slot is mostly free already, and per-reducer views kept there pushed the kernel,
// at its 128-register cap, into local memory — slower; docs/nvls.md.)
template <class C, class M, class Pred>
DOORBELL_HD bool wait_each_reducer(C& ctx, M& mc, const Args& a, const Threads& t, uint32_t first, uint32_t tid, Flag flag, const char* what,
                                   uint64_t& seen, Pred pred) {
  const uint32_t span = t.workers - first < kGroup ? t.workers - first : kGroup;
  const uint32_t n = a.plants.first_reducer_only ? 1 : a.reducers;
  if (tid < first || tid - first >= span || pred(seen)) return true;
  uint64_t least = ~0ull;
  bool ok = true;
  for (uint32_t j = tid - first; j < n && ok; j += span) {
    uint64_t v = 0;
    ok = wait_flag(ctx, mc, a, Flag(reducer_flag(flag, j)), From::kOwn, what, v, pred);
    least = v < least ? v : least;
  }
  if (least != ~0ull) seen = least;  // (a thread past the reducers watches none)
  return ok;
}

// The workers' barrier: every step's wait is over (bar.sync 1, or the CTA's without a sync warp).
template <class C>
DOORBELL_HD void workers_sync(C& ctx, const Threads& t) {
  if (t.workers == t.n) ctx.sync_cta();
  else ctx.sync_threads(1, t.workers);
}

// What a post hands over. kPublishes: data the CTA stored (a system-scope fence first, the
// workers' stores before the step's barrier going out with it). kFrees: a slot the CTA read,
// which the producer may now overwrite — the view's reads_done: a system fence on the model
// (the race detector's edge from the reads to the overwrite) and nothing on a GPU, where each
// read's value was stored before the barrier, so the read is over before the post is made
// (NCCL posts its PostRecv steps unfenced too; docs/nvls.md has what the fence cost). kNothing:
// a registered output's gather, which read no slot.
enum class Post : uint8_t { kNothing, kPublishes, kFrees };
// After the step's CTA barrier, the poster stores step v in this member's copy of `flag`.
template <class C, class M>
DOORBELL_HD void post_own(C& ctx, M& mc, const Args& a, Flag flag, uint64_t v, Post what) {
  if (what == Post::kPublishes && a.plants.post_fence_gpu) ctx.fence(exec::gpu_scope);
  else if (what == Post::kPublishes) ctx.fence(exec::system_scope);
  else if (what == Post::kFrees) mc.reads_done(ctx);
  ctx.store(exec::system_scope, exec::relaxed, reinterpret_cast<uint64_t*>(mc.uc(a.region.flag(flag))), v);
}
// Whether PostSend fences: always where it publishes data (the plant: only if it stored some of
// the step's n bytes itself, 16 per worker thread — which a sync warp never does).
DOORBELL_HD bool send_fences(const Args& a, const Threads& t, uint32_t tid, uint64_t n) {
  return !a.plants.post_send_fences_own_stores || (tid < t.workers && uint64_t(tid) * 16 < n);
}

// One CTA of rank a.rank. `mcs.at(h, c)` is the multicast view of (head h, channel c). Each
// step: the waiters poll, the workers meet (workers_sync) and move the step's data, the whole
// CTA meets (sync_cta), the posters post — while the workers go on to the next step's wait.
// Returns false where one of this thread's waits gave up.
template <class C, class Mcs>
DOORBELL_HD bool nvls_cta(C& ctx, Mcs& mcs, const Args& a, uint32_t cta, uint32_t tid, uint32_t nthreads) {
  using namespace exec;
  const uint32_t per_channel = ctas_per_channel(a);
  const uint32_t c = cta / per_channel, r = cta % per_channel;
  const uint32_t es = dtype_bytes(a.dtype);
  const Registered reg = registered_mode(a);
  const Threads t = threads_of(ctx, a, nthreads);
  const bool worker = tid < t.workers;
  bool ok = true;
  if (r < a.nranks) {  // scatter my part for head h
    const uint32_t h = r;
    auto& mc = mcs.at(h, c);
    const Part p = part_of(a, h, c);
    const uint64_t steps = steps_of(a, p), b = role_base(ctx, mc, a, kScatterBase);
    const bool copy = reg != Registered::kBoth;  // (a registered input: no slot is written, none to wait for)
    uint64_t seen_head = seen_base(ctx, mc, a, kScatterBase);  // (flags start at 0 and only grow)
    for (uint64_t s = 0; s < steps; ++s) {
      uint64_t lo, n;
      step_span(a, p, s, lo, n);
      if (worker) {
        if (tid == t.wait_send && ok && !a.plants.sender_ignores_head && copy)
          ok = wait_flag(ctx, mc, a, kRedHead, From::kReducersMin, "nvls scatter: reduce slot free (step < red_head + NCCL_STEPS)", seen_head,
                         [t = b + s](uint64_t head) { return t + 1 <= head + kSteps; });
        workers_sync(ctx, t);
        if (a.input != nullptr && copy)
          move_slot(ctx, mc.uc(a.region.red(b + s)), a.input + (input_base(a, h) + lo) * es, n, tid, t.workers, a.warp_hunks);
      }
      ctx.sync_cta();
      if (tid == t.post_send) {
        mc.charge_local(ctx, copy ? n : 0);  // (the timed model: the step's time, on the thread whose post hands it on)
        post_own(ctx, mc, a, kRedTail, b + s + 1, send_fences(a, t, tid, copy ? n : 0) ? Post::kPublishes : Post::kNothing);
      }
    }
    uint64_t seen_end = 0;  // (the end is past any head a step saw)
    if (reg == Registered::kBoth && ok && !a.plants.input_released_early)  // the head's reducers have read my input
      ok = wait_each_reducer(ctx, mc, a, t, t.wait_send, tid, kRedHead, "nvls scatter: every reducer read my input (red_head >= the call's end)",
                             seen_end, [t = b + steps](uint64_t head) { return head >= t; });
    if (tid == t.wait_send) keep_seen(ctx, mc, a, kScatterBase, seen_head);
    end_role(ctx, mc, a, kScatterBase, b + steps, tid);
  } else if (r < a.nranks + a.reducers) {  // reducer j of my own head's part: its share of each step
    const uint32_t j = r - a.nranks;
    auto& mc = mcs.at(a.rank, c);
    const Part p = part_of(a, a.rank, c);
    const uint64_t steps = steps_of(a, p), b = role_base(ctx, mc, a, reducer_flag(kReduceBase, j));
    const uint64_t bb = a.allreduce ? role_base(ctx, mc, a, reducer_flag(kBroadcastBase, j)) : 0;
    const From min = a.plants.own_flag_not_min ? From::kOwn : From::kMembersMin;
    uint64_t seen_tail = 0, seen_head = a.allreduce ? seen_base(ctx, mc, a, reducer_flag(kBroadcastBase, j)) : 0;
    for (uint64_t s = 0; s < steps; ++s) {
      uint64_t lo, n;
      step_span(a, p, s, lo, n);
      // My share: bytes [n0, n1) of the step, cut on 16-byte multiples.
      const uint64_t n0 = n * j / a.reducers / 16 * 16, n1 = j + 1 == a.reducers ? n : n * (j + 1) / a.reducers / 16 * 16;
      if (worker) {
        if (tid == t.wait_recv && ok)
          ok = wait_flag(ctx, mc, a, kRedTail, min, "nvls reduce: every member staged (min red_tail > step)", seen_tail,
                         [t = b + s](uint64_t tail) { return tail >= t + 1; });
        if (tid == t.wait_send && ok && a.allreduce && reg == Registered::kNone)  // (a registered output has no slots)
          ok = wait_flag(ctx, mc, a, kBcHead, min, "nvls reduce: broadcast slot free (step < min bc_head + NCCL_STEPS)", seen_head,
                         [t = bb + s](uint64_t head) { return t + 1 <= head + kSteps; });
        workers_sync(ctx, t);
        uint8_t* out = a.output == nullptr || a.allreduce ? nullptr : a.output + lo * es + n0;  // ReduceScatter: my block
        if (a.input != nullptr && reg == Registered::kBoth)
          reduce_copy(ctx, mcs.input(), a, (input_base(a, a.rank) + lo) * es + n0, out, mcs.output(), a.allreduce, lo * es + n0, n1 - n0, tid,
                      t.workers);
        else if (a.input != nullptr && reg == Registered::kOutput)
          reduce_copy(ctx, mc, a, a.region.red(b + s) + n0, out, mcs.output(), a.allreduce, lo * es + n0, n1 - n0, tid, t.workers);
        else if (a.input != nullptr)
          reduce_copy(ctx, mc, a, a.region.red(b + s) + n0, out, mc, a.allreduce, a.region.bc(bb + s) + n0, n1 - n0, tid, t.workers);
        if (tid == 0 && (a.plants.reducer_frees_early || a.plants.broadcast_posted_early)) {
          ctx.fence(system_scope);
          if (a.plants.reducer_frees_early) mc.st_flag(ctx, a.region.flag(reducer_flag(kRedHead, j)), b + s + 1);
          if (a.plants.broadcast_posted_early && a.allreduce) mc.st_flag(ctx, a.region.flag(reducer_flag(kBcTail, j)), bb + s + 1);
        }
      }
      ctx.sync_cta();
      // PostRecv frees the slot every member staged (Post::kFrees); PostSend publishes the
      // broadcast behind a system fence, which orders a free posted by the same thread too (a
      // second fence cost AllReduce 5-8 %).
      const bool frees = tid == t.post_recv && !a.plants.reducer_frees_early;
      const bool sends = tid == t.post_send && a.allreduce && !a.plants.broadcast_posted_early;
      if (tid == t.post_recv) mc.charge_reduce(ctx, n1 - n0, a.allreduce);
      if (sends && send_fences(a, t, tid, n1 - n0)) ctx.fence(system_scope);
      else if (frees) mc.reads_done(ctx);
      if (frees) mc.st_flag(ctx, a.region.flag(reducer_flag(kRedHead, j)), b + s + 1);
      if (sends) mc.st_flag(ctx, a.region.flag(reducer_flag(kBcTail, j)), bb + s + 1);
    }
    end_role(ctx, mc, a, reducer_flag(kReduceBase, j), b + steps, tid);
    if (a.allreduce && tid == t.wait_send) keep_seen(ctx, mc, a, reducer_flag(kBroadcastBase, j), seen_head);
    if (a.allreduce) end_role(ctx, mc, a, reducer_flag(kBroadcastBase, j), bb + steps, tid);
  } else {  // gather head h's reduced part into my output
    const uint32_t h = r - a.nranks - a.reducers;
    auto& mc = mcs.at(h, c);
    const Part p = part_of(a, h, c);
    const uint64_t steps = steps_of(a, p), b = role_base(ctx, mc, a, kGatherBase);
    const bool copy = reg == Registered::kNone;
    uint64_t seen_tail = 0;
    for (uint64_t s = 0; s < steps; ++s) {
      uint64_t lo, n;
      step_span(a, p, s, lo, n);
      if (worker) {
        if (ok)
          ok = wait_each_reducer(ctx, mc, a, t, t.wait_recv, tid, kBcTail, "nvls gather: broadcast landed (bc_tail > step)", seen_tail,
                                 [t = b + s](uint64_t tail) { return tail >= t + 1; });
        workers_sync(ctx, t);
        if (a.output != nullptr && copy)
          move_slot(ctx, a.output + lo * es, mc.uc(a.region.bc(b + s)), n, tid, t.workers, a.warp_hunks);
      }
      ctx.sync_cta();
      if (tid == t.post_recv) {
        mc.charge_local(ctx, copy ? n : 0);
        post_own(ctx, mc, a, kBcHead, b + s + (a.plants.gather_frees_late ? 0 : 1), copy ? Post::kFrees : Post::kNothing);
      }
    }
    end_role(ctx, mc, a, kGatherBase, b + steps, tid);
  }
  return ok;
}

}  // namespace doorbell::nvls
