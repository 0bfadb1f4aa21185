// When a submitter rings the doorbell (SPEC §4), one rule for IBGDA's send path
// (core/ibgda/queue.h) and the generic publish ring (publish_ring.h). Submissions publish
// in reservation order; the one that has just published up to `next`, with the posted
// index at `prod`, rings iff
//  (a) nobody else is in flight (the reservation head is `next`): without it the last
//      WQEs are never posted and the program hangs;
//  (b) the unposted span [prod, next) crosses a `batch` boundary;
//  (c) it fills a batch by itself (`n`).
// (NVSHMEM tests (b) on the submission's own span instead. With failover that leaves
// published WQEs unposted behind a reservation that a failed QP abandons, and the GPU
// benchmark showed no gain from it.)
#pragma once

#include <cstdint>

#include "base/config.h"

namespace doorbell::sync {

DOORBELL_HD constexpr bool must_ring(uint64_t prod, uint64_t next, uint64_t n, uint64_t resv_head, uint64_t batch,
                                     bool plant_no_idle = false) {
  const bool idle = !plant_no_idle && resv_head == next;
  const bool crosses = (prod & ~(batch - 1)) != (next & ~(batch - 1));
  return idle || crosses || n >= batch;
}

}  // namespace doorbell::sync
