// Device memory and CUDA IPC as the CPU model sees them: cudaMalloc / cudaFree in a synthetic
// per-GPU address space, and cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle.
// Addresses are reused the way a real allocator reuses them — a freed range goes to the next
// allocation that fits (lowest address first), so free + malloc of the same size returns the
// same address — while every allocation gets a new, never-reused buffer id
// (CU_POINTER_ATTRIBUTE_BUFFER_ID). That is the scenario that makes a stale IPC mapping
// dangerous: same address, another allocation. As in CUDA, an exported allocation freed by its
// owner stays alive (its bytes too) until every importer closed its mapping. Allocations have
// real backing bytes, or none (`phantom`: sizes only, for multi-GB runs). Misuse (an unknown
// address, a handle whose allocation is gone) throws std::invalid_argument naming what it got.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/cuda_ipc.h"
#include "hw/mem/line_aligned.h"
#include "models/cost_model.h"

namespace doorbell::gpu_sim {

class AgentCtx;

// Which allocation a byte lies in: its buffer id, and whether it is still allocated (false:
// freed by its owner, kept alive by an open IPC mapping).
struct AllocInfo {
  uint64_t buffer_id;
  bool live;
};

class DeviceMemory {
 public:
  static constexpr uint64_t kVaBase = 0x7f00'0000'0000;  // GPU g's space starts at kVaBase + (g << 40)
  static constexpr uint64_t kGranule = 2 << 20;          // address ranges are reserved in 2 MiB units

  // `costs` prices the charged ipc_open (ipc_open_ns).
  explicit DeviceMemory(uint32_t gpus, models::CostModel costs = {});
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // cudaMalloc: a device address of `bytes` on `gpu` (0 for 0 bytes); phantom: no backing bytes.
  [[nodiscard]] uint64_t malloc(uint32_t gpu, uint64_t bytes, bool phantom = false);
  // cudaFree: the range goes back for reuse; the bytes live on while an IPC mapping is open.
  // 0 is a no-op; an address that is not a live allocation's base throws.
  void free(uint32_t gpu, uint64_t va);
  // The bytes behind `va` of a live allocation (the owner's own kernels and copies); null if phantom.
  [[nodiscard]] uint8_t* host_ptr(uint32_t gpu, uint64_t va);
  // cuIpcGetMemHandle: base, size and buffer id of the live allocation containing `va`.
  [[nodiscard]] p2p::IpcHandle ipc_get_handle(uint32_t gpu, uint64_t va) const;
  // cuIpcOpenMemHandle: maps the allocation with the handle's buffer id and returns its bytes
  // (null if phantom); throws once that allocation was freed and its last mapping closed.
  [[nodiscard]] uint8_t* ipc_open(const p2p::IpcHandle& h);
  // The same, charging the opening agent ipc_open_ns of simulated time.
  [[nodiscard]] uint8_t* ipc_open(AgentCtx& a, const p2p::IpcHandle& h);
  double ipc_open_cost_ns() const { return costs_.ipc_open_ns; }
  // cuIpcCloseMemHandle, by the pointer ipc_open returned; the last close of a freed
  // allocation destroys it.
  void ipc_close(uint8_t* mapping);
  // The same by handle (phantom mappings have no pointer).
  void ipc_close(const p2p::IpcHandle& h);

  // For checkers: the allocation `p` lies in, live or freed-but-mapped; nullopt otherwise.
  [[nodiscard]] std::optional<AllocInfo> allocation_of(const uint8_t* p) const;
  uint64_t ipc_opens() const { return opens_; }  // every ipc_open, ~ipc_open_ns each
  uint64_t open_mappings() const;                // mappings not yet closed
  size_t allocations() const { return allocs_.size(); }  // live or kept alive by a mapping

 private:
  struct Alloc {
    uint64_t id;  // the buffer id
    uint64_t base, size, reserved;  // reserved: size rounded up to kGranule
    bool live = true;
    uint32_t mappings = 0;
    mem::LineArray<> bytes;  // null: phantom
  };
  struct Space {
    uint64_t top;                          // next never-used address
    std::map<uint64_t, uint64_t> holes;    // freed ranges: base -> length (coalesced)
    std::map<uint64_t, uint64_t> live;     // live allocations: base -> buffer id
  };

  Space& space(uint32_t gpu, const char* op);
  const Alloc* live_at(uint32_t gpu, uint64_t va) const;  // the live allocation containing va
  void unmap(uint64_t id, const char* op);
  void destroy(uint64_t id);

  models::CostModel costs_;
  std::vector<Space> spaces_;
  std::map<uint64_t, Alloc> allocs_;               // by buffer id
  std::map<const uint8_t*, uint64_t> by_bytes_;   // backing start -> buffer id
  uint64_t next_id_ = 1, opens_ = 0;
};

}  // namespace doorbell::gpu_sim
