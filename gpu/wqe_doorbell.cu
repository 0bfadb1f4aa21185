// doorbell's side of the WQE comparison (gpu/wqe_compare.cu): each case posted through the
// device API (core/ibgda, CudaCtx) over the state gpu/wqe_compare.cu builds on the post rig's
// rings. Apart from the comparison's host code because it compiles slowly (cicc and ptxas take
// minutes).
#include <cuda_runtime.h>

#include <utility>

#include "core/ibgda/ops.h"
#include "gpu/cuda_check.h"
#include "gpu/wqe_cases.h"
#include "hw/cuda/cuda_ctx.cuh"

namespace doorbell::wqe_compare {
namespace {

using cuda_exec::CudaCtx;
using ibgda::AmoOp;
using ibgda::OpResult;

__constant__ ibgda::DevState c_state;

// One kernel per operation (and width or scope): one kernel holding them all, every protocol
// function forced inline, takes ptxas many minutes and over 10 GB.
// `dry`: post nothing (a kernel's first launch, before the fake NIC runs: it may resize local
// memory, which waits for an idle device).
template <class Post>
__device__ void post_case(Scope scope, bool dry, unsigned long long* fails, Post post) {
  if (dry) return;
  CudaCtx ctx;
  const ibgda::DevState& st = c_state;
  const uint32_t t = threadIdx.x;
  OpResult r = calls(scope, t) ? post(ctx, st, lane_step(scope, t)) : OpResult::kOk;
  __syncthreads();
  if (t == 0 && r == OpResult::kOk) r = ibgda::quiet_all(ctx, st);
  if (r != OpResult::kOk) atomicAdd(fails, 1ull);
}

template <Op kOp, Scope kScope>
__global__ void rma_kernel(uint32_t bytes, bool add, bool dry, unsigned long long* fails) {
  post_case(kScope, dry, fails, [&](CudaCtx& ctx, const ibgda::DevState& st, uint64_t step) {
    const uint64_t dst = kDst + step * bytes, src = kSrc + step * bytes;
    const ibgda::SignalOp sop = add ? ibgda::SignalOp::kAdd : ibgda::SignalOp::kSet;
    if constexpr (kOp == Op::kPut) {
      if constexpr (kScope == Scope::kWarp) return ibgda::put_nbi_warp(ctx, st, dst, src, bytes, 1);
      if constexpr (kScope == Scope::kBlock) return ibgda::put_nbi_block(ctx, st, dst, src, bytes, 1);
      if constexpr (kScope == Scope::kLanes) return ibgda::put_nbi_lanes(ctx, st, dst, src, bytes, 1);
      return ibgda::put_nbi(ctx, st, dst, src, bytes, 1);
    } else if constexpr (kOp == Op::kGet) {
      // From the peer's kSrc into the local kDst, as NVSHMEM's side (rptr kSrc, lptr kDst).
      if constexpr (kScope == Scope::kWarp) return ibgda::get_nbi_warp(ctx, st, dst, src, bytes, 1);
      if constexpr (kScope == Scope::kBlock) return ibgda::get_nbi_block(ctx, st, dst, src, bytes, 1);
      return ibgda::get_nbi(ctx, st, dst, src, bytes, 1);
    } else if constexpr (kOp == Op::kPutSignal) {
      if constexpr (kScope == Scope::kWarp) return ibgda::put_signal_nbi_warp(ctx, st, dst, src, bytes, kSig, kSignal, sop, 1);
      if constexpr (kScope == Scope::kBlock) return ibgda::put_signal_nbi_block(ctx, st, dst, src, bytes, kSig, kSignal, sop, 1);
      return ibgda::put_signal_nbi(ctx, st, dst, src, bytes, kSig, kSignal, sop, 1);
    } else {
      return ibgda::signal_op(ctx, st, kSig, kSignal, sop, 1);
    }
  });
}

template <class T, Op kOp, Scope kScope>
__global__ void value_kernel(bool dry, unsigned long long* fails) {
  post_case(kScope, dry, fails, [&](CudaCtx& ctx, const ibgda::DevState& st, uint64_t step) {
    T v{};
    if constexpr (kOp == Op::kP) return ibgda::p<T>(ctx, st, kDst + step * sizeof(T), T(kValue), 1);
    else return ibgda::g<T>(ctx, st, kSrc + step * sizeof(T), 1, &v);
  });
}

template <class T, AmoOp kAmo, Scope kScope>
__global__ void amo_kernel(bool dry, unsigned long long* fails) {
  post_case(kScope, dry, fails, [&](CudaCtx& ctx, const ibgda::DevState& st, uint64_t step) {
    T v{};
    return ibgda::amo<T>(ctx, st, kAmo, kWord + step * 8, T(kValue), T(kCompare), 1, &v);
  });
}

// Launches of every case's kernel, looked up by the case.
using Launch = void (*)(const Case&, cudaStream_t, bool dry, unsigned long long*);

template <Op kOp, Scope kScope>
void launch_rma(const Case& c, cudaStream_t s, bool dry, unsigned long long* f) {
  rma_kernel<kOp, kScope><<<1, threads_of(kScope), 0, s>>>(c.bytes, c.signal_add, dry, f);
}
template <class T, Op kOp, Scope kScope>
void launch_value(const Case&, cudaStream_t s, bool dry, unsigned long long* f) {
  value_kernel<T, kOp, kScope><<<1, threads_of(kScope), 0, s>>>(dry, f);
}
template <class T, AmoOp kAmo, Scope kScope>
void launch_amo(const Case&, cudaStream_t s, bool dry, unsigned long long* f) {
  amo_kernel<T, kAmo, kScope><<<1, threads_of(kScope), 0, s>>>(dry, f);
}
template <class T, Scope kScope, uint32_t... kAmos>
Launch amo_launch(AmoOp k, std::integer_sequence<uint32_t, kAmos...>) {
  Launch out = nullptr;
  ((k == AmoOp(kAmos) ? (out = &launch_amo<T, AmoOp(kAmos), kScope>) : out), ...);
  return out;
}
template <class T, Scope kScope>
Launch amo_launch(AmoOp k) {
  return amo_launch<T, kScope>(k, std::make_integer_sequence<uint32_t, ibgda::kAmoOps>{});
}
template <class T>
Launch value_launch(const Case& c) {
  if (c.op == Op::kP) return c.scope == Scope::kLanes ? &launch_value<T, Op::kP, Scope::kLanes> : &launch_value<T, Op::kP, Scope::kThread>;
  if (c.op == Op::kG) return &launch_value<T, Op::kG, Scope::kThread>;
  if constexpr (sizeof(T) < 4) return nullptr;  // AMOs are 4 or 8 bytes
  else return c.scope == Scope::kLanes ? amo_launch<T, Scope::kLanes>(c.amo) : amo_launch<T, Scope::kThread>(c.amo);
}

Launch find_launch(const Case& c) {
  switch (c.op) {
    case Op::kPut:
      return c.scope == Scope::kWarp    ? &launch_rma<Op::kPut, Scope::kWarp>
             : c.scope == Scope::kBlock ? &launch_rma<Op::kPut, Scope::kBlock>
             : c.scope == Scope::kLanes ? &launch_rma<Op::kPut, Scope::kLanes>
                                        : &launch_rma<Op::kPut, Scope::kThread>;
    case Op::kGet:
      return c.scope == Scope::kWarp    ? &launch_rma<Op::kGet, Scope::kWarp>
             : c.scope == Scope::kBlock ? &launch_rma<Op::kGet, Scope::kBlock>
                                        : &launch_rma<Op::kGet, Scope::kThread>;
    case Op::kPutSignal:
      return c.scope == Scope::kWarp    ? &launch_rma<Op::kPutSignal, Scope::kWarp>
             : c.scope == Scope::kBlock ? &launch_rma<Op::kPutSignal, Scope::kBlock>
                                        : &launch_rma<Op::kPutSignal, Scope::kThread>;
    case Op::kSignalOp: return &launch_rma<Op::kSignalOp, Scope::kThread>;
    default:
      return c.bytes == 1 ? value_launch<uint8_t>(c) : c.bytes == 2 ? value_launch<uint16_t>(c) : c.bytes == 4 ? value_launch<uint32_t>(c) : value_launch<uint64_t>(c);
  }
}

}  // namespace

void doorbell_set_state(const ibgda::DevState& s) { CHECK(cudaMemcpyToSymbol(c_state, &s, sizeof(s))); }

void doorbell_launch(const Case& c, cudaStream_t stream, bool dry, unsigned long long* fails) {
  find_launch(c)(c, stream, dry, fails);
  CHECK(cudaGetLastError());
}

}  // namespace doorbell::wqe_compare
