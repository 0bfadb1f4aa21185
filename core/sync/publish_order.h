// Publishing in reservation order (SPEC §4), for the generic publish ring (publish_ring.h;
// IBGDA's submit publishes by counted windows instead, publish_windows.h): producers reserve spans of a ring, write them, and
// publish a span by moving `ready` from its base to its end once every earlier span is
// published. Only the producer whose span starts at `ready` can move it from there, so a
// producer that reads its base in `ready` owns the word and writes its end.
//
// A producer behind others retries the CAS, as NVSHMEM does: the CAS that finds its base
// publishes in the same L2 round trip. Polling with loads and then exchanging took two, and
// the chain of producers on a QP shared by many posters ran at half NVSHMEM's rate
// (gpu/run-post-bench, lane-0 rows). On a GPU the retries run back to back, as NVSHMEM's
// do, with the checks and the context's spin (which may sleep) once per
// exec::retries_per_spin of them: a spin after every retry slowed QPs shared by 64 posters.
// Only a producer far behind (exec::far_publish) waits with loads and pauses, until near:
// with 512 producers on one word, their CASes slowed the chain by a quarter.
#pragma once

#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::sync {

enum class Publish : uint8_t { kOk, kTimeout, kAbandoned };

// The caller's entries in [base, next) are written and fenced (publish_entries).
// `abandoned(polls)` says, while waiting, that an earlier span will never be published (its
// ring failed); `polls` counts the failed polls so far (asked once per spin).
template <class C, class Abandoned>
DOORBELL_HD Publish publish_in_order(C& ctx, uint64_t* ready, uint64_t base, uint64_t next, const char* what, Abandoned abandoned) {
  constexpr exec::FarPublish fp = exec::far_publish<C>;
  static_assert(exec::retries_per_spin<C> % fp.check_every == 0 && fp.near < fp.far);
  for (uint64_t r, polls = 0; (r = ctx.atomic_cas(exec::gpu_scope, ready, base, next)) != base; ++polls) {
    if ((polls + 1) % fp.check_every != 0) continue;
    // The checks and the spin when due; a producer far behind polls with loads until near.
    // (ready never passes an unpublished base: one the QP's reset moved past reads as far,
    // and its wait ends in the abandoned check.)
    for (const bool far = base - r > fp.far;; r = ctx.load(exec::gpu_scope, exec::relaxed, ready), ++polls) {
      if ((polls + 1) % exec::retries_per_spin<C> == 0) {
        if (abandoned(polls)) return Publish::kAbandoned;
        if (!ctx.spin(what, ready, r)) return Publish::kTimeout;
      }
      if (!far || base - r <= fp.near) break;
      if constexpr (fp.far != ~uint64_t{0}) ctx.pause();
    }
  }
  return Publish::kOk;
}

}  // namespace doorbell::sync
