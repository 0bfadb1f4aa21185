// The host's monotonic clock in nanoseconds, for profiles of host-side loops (the verbs
// shim's engine, the CUDA Dma's copies).
#pragma once

#include <chrono>
#include <cstdint>

namespace doorbell {

inline uint64_t steady_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace doorbell
