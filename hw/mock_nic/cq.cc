#include "hw/mock_nic/cq.h"

#include <atomic>
#include <cstring>

namespace doorbell::mock_nic {

uint32_t Cq::drain(uint64_t now) {
  uint32_t n = 0;
  while (!pending.empty() && pending.front().due <= now) {
    write(pending.front().c);
    pending.pop_front();
    ++n;
  }
  return n;
}

bool Cq::write(const Completion& c) {
  if (overrun) return false;
  const uint32_t n = 1u << log_size;
  if (!overrun_ignore) {
    uint32_t ci = dbr->set_ci.get() & 0xffffff;
    if (((uint32_t(pi) - ci) & 0xffffff) >= n) {
      overrun = true;  // hardware raises a CQ error event; nothing more is written
      return false;
    }
  }
  mlx5::Cqe64 cqe;
  std::memset(&cqe, 0, sizeof cqe);
  const bool err = c.opcode == mlx5::CqeOpcode::kReqErr || c.opcode == mlx5::CqeOpcode::kRespErr;
  if (err) {
    auto* e = reinterpret_cast<mlx5::ErrCqe64*>(&cqe);
    e->syndrome = c.syndrome;
    e->vendor_err_synd = c.vendor_syndrome;
    e->s_wqe_opcode_qpn.set((uint32_t(c.wqe_opcode) << 24) | (c.qpn & 0xffffff));
  } else {
    cqe.imm_inval_pkey.set(c.imm);
    cqe.byte_cnt.set(c.byte_cnt);
    // Requester CQEs carry the WQE's opcode in the top byte, as hardware writes them.
    const bool req = c.opcode == mlx5::CqeOpcode::kReq;
    cqe.sop_drop_qpn.set((req ? uint32_t(c.wqe_opcode) << 24 : 0) | (c.qpn & 0xffffff));
  }
  cqe.wqe_counter.set(c.wqe_counter);
  uint8_t op_own = uint8_t(uint8_t(c.opcode) << 4) | mlx5::cqe_owner_for(pi, log_size);
  mlx5::Cqe64* slot = collapsed ? ring : ring + (pi & (n - 1));
  if (observer != nullptr && *observer != nullptr) (*observer)->device_write(slot, sizeof cqe);
  // The owner/opcode byte goes last, with release order: a poller that sees it sees the rest.
  std::memcpy(slot, &cqe, offsetof(mlx5::Cqe64, op_own));
  std::atomic_ref<uint8_t>(slot->op_own).store(op_own, std::memory_order_release);
  if (on_write != nullptr && *on_write) (*on_write)(reinterpret_cast<const uint8_t*>(slot) + 56);
  ++pi;
  ++cqes_written;
  if (err) ++errors_written;
  return true;
}

}  // namespace doorbell::mock_nic
