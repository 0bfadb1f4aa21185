// NVSHMEM 3.4.5's side of the WQE comparison (gpu/wqe_compare.cu): each case posted through
// NVSHMEM's own device entry points (non_abi/device/pt-to-pt/ibgda_device.cuh: rma_nbi,
// rma_p, rma_g, amo_fetch, amo_nonfetch, put_signal, quiet) over its state on the post rig's
// rings (gpu/nvshmem_rig.cuh). Built only with -DDOORBELL_WITH_NVSHMEM and NVSHMEM's include
// directory (gpu/run-wqe-compare finds it).
#include "gpu/wqe_cases.h"

#include <vector>

#include "gpu/cuda_check.h"

namespace doorbell::wqe_compare {

#ifndef DOORBELL_WITH_NVSHMEM
const char* nvshmem_missing() { return "built without NVSHMEM headers (gpu/run-wqe-compare finds them)"; }
void nvshmem_prepare(const post_rig::Rings&, bool, bool) {}
void nvshmem_launch(const Case&, cudaStream_t) {}
void nvshmem_release() {}
}  // namespace doorbell::wqe_compare
#else
const char* nvshmem_missing() { return nullptr; }
}  // namespace doorbell::wqe_compare

#include "device/nvshmem_device_macros.h"
#include "device_host_transport/nvshmem_common_ibgda.h"
// Without relocatable device code NVSHMEM's headers leave the IBGDA state to the includer.
static __constant__ nvshmemi_ibgda_device_state_t nvshmemi_ibgda_device_state_d;
#include "non_abi/device/pt-to-pt/ibgda_device.cuh"
#include "gpu/nvshmem_rig.cuh"

namespace doorbell::wqe_compare {
namespace {

using ibgda::AmoOp;

// NVSHMEM's name for each AMO (nvshmemi_amo_t).
__host__ __device__ nvshmemi_amo_t nvshmem_amo(AmoOp k) {
  switch (k) {
    case AmoOp::kFetchAdd: return NVSHMEMI_AMO_FETCH_ADD;
    case AmoOp::kCompareSwap: return NVSHMEMI_AMO_COMPARE_SWAP;
    case AmoOp::kSwap: return NVSHMEMI_AMO_SWAP;
    case AmoOp::kFetchAnd: return NVSHMEMI_AMO_FETCH_AND;
    case AmoOp::kFetchOr: return NVSHMEMI_AMO_FETCH_OR;
    case AmoOp::kFetchXor: return NVSHMEMI_AMO_FETCH_XOR;
    case AmoOp::kFetchInc: return NVSHMEMI_AMO_FETCH_INC;
    case AmoOp::kAdd: return NVSHMEMI_AMO_ADD;
    case AmoOp::kInc: return NVSHMEMI_AMO_INC;
    case AmoOp::kSet: return NVSHMEMI_AMO_SET;
    case AmoOp::kAnd: return NVSHMEMI_AMO_AND;
    case AmoOp::kOr: return NVSHMEMI_AMO_OR;
    case AmoOp::kXor: return NVSHMEMI_AMO_XOR;
  }
  return NVSHMEMI_AMO_ACK;
}

#ifdef __CUDA_ARCH__
template <threadgroup_t S>
__device__ void rma(const Case& c, uint8_t* heap, uint64_t step) {
  if (c.op == Op::kPut)
    nvshmemi_ibgda_rma_nbi<S, NVSHMEMI_OP_PUT>(heap + kDst + step * c.bytes, heap + kSrc + step * c.bytes, c.bytes, 1);
  else if (c.op == Op::kGet)
    nvshmemi_ibgda_rma_nbi<S, NVSHMEMI_OP_GET>(heap + kSrc + step * c.bytes, heap + kDst + step * c.bytes, c.bytes, 1);
  else
    nvshmemi_ibgda_put_signal<S>(heap + kDst, heap + kSrc, c.bytes, heap + kSig, kSignal,
                                 c.signal_add ? NVSHMEMI_AMO_SIGNAL_ADD : NVSHMEMI_AMO_SIGNAL_SET, 1, true);
}

template <class T>
__device__ void value_op(const Case& c, uint8_t* heap, uint64_t step) {
  if (c.op == Op::kP) nvshmemi_ibgda_rma_p<T>(heap + kDst + step * sizeof(T), T(kValue), 1);
  if (c.op == Op::kG) (void)nvshmemi_ibgda_rma_g<T>(heap + kSrc + step * sizeof(T), 1);
  if (c.op != Op::kAmo) return;
  T* word = reinterpret_cast<T*>(heap + kWord + step * 8);
  if (ibgda::amo_fetches(c.amo))
    (void)nvshmemi_ibgda_amo_fetch<T>(word, T(kValue), T(kCompare), 1, nvshmem_amo(c.amo));
  else
    nvshmemi_ibgda_amo_nonfetch<T>(word, T(kValue), 1, nvshmem_amo(c.amo));
}
#endif

__global__ void nvshmem_case_kernel(Case c) {
#ifdef __CUDA_ARCH__
  auto* heap = static_cast<uint8_t*>(nvshmemi_device_state_d.heap_base);
  const uint32_t t = threadIdx.x;
  if (c.op == Op::kSignalOp && t == 0)
    nvshmemi_ibgda_amo_nonfetch<uint64_t>(heap + kSig, kSignal, 1, c.signal_add ? NVSHMEMI_AMO_SIGNAL_ADD : NVSHMEMI_AMO_SIGNAL_SET);
  if (c.bytes != 0 && c.op != Op::kSignalOp && calls(c.scope, t)) {
    const uint64_t step = lane_step(c.scope, t);
    if (c.op == Op::kPut || c.op == Op::kGet || c.op == Op::kPutSignal) {
      if (c.scope == Scope::kWarp) rma<NVSHMEMI_THREADGROUP_WARP>(c, heap, step);
      else if (c.scope == Scope::kBlock) rma<NVSHMEMI_THREADGROUP_BLOCK>(c, heap, step);
      else rma<NVSHMEMI_THREADGROUP_THREAD>(c, heap, step);
    } else if (c.bytes == 1) {
      value_op<uint8_t>(c, heap, step);
    } else if (c.bytes == 2) {
      value_op<uint16_t>(c, heap, step);
    } else if (c.bytes == 4) {
      value_op<uint32_t>(c, heap, step);
    } else {
      value_op<uint64_t>(c, heap, step);
    }
  }
  __syncthreads();
  if (t == 0) nvshmemi_ibgda_quiet<NVSHMEMI_THREADGROUP_THREAD>();
#endif
}

std::vector<void*> g_allocs;

}  // namespace

void nvshmem_prepare(const post_rig::Rings& r, bool cst, bool dc) {
  g_allocs = post_rig::nvshmem_rig_state(r, 1, NVSHMEMI_IBGDA_DEVICE_QP_MAP_TYPE_CTA, !cst, dc);
  // A launch that posts nothing first (a kernel's first launch may resize local memory, which
  // waits for an idle device that the running fake NIC never gives it).
  Case none{"none", Op::kPut, Scope::kThread, 0};
  nvshmem_case_kernel<<<1, 32>>>(none);
  CHECK(cudaDeviceSynchronize());
}

void nvshmem_launch(const Case& c, cudaStream_t stream) {
  nvshmem_case_kernel<<<1, threads_of(c.scope), 0, stream>>>(c);
  CHECK(cudaGetLastError());
}

void nvshmem_release() {
  for (void* p : g_allocs) CHECK(cudaFree(p));
  g_allocs.clear();
}

}  // namespace doorbell::wqe_compare
#endif
