// Address space without memory behind it until committed, in cuMemAddressReserve /
// cuMemMap's shape: what the symmetric heap (core/heap) asks of whoever owns the address space,
// so the protocol includes no OS header (the process's own: hw/mem/os_va_space.h).
#pragma once

#include <cstdint>

#include "base/status.h"

namespace doorbell::base {

class VaSpace {
 public:
  virtual ~VaSpace() = default;
  // A range no access reaches until commit makes a piece of it usable.
  virtual Result<uint8_t*> reserve(uint64_t bytes) = 0;
  virtual Status commit(uint8_t* at, uint64_t bytes) = 0;
  virtual void release(uint8_t* base, uint64_t bytes) = 0;
};

}  // namespace doorbell::base
