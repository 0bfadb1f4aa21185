// A protocol position of the fetch path, checked at every move of ibuf_tail: a fetch slot is
// freed only once the fetch that lands in it has completed (its owner waits for the CQE, reads
// the result, then frees its own slot, in slot order). A fetch still in the NIC — issued and
// not retired, or written and not yet fetched — whose response lands in a slot just freed
// means the slot was freed under its owner: a later fetch may take it and the two results
// collide, which shows (if ever) only as a fetch-add returning a value twice. Checked where
// stores land when made (SC): in the weak model a release is seen before it lands.
#include <algorithm>
#include <cstring>

#include "hw/mock_nic/qp_step.h"
#include "hw/mock_nic/wqe_check.h"
#include "sim/ibgda/model_world.h"

namespace doorbell::ibgda {

std::string ModelWorld::ibuf_freed_early(uint32_t p, const DevQp& q, uint64_t from, uint64_t to) const {
  if (q.ibuf == nullptr || q.ibuf_nslots == 0) return {};
  const mock_nic::Qp& nq = *nic_of(p, q).qp(q.qpn);
  if (nq.state == mock_nic::QpState::kErr) return {};  // its WQEs are flushed: nothing will land
  const auto base = reinterpret_cast<uint64_t>(q.ibuf);
  // The freed slot a local address falls in (its index in [from, to)), or none.
  auto freed = [&](uint64_t addr, uint64_t* slot) {
    if (addr < base + kIbufSlotBytes || addr >= base + uint64_t(q.ibuf_nslots + 1) * kIbufSlotBytes) return false;
    const uint64_t pos = (addr - base) / kIbufSlotBytes - 1;
    for (uint64_t k = from; k < to && k < from + q.ibuf_nslots; ++k)
      if ((k & (q.ibuf_nslots - 1)) == pos) return *slot = k, true;
    return false;
  };
  auto report = [&](uint64_t slot, uint64_t wqe, const char* where) {
    return "ibuf slot " + std::to_string(slot) + " freed (ibuf_tail " +
           std::to_string(from) + " -> " + std::to_string(to) + ") while WQE " + std::to_string(wqe) + ", a fetch landing in it, was " +
           where + ": a slot is freed only by its owner, in order, after its result was read";
  };
  uint64_t slot = 0;
  for (const mock_nic::Inflight& e : nq.inflight)
    for (const auto& s : e.scatter)
      if (freed(s.addr, &slot)) return report(slot, e.wqe_idx, "still in the NIC");
  // Written and not yet fetched by the NIC: read from the ring as the NIC will.
  const uint64_t ring = (nq.sq_mask + 1) * mlx5::kWqebb;
  alignas(16) std::byte w[mlx5::kMaxDs * mlx5::kDsBytes];
  for (uint64_t i = nq.head; i < q.mv->ready_head;) {
    mlx5::WqeCtrlSeg ctrl;
    std::memcpy(&ctrl, nq.sq + (i & nq.sq_mask) * mlx5::kWqebb, sizeof ctrl);
    const uint32_t nbb = mock_nic::wqe_wqebbs(ctrl.ds(), nq.attr.max_ds);
    const uint64_t off = (i & nq.sq_mask) * mlx5::kWqebb, len = uint64_t(nbb) * mlx5::kWqebb;
    std::memcpy(w, nq.sq + off, std::min(len, ring - off));
    if (off + len > ring) std::memcpy(w + (ring - off), nq.sq, len - (ring - off));
    mock_nic::WqeView v;
    if (!mock_nic::check_wqe(w, q.qpn, uint16_t(i), false, nq.attr.max_ds, &v, q.dci).failed() &&
        (v.op == mlx5::WqeOpcode::kRdmaRead || v.atomic_size != 0))
      for (uint32_t k = 0; k < v.npieces; ++k)
        if (v.pieces[k].inline_data == nullptr && freed(v.pieces[k].addr, &slot)) return report(slot, i, "not yet fetched by the NIC");
    i += nbb;
  }
  return {};
}

}  // namespace doorbell::ibgda
