// Byte ranges of modelled memory, as the memory model and the device models compare them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace doorbell::mem {

// Whether [a, a + alen) and [b, b + blen) share a byte.
inline bool overlaps(uintptr_t a, size_t alen, uintptr_t b, size_t blen) { return a < b + blen && b < a + alen; }
inline bool overlaps(const void* a, size_t alen, const void* b, size_t blen) {
  return overlaps(reinterpret_cast<uintptr_t>(a), alen, reinterpret_cast<uintptr_t>(b), blen);
}

}  // namespace doorbell::mem
