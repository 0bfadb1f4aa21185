#include "hw/gpu_sim/ptx_multimem.h"

namespace doorbell::gpu_sim {

namespace {

using nvls::DType;
using nvls::RedOp;

constexpr PtxMultimemForm kForms[] = {
    // .f32: .add only, 32 / 64 / 128 bits.
    {"add.f32", DType::kF32, RedOp::kSum, 4},
    {"add.v2.f32", DType::kF32, RedOp::kSum, 8},
    {"add.v4.f32", DType::kF32, RedOp::kSum, 16},
    // .f64: .add, no .vec.
    {"add.f64", DType::kF64, RedOp::kSum, 8},
    // 16-bit floats in pairs, .add .min .max; one element through its pair (xparts).
    {"add.f16x2 (one half)", DType::kF16, RedOp::kSum, 2},
    {"add.f16x2", DType::kF16, RedOp::kSum, 4},
    {"add.v2.f16x2", DType::kF16, RedOp::kSum, 8},
    {"add.v4.f16x2", DType::kF16, RedOp::kSum, 16},
    {"min.f16x2 (one half)", DType::kF16, RedOp::kMin, 2},
    {"min.f16x2", DType::kF16, RedOp::kMin, 4},
    {"min.v2.f16x2", DType::kF16, RedOp::kMin, 8},
    {"min.v4.f16x2", DType::kF16, RedOp::kMin, 16},
    {"max.f16x2 (one half)", DType::kF16, RedOp::kMax, 2},
    {"max.f16x2", DType::kF16, RedOp::kMax, 4},
    {"max.v2.f16x2", DType::kF16, RedOp::kMax, 8},
    {"max.v4.f16x2", DType::kF16, RedOp::kMax, 16},
    {"add.bf16x2 (one half)", DType::kBf16, RedOp::kSum, 2},
    {"add.bf16x2", DType::kBf16, RedOp::kSum, 4},
    {"add.v2.bf16x2", DType::kBf16, RedOp::kSum, 8},
    {"add.v4.bf16x2", DType::kBf16, RedOp::kSum, 16},
    {"min.bf16x2 (one half)", DType::kBf16, RedOp::kMin, 2},
    {"min.bf16x2", DType::kBf16, RedOp::kMin, 4},
    {"min.v2.bf16x2", DType::kBf16, RedOp::kMin, 8},
    {"min.v4.bf16x2", DType::kBf16, RedOp::kMin, 16},
    {"max.bf16x2 (one half)", DType::kBf16, RedOp::kMax, 2},
    {"max.bf16x2", DType::kBf16, RedOp::kMax, 4},
    {"max.v2.bf16x2", DType::kBf16, RedOp::kMax, 8},
    {"max.v4.bf16x2", DType::kBf16, RedOp::kMax, 16},
    // Integers: one element, .add .min .max.
    {"add.s32", DType::kI32, RedOp::kSum, 4},
    {"min.s32", DType::kI32, RedOp::kMin, 4},
    {"max.s32", DType::kI32, RedOp::kMax, 4},
    {"add.u32", DType::kU32, RedOp::kSum, 4},
    {"min.u32", DType::kU32, RedOp::kMin, 4},
    {"max.u32", DType::kU32, RedOp::kMax, 4},
    {"add.s64", DType::kI64, RedOp::kSum, 8},
    {"min.s64", DType::kI64, RedOp::kMin, 8},
    {"max.s64", DType::kI64, RedOp::kMax, 8},
    {"add.u64", DType::kU64, RedOp::kSum, 8},
    {"min.u64", DType::kU64, RedOp::kMin, 8},
    {"max.u64", DType::kU64, RedOp::kMax, 8},
};

}  // namespace

const PtxMultimemForm* ptx_multimem_form(DType type, RedOp op, uint32_t bytes) {
  for (const PtxMultimemForm& f : kForms)
    if (f.type == type && f.op == op && f.bytes == bytes) return &f;
  return nullptr;
}

}  // namespace doorbell::gpu_sim
