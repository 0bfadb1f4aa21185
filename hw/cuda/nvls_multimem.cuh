// NVLS over real NVLink multicast: multimem.ld_reduce / multimem.st on a multicast address
// (cuMulticastCreate / AddDevice / BindMem, mapped next to each member's unicast copy). Never
// used on the lent machines: creating a multicast object there is forbidden, so the set-up in
// nvls_multicast_setup() refuses unless DOORBELL_ALLOW_MULTICAST=1 — the kernels build, the
// path does not run. The emulation (nvls_emu.cuh) is what runs here.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/nvls/pack.h"

namespace doorbell::cuda_exec {

// One member's view: its unicast copy and the multicast address of the same region.
struct MultimemMc {
  uint8_t* ucbase = nullptr;
  uint8_t* mcbase = nullptr;

  __device__ uint8_t* uc(uint64_t off) const { return ucbase + off; }

  template <class C>
  __device__ void ld_reduce(C&, uint64_t off, nvls::DType t, nvls::RedOp op, uint32_t pack, uint8_t* out) const {
    const void* p = mcbase + off;
    uint32_t* o = reinterpret_cast<uint32_t*>(out);
    unsigned long long* o64 = reinterpret_cast<unsigned long long*>(out);
    using nvls::DType;
    using nvls::RedOp;
#define DOORBELL_MM_V4(OPS, TY)                                                                                    \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." OPS ".v4." TY " {%0,%1,%2,%3}, [%4];"                 \
               : "=r"(o[0]), "=r"(o[1]), "=r"(o[2]), "=r"(o[3]) : "l"(p) : "memory")
#define DOORBELL_MM_1(OPS, TY) asm volatile("multimem.ld_reduce.relaxed.sys.global." OPS "." TY " %0, [%1];" : "=r"(o[0]) : "l"(p) : "memory")
#define DOORBELL_MM_1L(OPS, TY) asm volatile("multimem.ld_reduce.relaxed.sys.global." OPS "." TY " %0, [%1];" : "=l"(o64[0]) : "l"(p) : "memory")
    if (t == DType::kF32 && op == RedOp::kSum) {
      if (pack == 16) DOORBELL_MM_V4("add", "f32");
      else if (pack == 4) DOORBELL_MM_1("add", "f32");
      else __trap();
    } else if (t == DType::kF16 || t == DType::kBf16) {
      // 16 B as four f16x2 / bf16x2 words. A shorter tail has no form here: the real path needs
      // 16-bit counts that are a multiple of 8 per part, and stops rather than guess.
      if (pack != 16) __trap();
      if (t == DType::kF16) {
        if (op == RedOp::kSum) DOORBELL_MM_V4("add", "f16x2");
        else if (op == RedOp::kMin) DOORBELL_MM_V4("min", "f16x2");
        else DOORBELL_MM_V4("max", "f16x2");
      } else {
        if (op == RedOp::kSum) DOORBELL_MM_V4("add", "bf16x2");
        else if (op == RedOp::kMin) DOORBELL_MM_V4("min", "bf16x2");
        else DOORBELL_MM_V4("max", "bf16x2");
      }
    } else if (t == DType::kF64) {
      DOORBELL_MM_1L("add", "f64");
    } else if (t == DType::kI32 || t == DType::kU32) {
      const bool s = t == DType::kI32;
      if (op == RedOp::kSum) DOORBELL_MM_1("add", "u32");
      else if (op == RedOp::kMin) { if (s) DOORBELL_MM_1("min", "s32"); else DOORBELL_MM_1("min", "u32"); }
      else { if (s) DOORBELL_MM_1("max", "s32"); else DOORBELL_MM_1("max", "u32"); }
    } else {
      const bool s = t == DType::kI64;
      if (op == RedOp::kSum) DOORBELL_MM_1L("add", "u64");
      else if (op == RedOp::kMin) { if (s) DOORBELL_MM_1L("min", "s64"); else DOORBELL_MM_1L("min", "u64"); }
      else { if (s) DOORBELL_MM_1L("max", "s64"); else DOORBELL_MM_1L("max", "u64"); }
    }
#undef DOORBELL_MM_V4
#undef DOORBELL_MM_1
#undef DOORBELL_MM_1L
  }
  template <class C>
  __device__ void st(C&, uint64_t off, const uint8_t* src, uint32_t bytes) const {
    void* p = mcbase + off;
    const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
    if (bytes == 16)
      asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
    else if (bytes == 8)
      asm volatile("multimem.st.relaxed.sys.global.v2.f32 [%0], {%1,%2};" ::"l"(p), "r"(s[0]), "r"(s[1]) : "memory");
    else if (bytes == 4)
      asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(p), "r"(s[0]) : "memory");
  }
  template <class C>
  __device__ uint64_t ld_min(C&, uint64_t off) const {
    unsigned long long v;
    asm volatile("multimem.ld_reduce.acquire.sys.global.min.u64 %0, [%1];" : "=l"(v) : "l"(mcbase + off) : "memory");
    return v;
  }
  template <class C>
  __device__ void st_flag(C&, uint64_t off, uint64_t v) const {
    asm volatile("multimem.st.relaxed.sys.global.u64 [%0], %1;" ::"l"(mcbase + off), "l"(v) : "memory");
  }
  template <class C>
  __device__ void charge_reduce(C&, uint64_t, bool) const {}
  template <class C>
  __device__ void charge_local(C&, uint64_t) const {}
  // Before a post that frees what the CTA read: nothing (core/nvls Post::kFrees).
  template <class C>
  __device__ void reads_done(C&) const {}
};

