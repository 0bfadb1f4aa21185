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
  const mlx5::Cqe64 cqe = build_cqe(c, pi, log_size);
  const bool err = c.error();
  mlx5::Cqe64* slot = collapsed ? ring : ring + (pi & (n - 1));
  if (observer != nullptr && *observer != nullptr) (*observer)->device_write(slot, sizeof cqe);
  // The owner/opcode byte goes last, with release order: a poller that sees it sees the rest.
  std::memcpy(slot, &cqe, offsetof(mlx5::Cqe64, op_own));
  std::atomic_ref<uint8_t>(slot->op_own).store(cqe.op_own, std::memory_order_release);
  if (on_write != nullptr && *on_write) (*on_write)(reinterpret_cast<const uint8_t*>(slot) + 56);
  ++pi;
  ++cqes_written;
  if (err) ++errors_written;
  return true;
}

}  // namespace doorbell::mock_nic
