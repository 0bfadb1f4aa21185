// The memory orderings the IBGDA paths rely on, one named function per race it prevents
// (rdma-core's udma_barrier.h habit), built on core/sync/ordering.h's publish / ring pair:
// protocol code calls these, never a bare fence. A test may drop one (Options::plant.drop,
// host builds only) to check that the weak memory mode finds the race it guards against;
// on a GPU build the plants compile away.
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/ibgda/state.h"
#include "core/sync/ordering.h"

namespace doorbell::ibgda {

enum Ordering : uint32_t {
  kOrderWqesBeforeReady = 1u << 0,    // submit: WQE bytes GPU-visible before ready_head moves
  kOrderWqesBeforeDbr = 1u << 1,      // post_send: WQEs NIC-visible before the DBR covers them
  kOrderDbrBeforeDoorbell = 1u << 2,  // post_send: DBR NIC-visible before the doorbell
  kOrderCtrlLast = 1u << 3,           // publish_wqe: control word stored after the segments
  kOrderCqeAcquire = 1u << 4,         // poll_cq: CQE read with acquire
  kOrderProxyFence = 1u << 5,         // CPU proxy: the fence before the proxy_prod release store
  kOrderProxyPublish = 1u << 6,       // CPU proxy: fence and release both (a relaxed proxy_prod)
  kOrderCompletionRelease = 1u << 7,  // poll_cq: a fence after the CQE's acquire load, before cons_idx is raised
};
inline constexpr uint32_t kOrderingCount = 8;

// Host-side name of one Ordering bit ("wqes_before_ready", ...), for tests and scenarios.
inline const char* ordering_name(uint32_t bit) {
  constexpr const char* kNames[kOrderingCount] = {"wqes_before_ready", "wqes_before_dbr", "dbr_before_doorbell",
                                                  "ctrl_last",         "cqe_acquire",     "proxy_fence",
                                                  "proxy_publish",     "completion_release"};
  for (uint32_t i = 0; i < kOrderingCount; ++i)
    if (bit == (1u << i)) return kNames[i];
  return "?";
}

DOORBELL_HD bool dropped(const Options& o, Ordering x) {
#ifdef __CUDA_ARCH__
  (void)o, (void)x;
  return false;
#else
  return (o.plant.drop & x) != 0;
#endif
}

// Another CTA may win the ready_head race and ring for these WQEs: their bytes must be
// visible GPU-wide before ready_head covers them.
template <class C>
DOORBELL_HD void publish_wqes(C& ctx, const Options& o) {
  sync::publish_entries(ctx, dropped(o, kOrderWqesBeforeReady));
}

// A fence wide enough for the NIC's reads of the WQ ring and the DBR: GPU scope when they
// are in GPU memory (the NIC reads them through the GPU's L2), else system scope.
template <class C>
DOORBELL_HD void fence_for_nic(C& ctx, const Options& o) {
  if (o.nic_buf_on_gpumem) ctx.fence(exec::gpu_scope);
  else ctx.fence(exec::system_scope);
}

// The NIC may read the DBR at any time (it re-reads it while it drains the ring), so every
// WQE the DBR will cover must reach it first. Cumulative: covers WQEs other threads wrote,
// which this thread has only seen through ready_head. When the DBR covers none but the
// ringer's own (`others` false), its publish_wqes fence already put them ahead of the DBR
// store — if that fence reaches the NIC: with NIC buffers in host memory it is too narrow.
template <class C>
DOORBELL_HD void wqes_before_dbr(C& ctx, const Options& o, bool others) {
  if (!others && o.nic_buf_on_gpumem) return;
  if (!dropped(o, kOrderWqesBeforeDbr)) fence_for_nic(ctx, o);
}

// Ring the BlueFlame doorbell. The MMIO is not ordered after plain stores on Hopper:
// without the fence the NIC may take the doorbell, read the old DBR and go idle.
template <class C>
DOORBELL_HD void ring_nic_doorbell(C& ctx, const Options& o, uint64_t* bf, uint64_t value) {
  sync::ring_doorbell(ctx, [&o](C& c) { fence_for_nic(c, o); }, bf, value, dropped(o, kOrderDbrBeforeDoorbell));
}

// CPU-handler variant: the host proxy reads WQEs once it sees proxy_prod move.
template <class C>
DOORBELL_HD void publish_to_proxy(C& ctx, const Options& o, uint64_t* proxy_prod, uint64_t upto) {
  if (dropped(o, kOrderProxyPublish)) {
    ctx.store(exec::system_scope, exec::relaxed, proxy_prod, upto);
    return;
  }
  if (!dropped(o, kOrderProxyFence)) ctx.fence(exec::system_scope);
  ctx.store(exec::system_scope, exec::release, proxy_prod, upto);
}

// The CQE's last 8 bytes, read with acquire: data the NIC landed before writing the CQE
// (READ payloads, fetched atomic results in the ibuf) is then seen by later plain loads.
template <class C>
DOORBELL_HD uint64_t read_cqe_tail(C& ctx, const Options& o, const uint64_t* tail) {
  if (dropped(o, kOrderCqeAcquire)) return ctx.load(exec::system_scope, exec::relaxed, tail);
  return ctx.load(exec::system_scope, exec::acquire, tail);
}
// ... or, when the CQE came after `polls` relaxed re-reads, a fence once it did.
template <class C>
DOORBELL_HD void cqe_acquired(C& ctx, const Options& o, uint64_t polls) {
  if (!dropped(o, kOrderCqeAcquire)) exec::poll_acquired(ctx, exec::system_scope, polls);
}
// The poller then raises cons_idx for threads that read what the NIC landed (a fetch's
// result) once they see it: the raise must release what the poller acquired. After relaxed
// polls cqe_acquired's fence does; after the acquire load alone, a GPU fence (PTX has no
// causality through a relaxed atomic: the NIC -> poller -> reader chain is WRC).
template <class C>
DOORBELL_HD void completion_released(C& ctx, const Options& o, uint64_t polls) {
  if (polls == 0 && !dropped(o, kOrderCqeAcquire) && !dropped(o, kOrderCompletionRelease)) ctx.fence(exec::gpu_scope);
}

}  // namespace doorbell::ibgda
