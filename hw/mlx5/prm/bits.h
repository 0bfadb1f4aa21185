// Reading and writing PRM command fields. Layouts (layouts.h) are declared the way the PRM
// tables read: one `u8` per bit, fields named, reserved fields named by their bit offset, so
// the compiler derives every offset and width (offsetof / sizeof). Fields are big-endian
// within 32-bit words (bit 0 = MSB of word 0); a field never straddles a word, except 64-bit
// fields, which are word-aligned. Setting a value that does not fit its field is a bug and
// stops the program with the field's name instead of silently masking it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "hw/mlx5/endian.h"

namespace doorbell::prm {

using u8 = uint8_t;  // one per bit in layout declarations

struct Field {
  uint32_t bit_off;
  uint32_t bits;
};

// A zeroed command buffer sized by its layout.
template <class L>
using Buf = std::array<uint8_t, sizeof(L) / 8>;

template <Field F>
constexpr bool well_formed() {
  return F.bits == 64 ? F.bit_off % 32 == 0 : (F.bits >= 1 && F.bits <= 32 && F.bit_off % 32 + F.bits <= 32);
}

[[noreturn]] inline void field_overflow(const char* name, uint32_t bits, uint64_t v) {
  std::fprintf(stderr, "prm: value 0x%llx does not fit %s (%u bits)\n", (unsigned long long)v, name, bits);
  std::abort();
}

template <Field F>
inline void set(void* buf, uint64_t v, const char* name) {
  static_assert(well_formed<F>(), "PRM field straddles a 32-bit word");
  auto* p = static_cast<uint8_t*>(buf) + F.bit_off / 32 * 4;
  if constexpr (F.bits == 64) {
    mlx5::store_be<uint64_t>(p, v);
  } else {
    if (F.bits < 64 && (v >> F.bits) != 0) field_overflow(name, F.bits, v);
    constexpr uint32_t shift = 32 - F.bit_off % 32 - F.bits;
    constexpr uint32_t mask = uint32_t((F.bits == 32 ? 0xffffffffull : ((1ull << F.bits) - 1)) << shift);
    const uint32_t w = mlx5::load_be<uint32_t>(p);
    mlx5::store_be<uint32_t>(p, (w & ~mask) | ((uint32_t(v) << shift) & mask));
  }
}

template <Field F>
inline uint64_t get(const void* buf) {
  static_assert(well_formed<F>(), "PRM field straddles a 32-bit word");
  const auto* p = static_cast<const uint8_t*>(buf) + F.bit_off / 32 * 4;
  if constexpr (F.bits == 64) {
    return mlx5::load_be<uint64_t>(p);
  } else {
    constexpr uint32_t shift = 32 - F.bit_off % 32 - F.bits;
    return (mlx5::load_be<uint32_t>(p) >> shift) & (F.bits == 32 ? 0xffffffffull : ((1ull << F.bits) - 1));
  }
}

// Byte-array fields (GIDs, MACs): the bytes in wire order.
template <Field F>
inline uint8_t* bytes(void* buf) {
  static_assert(F.bit_off % 8 == 0 && F.bits % 8 == 0);
  return static_cast<uint8_t*>(buf) + F.bit_off / 8;
}

}  // namespace doorbell::prm

// The field `fld` (a member path such as qpc.primary_address_path.rlid) of layout `L`.
#define DB_PRM_FIELD(L, fld)                                                          \
  (::doorbell::prm::Field{static_cast<uint32_t>(offsetof(::doorbell::prm::L, fld)), \
                          static_cast<uint32_t>(sizeof(static_cast<::doorbell::prm::L*>(nullptr)->fld))})
#define DB_SET(L, buf, fld, v) ::doorbell::prm::set<DB_PRM_FIELD(L, fld)>((buf), (v), #L "." #fld)
#define DB_GET(L, buf, fld) ::doorbell::prm::get<DB_PRM_FIELD(L, fld)>(buf)
#define DB_BYTES(L, buf, fld) ::doorbell::prm::bytes<DB_PRM_FIELD(L, fld)>(buf)
