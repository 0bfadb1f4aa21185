// Publishing in reservation order (SPEC §4), for IBGDA's submit (core/ibgda/queue.h) and the
// generic publish ring (publish_ring.h): producers reserve spans of a ring, write them, and
// publish a span by moving `ready` from its base to its end once every earlier span is
// published. Only the producer whose span starts at `ready` can move it from there, so a
// producer that reads its base in `ready` owns the word and writes its end.
//
// One CAS first (it wins when no earlier span is pending); a producer behind others then
// polls with loads, then exchanges, instead of retrying the CAS as NVSHMEM does: a CAS per poll
// from every waiting producer queued at the word's L2 slice ahead of the one that could move
// it (gpu/run-post-bench, 8 QPs shared by 512 warps, thread-scope puts).
#pragma once

#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::sync {

enum class Publish : uint8_t { kOk, kTimeout, kAbandoned };

// publish_in_order's wait once its CAS found an earlier span pending.
template <class C, class Abandoned>
DOORBELL_HD_RARE Publish publish_after_wait(C& ctx, uint64_t* ready, uint64_t base, uint64_t next, const char* what,
                                            Abandoned& abandoned) {
  for (uint64_t r, polls = 0; (r = ctx.load(exec::gpu_scope, exec::relaxed, ready)) != base; ++polls) {
    if (abandoned(polls)) return Publish::kAbandoned;
    if (!ctx.spin(what, ready, r)) return Publish::kTimeout;
  }
  // An exchange, not a store: a store may linger in this thread's store buffer past the
  // atomics that follow (the ringer's prod_idx update), and prod_idx <= ready_head would not
  // hold in memory (the weak mode finds it).
  (void)ctx.atomic_exch(exec::gpu_scope, ready, next);
  return Publish::kOk;
}

// The caller's entries in [base, next) are written and fenced (publish_entries).
// `abandoned(polls)` says, while waiting, that an earlier span will never be published (its
// ring failed); `polls` counts the failed polls so far.
template <class C, class Abandoned>
DOORBELL_HD Publish publish_in_order(C& ctx, uint64_t* ready, uint64_t base, uint64_t next, const char* what, Abandoned abandoned) {
  if (ctx.atomic_cas(exec::gpu_scope, ready, base, next) == base) return Publish::kOk;
  return publish_after_wait(ctx, ready, base, next, what, abandoned);
}

}  // namespace doorbell::sync
