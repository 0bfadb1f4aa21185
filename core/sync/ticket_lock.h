// A ticket lock written against the execution context: FIFO fairness, one atomic to take a
// ticket, a bounded wait for its turn. Runs unchanged in the CPU model and on a GPU.
#pragma once

#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::sync {

struct TicketLock {
  uint64_t next = 0;     // next ticket to hand out
  uint64_t serving = 0;  // ticket allowed in
  bool plant_relaxed = false;  // planted bug (tests): release and acquire dropped
};

// Take a ticket and wait for it; *ticket is needed to release.
template <class C>
DOORBELL_HD exec::WaitResult ticket_acquire(C& ctx, TicketLock* l, uint64_t* ticket) {
  const uint64_t t = ctx.atomic_add(exec::gpu_scope, &l->next, 1);
  *ticket = t;
  if (l->plant_relaxed) {
    while (ctx.load(exec::gpu_scope, exec::relaxed, &l->serving) != t)
      if (!ctx.spin("ticket_lock: serving == my ticket", &l->serving, t)) return exec::WaitResult::kTimeout;
    return exec::WaitResult::kOk;
  }
  // Acquire: the previous holder's critical section is seen whole.
  return exec::wait_until(ctx, "ticket_lock: serving == my ticket", &l->serving, [t](uint64_t s) { return s == t; });
}

template <class C>
DOORBELL_HD void ticket_release(C& ctx, TicketLock* l, uint64_t ticket) {
  // Release order publishes the critical section's writes before the next holder enters.
  if (l->plant_relaxed) ctx.store(exec::gpu_scope, exec::relaxed, &l->serving, ticket + 1);
  else ctx.store(exec::gpu_scope, exec::release, &l->serving, ticket + 1);
}

}  // namespace doorbell::sync
