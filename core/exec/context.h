// The execution-context concept every protocol in core/ is written against. A context is one
// GPU thread's view: its lane / warp / CTA ids, warp collectives, 64-bit atomics with a scope
// and order, fences, MMIO stores, and a bounded wait. Two models satisfy it: the CPU GPU model
// (hw/gpu_sim, deterministic, seedable, every shared access a scheduling point) and CUDA
// (hw/cuda, device code on Hopper). Protocol code includes neither CUDA nor threads.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "core/exec/scope.h"

namespace doorbell::exec {

template <class C>
concept ExecContext = requires(C& c, const C& cc, uint64_t* p, const uint64_t* cp, uint64_t v, uint32_t u, bool b,
                                uint32_t* p32, void* dst, const void* src, size_t n) {
  // Identity. lane in [0, warp_size), warp within its CTA, cta within the grid.
  { cc.lane() } -> std::same_as<uint32_t>;
  { cc.warp() } -> std::same_as<uint32_t>;
  { cc.cta() } -> std::same_as<uint32_t>;
  { cc.warps_per_cta() } -> std::same_as<uint32_t>;
  { cc.num_ctas() } -> std::same_as<uint32_t>;
  { cc.warp_size() } -> std::same_as<uint32_t>;
  // Warp collectives over all lanes of the warp (callers are converged).
  { c.shfl(v, u) } -> std::same_as<uint64_t>;
  { c.ballot(b) } -> std::same_as<uint32_t>;
  { c.all(b) } -> std::same_as<bool>;
  { c.any(b) } -> std::same_as<bool>;
  c.syncwarp();
  c.sync_cta();  // barrier over every thread of the CTA (that has not exited)
  c.sync_threads(u, u);  // named barrier `id` (1 to 15) of `count` of the CTA's threads (bar.sync id, count)
  // 64-bit atomics, each with a scope.
  { c.atomic_add(gpu_scope, p, v) } -> std::same_as<uint64_t>;
  { c.atomic_cas(gpu_scope, p, v, v) } -> std::same_as<uint64_t>;
  { c.atomic_max(gpu_scope, p, v) } -> std::same_as<uint64_t>;
  { c.atomic_exch(gpu_scope, p, v) } -> std::same_as<uint64_t>;
  { c.load(gpu_scope, acquire, cp) } -> std::same_as<uint64_t>;
  { c.load(gpu_scope, relaxed, cp) } -> std::same_as<uint64_t>;
  c.store(gpu_scope, release, p, v);
  c.store(gpu_scope, relaxed, p, v);
  // Smaller words (1, 2, 4 bytes) too, and plain byte ranges (WQE segments, payloads):
  // every access to memory another agent can see goes through the context.
  { c.load(system_scope, relaxed, static_cast<const uint32_t*>(p32)) } -> std::same_as<uint32_t>;
  c.store(system_scope, relaxed, p32, u);
  c.write_bytes(dst, src, n);
  c.read_bytes(dst, src, n);
  // Fences and MMIO.
  c.fence(cta_scope);
  c.fence(gpu_scope);
  c.fence(system_scope);
  c.mmio_store64(p, v);
  // One iteration of a polling loop: `what` names the wait, `addr`/`seen` what it polled.
  // Returns false when the wait must give up (timeout on a GPU, hang found by the model).
  { c.spin(static_cast<const char*>(nullptr), cp, v) } -> std::same_as<bool>;
};

// Failed retries of an atomic (a CAS chain's) between two spins: a context whose threads
// retry back to back says how many (C::kRetriesPerSpin; on a GPU the spin's own work between
// two CASes of a chain slowed it); others spin after every retry (the CPU model yields,
// charges the poll's time and counts it toward a hang there).
template <class C>
inline constexpr uint64_t retries_per_spin = 1;
template <class C>
  requires requires { C::kRetriesPerSpin; }
inline constexpr uint64_t retries_per_spin<C> = C::kRetriesPerSpin;

// An add or max whose result no one reads, on global memory: a context with reduce_add /
// reduce_max issues it as a reduction the thread does not wait for (PTX red .global: nvcc
// already made an unused atomic's result RZ, but only a RED sped up the own-QP warp puts,
// gpu/run-post-bench); elsewhere it is the atomic.
template <class C, Scope S>
DOORBELL_HD void reduce_add(C& ctx, ScopeTag<S> s, uint64_t* p, uint64_t v) {
  if constexpr (requires { ctx.reduce_add(s, p, v); }) ctx.reduce_add(s, p, v);
  else (void)ctx.atomic_add(s, p, v);
}
template <class C, Scope S>
DOORBELL_HD void reduce_max(C& ctx, ScopeTag<S> s, uint64_t* p, uint64_t v) {
  if constexpr (requires { ctx.reduce_max(s, p, v); }) ctx.reduce_max(s, p, v);
  else (void)ctx.atomic_max(s, p, v);
}

// A CAS chain's publisher far behind the chained word (more than `far` entries) waits with
// loads, a pause() between two, until it is `near`, then CASes again; whether it is far is
// asked once per `check_every` failed retries. On a GPU the CASes of hundreds of waiting
// posters queued at the word's L2 slice ahead of the one that can succeed (gpu/run-post-bench,
// 512 posters on one QP). A context opts in with C::kFarPublish and pause(); elsewhere every
// retry is a CAS.
struct FarPublish {
  uint64_t check_every, far, near;
};
template <class C>
inline constexpr FarPublish far_publish = {retries_per_spin<C>, ~uint64_t{0}, 0};
template <class C>
  requires requires { C::kFarPublish; }
inline constexpr FarPublish far_publish<C> = C::kFarPublish;

// Polling with acquire semantics at scope `s`, without an acquire per poll: on Hopper an
// acquire load invalidates the SM's L1, so every warp on the SM would miss on what it had
// cached for as long as one warp polls. The first look is an acquire load; later polls are
// relaxed, and the one that succeeds is followed by a fence (poll; fence is an acquire
// pattern). Call poll_acquired once the wait is over, with the number of relaxed polls made.
template <class C, Scope S>
DOORBELL_HD void poll_acquired(C& ctx, ScopeTag<S> s, uint64_t relaxed_polls) {
  if (relaxed_polls != 0) ctx.fence(s);
}

// Poll `addr` until `pred(value)` holds, with acquire semantics of scope `s` (system scope
// for a word another GPU or the host writes); every failed poll is one spin. Bounded:
// returns kTimeout instead of hanging when the context gives up (a report says who waited
// on what).
template <class C, Scope S, class Pred>
DOORBELL_HD WaitResult wait_until(C& ctx, ScopeTag<S> s, const char* what, const uint64_t* addr, Pred pred) {
  uint64_t v = ctx.load(s, acquire, addr);
  if (pred(v)) return WaitResult::kOk;
  for (;;) {
    if (!ctx.spin(what, addr, v)) return WaitResult::kTimeout;
    v = ctx.load(s, relaxed, addr);
    if (pred(v)) {
      poll_acquired(ctx, s, 1);
      return WaitResult::kOk;
    }
  }
}
// The same at GPU scope (words written by threads of the same GPU).
template <class C, class Pred>
DOORBELL_HD WaitResult wait_until(C& ctx, const char* what, const uint64_t* addr, Pred pred) {
  return wait_until(ctx, gpu_scope, what, addr, pred);
}

}  // namespace doorbell::exec
