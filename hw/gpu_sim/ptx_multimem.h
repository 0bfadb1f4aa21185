// The multimem.ld_reduce forms sm_90 has, written out from the PTX ISA's own rules and kept
// apart from base/nvls/pack.h (which the protocol picks its packs with): the model switch
// checks each access against this list, so a wrong entry in pack.h is an error here instead
// of a pack both sides agree on.
//
// The ISA's rules: integer forms (.u32 .s32 .u64 .s64 with .add .min .max) are one element,
// with no vector; a floating-point form's type with its .vec is 32, 64 or 128 bits (.f16 and
// .bf16 only in pairs: .f16x2, .bf16x2); .f64 takes no .vec; .min / .max exist for the 16-bit
// float pairs only. NCCL takes one 16-bit element through the pair that holds it (its
// "xparts": the aligned .f16x2 form, one half kept), which the model allows as such.
#pragma once

#include <cstdint>

#include "base/nvls/pack.h"

namespace doorbell::gpu_sim {

struct PtxMultimemForm {
  const char* name;  // the instruction's op and type suffix, as PTX spells it
  nvls::DType type;
  nvls::RedOp op;
  uint32_t bytes;    // what one access moves
};

// The form an access of `bytes` of (type, op) is, or null when PTX has none.
const PtxMultimemForm* ptx_multimem_form(nvls::DType type, nvls::RedOp op, uint32_t bytes);

}  // namespace doorbell::gpu_sim
