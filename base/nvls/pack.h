// What multimem.ld_reduce can reduce, and in how wide a pack (SPEC §7, seed 003): the pack
// size decides reduceCopy's hunk (Unroll x 32 lanes x pack) and the unaligned tail. The PTX
// instruction exists for a fixed set of (type, operation) pairs only; anything else is an
// error the caller must see, never a silently narrower pack.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/config.h"

namespace doorbell::nvls {

enum class DType : uint8_t { kF32, kF16, kBf16, kF64, kI32, kI64, kU32, kU64 };
enum class RedOp : uint8_t { kSum, kMin, kMax };

DOORBELL_HD constexpr uint32_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBf16: return 2;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 8;
  }
  return 0;
}

DOORBELL_HD constexpr bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBf16 || t == DType::kF64;
}

// Bytes one multimem.ld_reduce / multimem.st moves for (type, op), 0 if PTX has no such
// instruction: float sum below 8-byte elements in 16 B vectors (.v4.f32, .v8.f16x2-style),
// double sum 8 B, 16-bit float min / max 16 B, integer sum / min / max one element; float32 and
// float64 min / max do not exist.
#ifndef __CUDA_ARCH__
// Planted table errors, for tests of the model switch's own PTX table only: the f64 sum as a
// 16-byte (.v2.f64) pack, the integers in 16-byte (.v4) packs. The host build only.
struct PackPlants {
  bool f64_vector = false;
  bool int_vector = false;
};
inline PackPlants& pack_plants() {
  thread_local PackPlants p;
  return p;
}
#endif

DOORBELL_HD constexpr uint32_t multimem_pack_bytes(DType t, RedOp op) {
#ifndef __CUDA_ARCH__
  if (!std::is_constant_evaluated()) {
    if (pack_plants().f64_vector && t == DType::kF64 && op == RedOp::kSum) return 16;
    if (pack_plants().int_vector && !is_float(t)) return 16;
  }
#endif
  if (!is_float(t)) return dtype_bytes(t);
  if (op == RedOp::kSum) return t == DType::kF64 ? 8 : 16;
  if (t == DType::kF16 || t == DType::kBf16) return 16;
  return 0;
}

// Whether one multimem access of `pack` bytes exists for (type, op): a power of two from the
// element up to the widest form (integers and doubles: only the element).
DOORBELL_HD constexpr bool multimem_pack_valid(DType t, RedOp op, uint32_t pack) {
  const uint32_t widest = multimem_pack_bytes(t, op);
  return widest != 0 && pack >= dtype_bytes(t) && pack <= widest && (pack & (pack - 1)) == 0;
}

// f(type, op) with both as compile-time constants (Const<DType::kF32>{}, ...), which convert to
// DType and RedOp: a loop written once becomes one loop per pair, its reduce's switches folded
// away, as NCCL compiles a kernel per (op, type). (On a GPU the switches per pack made a reduce
// CTA instruction-bound: docs/nvls.md.)
template <auto V>
struct Const {
  static constexpr auto value = V;
  DOORBELL_HD constexpr operator decltype(V)() const { return V; }
};
template <DType T, class F>
DOORBELL_HD void with_op(RedOp op, F&& f) {
  switch (op) {
    case RedOp::kSum: return f(Const<T>{}, Const<RedOp::kSum>{});
    case RedOp::kMin: return f(Const<T>{}, Const<RedOp::kMin>{});
    case RedOp::kMax: return f(Const<T>{}, Const<RedOp::kMax>{});
  }
}
template <class F>
DOORBELL_HD void with_type_op(DType t, RedOp op, F&& f) {
  switch (t) {
    case DType::kF32: return with_op<DType::kF32>(op, f);
    case DType::kF16: return with_op<DType::kF16>(op, f);
    case DType::kBf16: return with_op<DType::kBf16>(op, f);
    case DType::kF64: return with_op<DType::kF64>(op, f);
    case DType::kI32: return with_op<DType::kI32>(op, f);
    case DType::kI64: return with_op<DType::kI64>(op, f);
    case DType::kU32: return with_op<DType::kU32>(op, f);
    case DType::kU64: return with_op<DType::kU64>(op, f);
  }
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBf16: return "bf16";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU32: return "u32";
    case DType::kU64: return "u64";
  }
  return "?";
}

inline const char* redop_name(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kMin: return "min";
    case RedOp::kMax: return "max";
  }
  return "?";
}

}  // namespace doorbell::nvls
