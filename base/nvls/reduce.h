// Element-wise reduction of packs, host and device alike: what the switch does for
// multimem.ld_reduce (and the references tests compare with). 16-bit floats are widened to
// float, combined, and rounded back to nearest-even after every step, so the result depends on
// the order the members are combined in — as it does on the switch (NCCL #1497).
#pragma once

#include <cstdint>
#include <cstring>

#include "base/config.h"
#include "base/nvls/pack.h"

namespace doorbell::nvls {

DOORBELL_HD float bits_to_float(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
DOORBELL_HD uint32_t float_to_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

// bfloat16: the top half of a float; rounding to nearest-even, NaN kept quiet.
DOORBELL_HD float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }
DOORBELL_HD uint16_t float_to_bf16(float f) {
  const uint32_t b = float_to_bits(f);
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu) != 0) return uint16_t((b >> 16) | 0x40);
  return uint16_t((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

// IEEE half: 1 sign, 5 exponent, 10 mantissa bits.
DOORBELL_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));          // inf / NaN
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));     // normal
  if (man == 0) return bits_to_float(sign);                                          // zero
  const float v = float(man) * (1.0f / 16777216.0f);                                 // subnormal: man * 2^-24
  return sign != 0 ? -v : v;
}
DOORBELL_HD uint16_t float_to_f16(float f) {
  const uint32_t b = float_to_bits(f), sign = (b >> 16) & 0x8000;
  const uint32_t absb = b & 0x7fffffffu;
  if (absb >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (absb > 0x7f800000u ? 0x200 : 0));  // inf / NaN
  if (absb >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds beyond 65504: inf
  if (absb < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    const float a = bits_to_float(absb) * 16777216.0f;       // in units of 2^-24
    uint32_t m = uint32_t(a);
    const float rest = a - float(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1))) ++m;
    return uint16_t(sign | m);
  }
  const uint32_t exp = (absb >> 23) - 112, man = absb & 0x7fffff;
  uint32_t h = (exp << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: right
  return uint16_t(sign | h);
}

template <class T>
DOORBELL_HD T combine(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum: return T(a + b);
    case RedOp::kMin: return b < a ? b : a;
    case RedOp::kMax: return a < b ? b : a;
  }
  return a;
}

// One element of type t, its bits in the low bytes of a and b (the rest zero): a op b, in
// the same form. Signed sums wrap (as the switch's integer adds do), computed unsigned; 16-bit
// floats are widened to float, combined and rounded back.
DOORBELL_HD uint64_t combine_bits(DType t, RedOp op, uint64_t a, uint64_t b) {
  switch (t) {
    case DType::kF32: return float_to_bits(combine(op, bits_to_float(uint32_t(a)), bits_to_float(uint32_t(b))));
    case DType::kF64: {
      double x, y;
      memcpy(&x, &a, 8), memcpy(&y, &b, 8);
      x = combine(op, x, y);
      memcpy(&a, &x, 8);
      return a;
    }
    case DType::kF16: return float_to_f16(combine(op, f16_to_float(uint16_t(a)), f16_to_float(uint16_t(b))));
    case DType::kBf16: return float_to_bf16(combine(op, bf16_to_float(uint16_t(a)), bf16_to_float(uint16_t(b))));
    case DType::kI32: return op == RedOp::kSum ? uint32_t(a + b) : uint32_t(combine(op, int32_t(uint32_t(a)), int32_t(uint32_t(b))));
    case DType::kU32: return combine(op, uint32_t(a), uint32_t(b));
    case DType::kI64: return op == RedOp::kSum ? a + b : uint64_t(combine(op, int64_t(a), int64_t(b)));
    case DType::kU64: return combine(op, a, b);
  }
  return a;
}

// acc[i] = acc[i] op in[i] over `bytes` of elements of type t (bytes a multiple of its size).
DOORBELL_HD void reduce_into(DType t, RedOp op, uint8_t* acc, const uint8_t* in, uint32_t bytes) {
  const uint32_t es = dtype_bytes(t);
  for (uint32_t o = 0; o < bytes; o += es) {
    uint64_t a = 0, b = 0;  // little-endian: the element in the low bytes
    memcpy(&a, acc + o, es), memcpy(&b, in + o, es);
    a = combine_bits(t, op, a, b);
    memcpy(acc + o, &a, es);
  }
}

// The same over one pack held as 32-bit words (registers on a GPU): w[i] = w[i] op v[i] for
// the first `bytes` (4, 8 or 16) of the pack.
DOORBELL_HD void reduce_words(DType t, RedOp op, uint32_t (&w)[4], const uint32_t (&v)[4], uint32_t bytes) {
  const uint32_t es = dtype_bytes(t);
  if (es == 8) {  // words i and i + 1
    for (uint32_t i = 0; i < 4; i += 2) {
      if (4 * i >= bytes) continue;
      const uint64_t r = combine_bits(t, op, w[i] | uint64_t(w[i + 1]) << 32, v[i] | uint64_t(v[i + 1]) << 32);
      w[i] = uint32_t(r), w[i + 1] = uint32_t(r >> 32);
    }
    return;
  }
  for (uint32_t i = 0; i < 4; ++i) {
    if (4 * i >= bytes) continue;
    if (es == 2) {
      const uint64_t lo = combine_bits(t, op, w[i] & 0xffff, v[i] & 0xffff), hi = combine_bits(t, op, w[i] >> 16, v[i] >> 16);
      w[i] = uint32_t(lo & 0xffff) | uint32_t(hi << 16);
    } else {
      w[i] = uint32_t(combine_bits(t, op, w[i], v[i]));
    }
  }
}

// A small integer v as an element of type t (unsigned types offset by 64): exact in every type,
// and so are sums of a few — what tests and benchmarks compare against a reference.
inline void put_small(DType t, uint8_t* p, int v) {
  switch (t) {
    case DType::kF32: { const float f = float(v); memcpy(p, &f, 4); break; }
    case DType::kF64: { const double d = v; memcpy(p, &d, 8); break; }
    case DType::kF16: { const uint16_t h = float_to_f16(float(v)); memcpy(p, &h, 2); break; }
    case DType::kBf16: { const uint16_t h = float_to_bf16(float(v)); memcpy(p, &h, 2); break; }
    case DType::kI32: { const int32_t i = v; memcpy(p, &i, 4); break; }
    case DType::kU32: { const uint32_t i = uint32_t(v + 64); memcpy(p, &i, 4); break; }
    case DType::kI64: { const int64_t i = v; memcpy(p, &i, 8); break; }
    case DType::kU64: { const uint64_t i = uint64_t(v + 64); memcpy(p, &i, 8); break; }
  }
}

}  // namespace doorbell::nvls
