// What a CUDA IPC handle carries (cuIpcGetMemHandle's handle, reduced to its meaning): shared
// by the GPU model that hands handles out (hw/gpu_sim/device_memory.h) and the P2P protocol
// that caches what they open (core/p2p/ipc_cache.h).
#pragma once

#include <cstdint>

namespace doorbell::p2p {

struct IpcHandle {
  uint64_t base = 0, size = 0;  // the allocation the address lies in, in the owner's space
  uint64_t buffer_id = 0;       // which allocation: differs after free + re-allocation
};

}  // namespace doorbell::p2p
