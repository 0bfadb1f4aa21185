// The WQE comparison's cases (gpu/wqe_compare.cu): one operation at one scope, posted once
// by doorbell's device API and once by NVSHMEM 3.4.5's ibgda_device.cuh (gpu/nvshmem_wqe.cu)
// into rings of the same shape (gpu/post_rig.h), PE 0 to PE 1 over one RC QP. Plain data:
// both files' kernels read it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/ibgda/amo_op.h"
#include "core/ibgda/state.h"
#include "gpu/post_rig.h"

namespace doorbell::wqe_compare {

enum class Op : uint8_t { kPut, kGet, kPutSignal, kSignalOp, kP, kG, kAmo };
// kThread: lane 0 alone calls the thread-scope API; kLanes: all 32 lanes of a warp call it,
// each with its own address (NVSHMEM then coalesces the warp); kWarp / kBlock: the warp- or
// block-scope API, every thread of a 32- or 128-thread CTA with the same arguments.
enum class Scope : uint8_t { kThread, kLanes, kWarp, kBlock };

struct Case {
  const char* name;
  Op op;
  Scope scope;
  uint32_t bytes;                          // data (put, get, put_signal), value (p, g) or word (AMO) size
  ibgda::AmoOp amo = ibgda::AmoOp::kAdd;   // kAmo
  bool signal_add = false;                 // kPutSignal, kSignalOp: add, else set
  bool cst = false;                        // the GPU lacks PCIe write ordering (may_skip_cst off)
  // nullptr: the two must match byte for byte; else why they differ (the check fails when
  // they then match: a stale reason).
  const char* known = nullptr;
  bool dc = false;                         // over a DCI, each WQE with the target's half AV
};

// Heap offsets (both PEs' heaps are the rings' kHeapBytes): a thread's source, destination
// (lane l at + l * bytes), signal word and AMO word (lane l at + 8 l).
inline constexpr uint64_t kSrc = 0x1000, kDst = 0x10000, kSig = 0x20000, kWord = 0x30000;
// Operands: distinct bytes, so a swapped or masked field shows.
inline constexpr uint64_t kValue = 0x0123456789abcdefull, kCompare = 0xfedcba9876543210ull, kSignal = 0x5a5a0001ull;

inline constexpr uint32_t threads_of(Scope s) { return s == Scope::kBlock ? 128 : 32; }
inline constexpr bool calls(Scope s, uint32_t t) { return s == Scope::kThread ? t == 0 : s == Scope::kBlock || t < 32; }
inline constexpr uint64_t lane_step(Scope s, uint32_t t) { return s == Scope::kLanes ? t % 32 : 0; }

// doorbell's side (gpu/wqe_doorbell.cu): the state its kernels read, and a case posted
// (`dry`: nothing posted, the kernel only loaded); a call that fails counts in `fails`.
void doorbell_set_state(const ibgda::DevState& s);
void doorbell_launch(const Case& c, cudaStream_t stream, bool dry, unsigned long long* fails);

// NVSHMEM's side (gpu/nvshmem_wqe.cu, built only with -DDOORBELL_WITH_NVSHMEM): its state over
// `r` (before the fake NIC starts: it allocates), one case posted through its device code,
// the state freed (after the NIC stopped). nvshmem_missing: why it is absent, or nullptr.
const char* nvshmem_missing();
void nvshmem_prepare(const post_rig::Rings& r, bool cst, bool dc);
void nvshmem_launch(const Case& c, cudaStream_t stream);
void nvshmem_release();

}  // namespace doorbell::wqe_compare
