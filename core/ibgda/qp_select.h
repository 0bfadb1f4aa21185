// Which QP carries a request to `pe` (SPEC §5). NVSHMEM lays QPs out QP-major and picks the
// next QP of a group round-robin; DeepEP lays them out PE-major. A caller may also pin the
// choice to its warp or CTA, or to an explicit index.
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
  enum Kind : uint8_t { kAny, kByWarp, kByCta, kIndex } kind = kAny;
  uint32_t index = 0;
};

// With several NICs a peer's group holds num_rc_per_pe QPs per NIC, NICs interleaved (group
// member g lives on NIC g % num_devices, as NVSHMEM assigns them), so consecutive ids spread
// over the NICs.
DOORBELL_HD uint32_t qp_slot(const DevState& st, uint32_t id, uint32_t pe) {
  const uint32_t nrc = rcs_per_peer(st);
  // A mask where the group is a power of two (one QP per peer, the usual case): a division
  // per put shows in a CPU-model put, and a GPU's integer division is slower still.
  const uint32_t member = (nrc & (nrc - 1)) == 0 ? id & (nrc - 1) : id % nrc;
  return st.layout == QpLayout::kQpMajor ? member * st.npes + pe : pe * nrc + member;
}

// The slot (layout index) of the main QP a request to `pe` takes.
template <class C>
DOORBELL_HD uint32_t select_slot(C& ctx, const DevState& st, uint32_t pe, QpSelector sel = {}) {
  uint32_t id = 0;
  switch (sel.kind) {
    case QpSelector::kAny: id = uint32_t(ctx.atomic_add(exec::gpu_scope, st.group_switches, 1)); break;
    case QpSelector::kByWarp: id = ctx.cta() * ctx.warps_per_cta() + ctx.warp(); break;
    case QpSelector::kByCta: id = ctx.cta(); break;
    case QpSelector::kIndex: id = sel.index; break;
  }
  return qp_slot(st, id, pe);
}

template <class C>
DOORBELL_HD const DevQp& select_qp(C& ctx, const DevState& st, uint32_t pe, QpSelector sel = {}) {
  return st.qps[select_slot(ctx, st, pe, sel)];
}

}  // namespace doorbell::ibgda
