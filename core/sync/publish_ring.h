// A multi-producer ring with a CAS-ordered publish and batched doorbells: IBGDA's submit path
// (SPEC §4) on a generic ring, small enough to test the execution models with. Warps reserve
// slots (resv), write them, publish in reservation order (publish_order.h), and ring the
// consumer's doorbell by the submit rule (submit_rule.h). A consumer drains
// up to the doorbell value and advances `cons`; producers wait for room and, to finish
// (quiet), for `cons` to cover their slots.
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/sync/ordering.h"
#include "core/sync/publish_order.h"
#include "core/sync/submit_rule.h"

namespace doorbell::sync {

struct PublishRing {
  uint64_t resv = 0;            // next slot to reserve
  uint64_t ready = 0;           // every slot below is written
  uint64_t prod = 0;            // posted to the consumer
  uint64_t cons = 0;            // consumed
  uint64_t post_lock = 0;       // serialises prod update + doorbell
  uint64_t doorbell = 0;        // the consumer's doorbell register (an MMIO target)
  uint64_t* slots = nullptr;
  uint64_t nslots = 0;          // power of two
  uint64_t batch = 1;           // num_requests_in_batch, power of two
  bool plant_no_idle_doorbell = false;  // planted bug: drop rule (a)
  bool plant_no_publish_fence = false;  // planted bug: slots not made GPU-visible before `ready`
  bool plant_no_doorbell_fence = false; // planted bug: slots not made visible before the doorbell
};

// What a producer writes to slot index i, whoever it is: the consumer checks it.
DOORBELL_HD constexpr uint64_t ring_payload(uint64_t i) { return i * 0x9E3779B97F4A7C15ull + 1; }

template <class C>
DOORBELL_HD exec::WaitResult ring_post(C& ctx, PublishRing* r, uint64_t upto) {
  while (ctx.atomic_cas(exec::gpu_scope, &r->post_lock, 0, 1) != 0)
    if (!ctx.spin("ring_post: post_lock", &r->post_lock, 1)) return exec::WaitResult::kTimeout;
  const uint64_t old = ctx.atomic_max(exec::gpu_scope, &r->prod, upto);
  if (upto > old) ring_doorbell(ctx, [](C& c) { c.fence(exec::system_scope); }, &r->doorbell, upto, r->plant_no_doorbell_fence);
  ctx.store(exec::gpu_scope, exec::release, &r->post_lock, 0);
  return exec::WaitResult::kOk;
}

// Warp-collective: every lane of the warp calls it; lanes [0, n) each write one slot.
// *end receives the index after the warp's last slot.
template <class C>
DOORBELL_HD exec::WaitResult ring_produce(C& ctx, PublishRing* r, uint64_t n, uint64_t* end) {
  using exec::gpu_scope;
  uint64_t base = 0;
  exec::WaitResult res = exec::WaitResult::kOk;
  if (ctx.lane() == 0) {
    base = ctx.atomic_add(gpu_scope, &r->resv, n);
    // Room: the slot base + n - nslots must have been consumed.
    res = exec::wait_until(ctx, "ring_produce: room (cons)", &r->cons,
                           [&](uint64_t c) { return c + r->nslots >= base + n; });
  }
  base = ctx.shfl(base, 0);
  if (ctx.shfl(uint64_t(res), 0) != uint64_t(exec::WaitResult::kOk)) return exec::WaitResult::kTimeout;
  for (uint64_t i = ctx.lane(); i < n; i += ctx.warp_size())
    ctx.store(gpu_scope, exec::relaxed, &r->slots[(base + i) & (r->nslots - 1)], ring_payload(base + i));
  publish_entries(ctx, r->plant_no_publish_fence);
  ctx.syncwarp();
  const uint64_t next = base + n;
  if (ctx.lane() == 0) {
    // Publish in reservation order: only the warp whose base equals `ready` may advance it.
    if (publish_in_order(ctx, &r->ready, base, next, "ring_produce: ready == base", [](uint64_t) { return false; }) != Publish::kOk)
      res = exec::WaitResult::kTimeout;
    if (res == exec::WaitResult::kOk &&
        sync::must_ring(ctx.load(gpu_scope, exec::relaxed, &r->prod), next, n, ctx.load(gpu_scope, exec::relaxed, &r->resv), r->batch,
                        r->plant_no_idle_doorbell))
      res = ring_post(ctx, r, next);
  }
  *end = next;
  return exec::WaitResult(ctx.shfl(uint64_t(res), 0));
}

// Producer's quiet: wait until everything up to `end` was consumed (lane 0 waits).
template <class C>
DOORBELL_HD exec::WaitResult ring_quiet(C& ctx, PublishRing* r, uint64_t end) {
  exec::WaitResult res = exec::WaitResult::kOk;
  if (ctx.lane() == 0)
    res = exec::wait_until(ctx, "ring_quiet: cons >= my end", &r->cons, [end](uint64_t c) { return c >= end; });
  return exec::WaitResult(ctx.shfl(uint64_t(res), 0));
}

// Consumer (one lane): drain `total` slots as doorbells announce them; returns the number of
// slots whose payload was wrong.
template <class C>
DOORBELL_HD uint64_t ring_consume(C& ctx, PublishRing* r, uint64_t total, exec::WaitResult* res) {
  uint64_t cons = 0, bad = 0;
  *res = exec::WaitResult::kOk;
  while (cons < total) {
    uint64_t db = 0;
    *res = exec::wait_until(ctx, "ring_consume: doorbell > cons", &r->doorbell, [&](uint64_t v) {
      db = v;
      return v > cons;
    });
    if (*res != exec::WaitResult::kOk) return bad;
    for (; cons < db; ++cons)
      bad += ctx.load(exec::gpu_scope, exec::relaxed, &r->slots[cons & (r->nslots - 1)]) != ring_payload(cons);
    ctx.store(exec::gpu_scope, exec::release, &r->cons, cons);
  }
  return bad;
}

}  // namespace doorbell::sync
