// A completion queue of the NIC model: a ring of 2^log_size 64-byte CQEs in modelled
// memory with the owner bit, or collapsed (every CQE written to slot 0, as IBGDA's send CQs
// are created). A normal CQ that would overwrite an unconsumed CQE (per its doorbell
// record's consumer index) overruns unless created with `oi`: the CQE is dropped and the CQ
// marked in error. That holds for collapsed CQs too: slot 0 is reused, but the consumer
// index still counts, so a collapsed CQ nobody advances must be created with `oi`.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

#include "hw/mem/observer.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/cqe.h"

namespace doorbell::mock_nic {

struct Cq {
  uint32_t cqn = 0;
  uint32_t log_size = 0;
  bool collapsed = false;
  bool overrun_ignore = false;             // cqc.oi: never check the consumer index
  uint64_t buf_va = 0, dbr_va = 0;
  mlx5::Cqe64* ring = nullptr;             // pinned translation of buf_va
  mlx5::CqDoorbellRecord* dbr = nullptr;   // pinned translation of dbr_va
  uint64_t pi = 0;                         // CQEs produced so far
  bool overrun = false;
  uint64_t cqes_written = 0, errors_written = 0;
  // Told the address of each CQE's last 8 bytes once written (time models; may be empty).
  const std::function<void(const void*)>* on_write = nullptr;
  mem::Observer* const* observer = nullptr;  // the NIC's memory observer slot

  // Fault hook: completions become visible `delay` engine actions after they are produced.
  uint64_t delay = 0;
  struct Pending {
    uint64_t due;
    mlx5::Completion c;
  };
  std::deque<Pending> pending;

  // Produce a completion now (or queue it while a delay is set).
  // False when the CQ overran (now or before): the completion is lost.
  bool post(const mlx5::Completion& c, uint64_t now) {
    if (delay == 0 && pending.empty()) return write(c);
    if (observer != nullptr && *observer != nullptr) (*observer)->device_release(this);  // what the CQE announces comes first
    pending.push_back({now + delay, c});
    return !overrun;
  }
  // Write delayed completions whose time has come; returns how many.
  uint32_t drain(uint64_t now);
  // Inline: the engine's signaled WRITEs write one each, and out of line the Completion went
  // through memory (zeroed, filled, read back) on every call.
  bool write(const mlx5::Completion& c) {
    if (overrun) return false;
    const uint32_t n = 1u << log_size;
    if (!overrun_ignore) {
      const uint32_t ci = dbr->set_ci.get() & 0xffffff;
      if (((uint32_t(pi) - ci) & 0xffffff) >= n) {
        overrun = true;  // hardware raises a CQ error event; nothing more is written
        return false;
      }
    }
    const mlx5::CqeWords q = mlx5::cqe_words(c, pi, log_size);
    mlx5::Cqe64* slot = mlx5::cqe_slot(ring, pi, log_size, collapsed);
    if (observer != nullptr && *observer != nullptr) (*observer)->device_write(slot, sizeof *slot, "CQE", pi);
    // Word by word, the one holding op_own last with release order: a poller that sees it
    // sees the rest. (As atomics, so that the compiler keeps them eight plain stores: from an
    // array it made them a `rep stos` and a `rep movs`.)
    auto* d = reinterpret_cast<uint64_t*>(slot);
    auto put = [d](int k, uint64_t v) { std::atomic_ref<uint64_t>(d[k]).store(v, std::memory_order_relaxed); };
    put(0, 0), put(1, 0), put(2, 0), put(3, 0), put(4, q.w4), put(5, q.w5), put(6, q.w6);
    std::atomic_ref<uint64_t>(d[7]).store(q.w7, std::memory_order_release);
    if (on_write != nullptr && *on_write) (*on_write)(d + 7);
    ++pi;
    ++cqes_written;
    if (c.error()) ++errors_written;
    return true;
  }
};

}  // namespace doorbell::mock_nic
