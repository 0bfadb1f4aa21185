// The two orderings every publish-then-ring protocol here relies on (the IBGDA send path,
// core/ibgda/ordering.h, and the generic publish ring, publish_ring.h), each named for the
// race it prevents, as rdma-core's udma_barrier.h names its barriers. A caller may drop one
// (tests of the weak memory mode) to check that the race is found.
#pragma once

#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::sync {

// Entries a producer wrote may be rung for by another producer — one in another CTA that
// wins the race to publish — so they must be visible GPU-wide before `ready` covers them.
template <class C>
DOORBELL_HD void publish_entries(C& ctx, bool drop = false) {
  if (!drop) ctx.fence(exec::gpu_scope);
}

// The consumer acts on the doorbell at once and reads what it announces: everything
// published must reach the consumer first. `reach(ctx)` fences wide enough for it (GPU
// scope for a NIC reading GPU memory through L2, system scope for host memory). The
// doorbell itself is an MMIO store, neither merged nor reordered with other MMIO.
template <class C, class Reach>
DOORBELL_HD void ring_doorbell(C& ctx, Reach reach, uint64_t* doorbell, uint64_t value, bool drop_fence = false) {
  if (!drop_fence) reach(ctx);
  ctx.mmio_store64(doorbell, value);
}

}  // namespace doorbell::sync
