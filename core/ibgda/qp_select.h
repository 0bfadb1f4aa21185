// Which QP carries a request to `pe` (SPEC §5). NVSHMEM lays QPs out QP-major and picks the
// next QP of a pool round-robin; DeepEP lays them out PE-major. A caller may also pin the
// choice to its warp or CTA, or to an explicit index.
//
// Pools, as seed 002 and NVSHMEM 3.5 have them (3.4.5 has none, docs/nvshmem-device-ops.md
// §6): DEFAULT takes the next of each peer's first num_default_rc_per_pe QPs (per NIC) on
// its own counter, ANY the next of all of them on another; each pool is a switch group.
//
// The seed writes the explicit-index case as idx = id + pe. In the QP-major layout that
// aliases (id 1 -> PE 0 is the same slot as id 0 -> PE 1), so it is a bug; here every
// selector maps through the layout: id * npes + pe (QP-major) or pe * nrc + id (PE-major).
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/ibgda/state.h"

namespace doorbell::ibgda {

struct QpSelector {
  enum Kind : uint8_t { kAny, kByWarp, kByCta, kIndex, kDefault } kind = kAny;
  uint32_t index = 0;
};

// A peer's QPs that a pool takes: DEFAULT's first num_default_rc_per_pe per NIC, else all.
DOORBELL_HD uint32_t pool_members(const DevState& st, QpSelector::Kind k) {
  const uint32_t nrc = rcs_per_peer(st);
  if (k != QpSelector::kDefault || st.opt.num_default_rc_per_pe == 0) return nrc;
  const uint32_t d = st.opt.num_default_rc_per_pe * st.num_devices;
  return d < nrc ? d : nrc;
}

// With several NICs a peer's group holds num_rc_per_pe QPs per NIC, NICs interleaved (group
// member g lives on NIC g % num_devices, as NVSHMEM assigns them), so consecutive ids spread
// over the NICs. `members`: how many of the group the id wraps over (a pool's).
DOORBELL_HD uint32_t qp_slot(const DevState& st, uint32_t id, uint32_t pe, uint32_t members = 0) {
  const uint32_t nrc = rcs_per_peer(st), m = members != 0 ? members : nrc;
  // A mask where the group is a power of two (one QP per peer, the usual case): a division
  // per put shows in a CPU-model put, and a GPU's integer division is slower still.
  const uint32_t member = (m & (m - 1)) == 0 ? id & (m - 1) : id % m;
  return st.layout == QpLayout::kQpMajor ? member * st.npes + pe : pe * nrc + member;
}

// The slot (layout index) of the main QP a request to `pe` takes.
template <class C>
DOORBELL_HD uint32_t select_slot(C& ctx, const DevState& st, uint32_t pe, QpSelector sel = {}) {
  uint32_t id = 0;
  switch (sel.kind) {
    case QpSelector::kAny: id = uint32_t(ctx.atomic_add(exec::gpu_scope, st.group_switches + kPoolAny, 1)); break;
    case QpSelector::kDefault: id = uint32_t(ctx.atomic_add(exec::gpu_scope, st.group_switches + kPoolDefault, 1)); break;
    case QpSelector::kByWarp: id = ctx.cta() * ctx.warps_per_cta() + ctx.warp(); break;
    case QpSelector::kByCta: id = ctx.cta(); break;
    case QpSelector::kIndex: id = sel.index; break;
  }
  return qp_slot(st, id, pe, pool_members(st, sel.kind));
}

template <class C>
DOORBELL_HD const DevQp& select_qp(C& ctx, const DevState& st, uint32_t pe, QpSelector sel = {}) {
  return st.qps[select_slot(ctx, st, pe, sel)];
}

}  // namespace doorbell::ibgda