// Whether this process may create NVLink multicast objects at all: only where a person said so.
inline bool multicast_allowed() {
  const char* v = std::getenv("DOORBELL_ALLOW_MULTICAST");
  if (v != nullptr && std::strcmp(v, "1") == 0) return true;
  std::fprintf(stderr,
               "nvls: refusing to create an NVLink multicast object (DOORBELL_ALLOW_MULTICAST is not 1); "
               "use the emulation (gpu/nvls_emu.cuh)\n");
  return false;
}

// The multicast object of `bytes` for the devices in `devs` (this process drives them all),
// each member's physical memory bound and both views mapped; false if refused or failed.
inline bool nvls_multicast_setup(const int* devs, int n, uint64_t bytes, MultimemMc* views) {
  if (!multicast_allowed()) return false;
  CUmulticastObjectProp prop{};
  prop.numDevices = unsigned(n);
  prop.size = bytes;
  prop.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  if (cuMulticastGetGranularity(&gran, &prop, CU_MULTICAST_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) return false;
  prop.size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle mc;
  if (cuMulticastCreate(&mc, &prop) != CUDA_SUCCESS) return false;
  for (int i = 0; i < n; ++i)
    if (cuMulticastAddDevice(mc, CUdevice(devs[i])) != CUDA_SUCCESS) return false;
  for (int i = 0; i < n; ++i) {
    CUmemAllocationProp ap{};
    ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.location.id = devs[i];
    CUmemGenericAllocationHandle phys;
    CUdeviceptr uc = 0, mcva = 0;
    CUmemAccessDesc acc{};
    acc.location = ap.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemCreate(&phys, prop.size, &ap, 0) != CUDA_SUCCESS || cuMulticastBindMem(mc, 0, phys, 0, prop.size, 0) != CUDA_SUCCESS ||
        cuMemAddressReserve(&uc, prop.size, gran, 0, 0) != CUDA_SUCCESS || cuMemMap(uc, prop.size, 0, phys, 0) != CUDA_SUCCESS ||
        cuMemSetAccess(uc, prop.size, &acc, 1) != CUDA_SUCCESS || cuMemAddressReserve(&mcva, prop.size, gran, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(mcva, prop.size, 0, mc, 0) != CUDA_SUCCESS || cuMemSetAccess(mcva, prop.size, &acc, 1) != CUDA_SUCCESS)
      return false;
    views[i].ucbase = reinterpret_cast<uint8_t*>(uc);
    views[i].mcbase = reinterpret_cast<uint8_t*>(mcva);
  }
  return true;
}

}  // namespace doorbell::cuda_exec
