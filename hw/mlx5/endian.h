// Big-endian field types for mlx5 wire formats. Each is a byte array (alignment 1), so a
// struct of them has exactly the hardware layout, and loads/stores are explicit. Host and
// device code share these.
#pragma once

#include <cstdint>

#include "base/config.h"

namespace doorbell::mlx5 {

// Loads and stores go through memcpy + a byte swap on the host (one movbe/bswap each), and
// byte by byte on the device, where unaligned wide accesses would fault.
template <class T>
DOORBELL_HD T load_be(const uint8_t* b) {
#if defined(__CUDA_ARCH__)
  T v = 0;
  for (unsigned i = 0; i < sizeof(T); ++i) v = T((v << 8) | b[i]);
  return v;
#else
  T v;
  __builtin_memcpy(&v, b, sizeof(T));
  if constexpr (sizeof(T) == 2) return T(__builtin_bswap16(v));
  if constexpr (sizeof(T) == 4) return T(__builtin_bswap32(v));
  if constexpr (sizeof(T) == 8) return T(__builtin_bswap64(v));
#endif
}

template <class T>
DOORBELL_HD void store_be(uint8_t* b, T v) {
#if defined(__CUDA_ARCH__)
  for (int i = int(sizeof(T)) - 1; i >= 0; --i) {
    b[i] = uint8_t(v);
    v = T(v >> 8);
  }
#else
  if constexpr (sizeof(T) == 2) v = T(__builtin_bswap16(v));
  if constexpr (sizeof(T) == 4) v = T(__builtin_bswap32(v));
  if constexpr (sizeof(T) == 8) v = T(__builtin_bswap64(v));
  __builtin_memcpy(b, &v, sizeof(T));
#endif
}

// A little-endian store of a word computed whole (segments built as words: wqe.h).
template <class T>
DOORBELL_HD void store_le(uint8_t* b, T v) {
#if defined(__CUDA_ARCH__)
  for (unsigned i = 0; i < sizeof(T); ++i) b[i] = uint8_t(v >> (8 * i));
#else
  __builtin_memcpy(b, &v, sizeof(T));
#endif
}

struct Be16 {
  uint8_t b[2];
  DOORBELL_HD uint16_t get() const { return load_be<uint16_t>(b); }
  DOORBELL_HD void set(uint16_t v) { store_be<uint16_t>(b, v); }
};

struct Be32 {
  uint8_t b[4];
  DOORBELL_HD uint32_t get() const { return load_be<uint32_t>(b); }
  DOORBELL_HD void set(uint32_t v) { store_be<uint32_t>(b, v); }
};

struct Be64 {
  uint8_t b[8];
  DOORBELL_HD uint64_t get() const { return load_be<uint64_t>(b); }
  DOORBELL_HD void set(uint64_t v) { store_be<uint64_t>(b, v); }
};

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

// Byte swaps for values that travel as raw words (doorbells, CQE words read as integers).
DOORBELL_HD constexpr uint16_t bswap16(uint16_t v) { return uint16_t((v >> 8) | (v << 8)); }
DOORBELL_HD constexpr uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
DOORBELL_HD constexpr uint64_t bswap64(uint64_t v) {
  return (uint64_t(bswap32(uint32_t(v))) << 32) | bswap32(uint32_t(v >> 32));
}

}  // namespace doorbell::mlx5
