// The CUDA execution context: the same interface as the CPU model's SimCtx, as device code
// for Hopper (sm_90). Atomics and ordered accesses go through libcu++'s cuda::atomic_ref with
// the matching thread scope; fences are cuda::atomic_thread_fence; doorbells are st.mmio.
// Waits are bounded by the global timer: a wait that outlives `timeout_ns` returns kTimeout
// instead of hanging the GPU and is logged (who waited on what) in device memory, which the
// host prints with report_timeouts() once the kernel is done. UnboundedCudaCtx waits
// forever, as NVSHMEM's device code does unless built with NVSHMEM_TIMEOUT_DEVICE_POLLING:
// for production posting paths that a host watchdog covers; checks use CudaCtx.
#pragma once

#include <cuda/atomic>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "core/exec/context.h"

namespace doorbell::cuda_exec {

template <exec::Scope S>
struct ScopeOf;
template <>
struct ScopeOf<exec::Scope::kCta> {
  static constexpr cuda::thread_scope value = cuda::thread_scope_block;
};
template <>
struct ScopeOf<exec::Scope::kGpu> {
  static constexpr cuda::thread_scope value = cuda::thread_scope_device;
};
template <>
struct ScopeOf<exec::Scope::kSystem> {
  static constexpr cuda::thread_scope value = cuda::thread_scope_system;
};

template <exec::Order O>
__device__ constexpr cuda::memory_order order_of() {
  if constexpr (O == exec::Order::kAcquire) return cuda::memory_order_acquire;
  if constexpr (O == exec::Order::kRelease) return cuda::memory_order_release;
  if constexpr (O == exec::Order::kAcqRel) return cuda::memory_order_acq_rel;
  return cuda::memory_order_relaxed;
}

__device__ inline uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Where bounded waits that gave up are logged (CudaCtx::spin), one log per translation unit.
inline constexpr unsigned kTimeoutRecords = 8;
struct TimeoutRecord {
  uint64_t ns;
  const char* what;  // a string literal in device memory, read by the host
  const uint64_t* addr;
  uint64_t seen;
  uint32_t cta, thread;
};
struct TimeoutLog {
  unsigned long long count;
  TimeoutRecord first[kTimeoutRecords];
};
static __device__ TimeoutLog g_timeout_log;

template <bool kBoundedWaits>
class BasicCudaCtx {
 public:
  __device__ explicit BasicCudaCtx(uint64_t timeout_ns = 2'000'000'000ull) : timeout_ns_(timeout_ns) {}

  __device__ uint32_t lane() const { return threadIdx.x & 31u; }
  __device__ uint32_t warp() const { return threadIdx.x >> 5; }
  __device__ uint32_t cta() const { return blockIdx.x; }
  __device__ uint32_t warps_per_cta() const { return (blockDim.x + 31u) >> 5; }
  __device__ uint32_t num_ctas() const { return gridDim.x; }
  __device__ uint32_t warp_size() const { return 32u; }
  // A CAS chain's failed retries between two spins (exec::retries_per_spin): back to back, as
  // NVSHMEM's chain retries; the bounded wait's clock and the sleep once per 64.
  static constexpr uint64_t kRetriesPerSpin = 64;
  // A publisher more than 128 entries behind polls with loads 500 ns apart until 32 behind
  // (exec::far_publish, publish_in_order's; tuned when IBGDA's submit still used it), asked
  // every 16 failed CASes: shorter sleeps or a nearer end slowed
  // the thread-scope puts on 8 shared QPs, a check every 64 CASes the 1-QP lane-0 row.
  static constexpr exec::FarPublish kFarPublish{16, 128, 32};
  __device__ void pause() { __nanosleep(500); }

  __device__ uint64_t shfl(uint64_t v, uint32_t src) { return __shfl_sync(0xffffffffu, (unsigned long long)v, int(src)); }
  __device__ uint32_t ballot(bool b) { return __ballot_sync(0xffffffffu, b); }
  __device__ bool all(bool b) { return __all_sync(0xffffffffu, b) != 0; }
  __device__ bool any(bool b) { return __any_sync(0xffffffffu, b) != 0; }
  __device__ void syncwarp() { __syncwarp(); }
  __device__ void sync_cta() { __syncthreads(); }
  // (count: a multiple of the warp size; id 0 is __syncthreads')
  __device__ void sync_threads(uint32_t id, uint32_t count) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }

  template <exec::Scope S>
  __device__ uint64_t atomic_add(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return ref<S>(p).fetch_add(v, cuda::memory_order_relaxed);
  }
  // (exec::reduce_add / reduce_max: no result, so the thread does not wait for them. `p` is
  // global memory: `red` on a generic address compiled to the ATOM it was meant to replace.)
#define DOORBELL_RED(op)                                                                          \
  if constexpr (S == exec::Scope::kCta)                                                           \
    asm volatile("red.relaxed.cta.global." op ".u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");      \
  else if constexpr (S == exec::Scope::kGpu)                                                      \
    asm volatile("red.relaxed.gpu.global." op ".u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");      \
  else                                                                                            \
    asm volatile("red.relaxed.sys.global." op ".u64 [%0], %1;" ::"l"(p), "l"(v) : "memory")
  template <exec::Scope S>
  __device__ void reduce_add(exec::ScopeTag<S>, uint64_t* p, uint64_t v) { DOORBELL_RED("add"); }
  template <exec::Scope S>
  __device__ void reduce_max(exec::ScopeTag<S>, uint64_t* p, uint64_t v) { DOORBELL_RED("max"); }
#undef DOORBELL_RED
  template <exec::Scope S>
  __device__ uint64_t atomic_cas(exec::ScopeTag<S>, uint64_t* p, uint64_t expected, uint64_t desired) {
    unsigned long long e = expected;
    ref<S>(p).compare_exchange_strong(e, desired, cuda::memory_order_relaxed);
    return e;
  }
  template <exec::Scope S>
  __device__ uint64_t atomic_max(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return ref<S>(p).fetch_max(v, cuda::memory_order_relaxed);
  }
  template <exec::Scope S>
  __device__ uint64_t atomic_exch(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return ref<S>(p).exchange(v, cuda::memory_order_relaxed);
  }
  template <exec::Scope S, exec::Order O, class T>
  __device__ T load(exec::ScopeTag<S>, exec::OrderTag<O>, const T* p) {
    static_assert(exec::kAccessSize<T>, "loads are of 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) {
      return T(ref<S>(reinterpret_cast<uint64_t*>(const_cast<T*>(p))).load(order_of<O>()));
    } else if constexpr (sizeof(T) == 4) {
      return T(cuda::atomic_ref<unsigned, ScopeOf<S>::value>(*reinterpret_cast<unsigned*>(const_cast<T*>(p))).load(order_of<O>()));
    } else {  // no 1- or 2-byte atomic_ref: a volatile load, ordered by a fence after it
      const T v = *reinterpret_cast<const volatile T*>(p);
      if constexpr (O == exec::Order::kAcquire || O == exec::Order::kAcqRel)
        cuda::atomic_thread_fence(cuda::memory_order_acquire, ScopeOf<S>::value);
      return v;
    }
  }
  template <exec::Scope S, exec::Order O, class T>
  __device__ void store(exec::ScopeTag<S>, exec::OrderTag<O>, T* p, std::type_identity_t<T> v) {
    static_assert(exec::kAccessSize<T>, "stores are of 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) {
      ref<S>(reinterpret_cast<uint64_t*>(p)).store(v, order_of<O>());
    } else if constexpr (sizeof(T) == 4) {
      cuda::atomic_ref<unsigned, ScopeOf<S>::value>(*reinterpret_cast<unsigned*>(p)).store(v, order_of<O>());
    } else {
      if constexpr (O == exec::Order::kRelease || O == exec::Order::kAcqRel)
        cuda::atomic_thread_fence(cuda::memory_order_release, ScopeOf<S>::value);
      *reinterpret_cast<volatile T*>(p) = v;
    }
  }
  // Plain byte ranges (WQE segments): weak stores and loads, 16 bytes at a time when both
  // sides are 16-byte aligned.
  __device__ void write_bytes(void* dst, const void* src, size_t n) { copy(dst, src, n); }
  __device__ void read_bytes(void* dst, const void* src, size_t n) { copy(dst, src, n); }
  template <exec::Scope S>
  __device__ void fence(exec::ScopeTag<S>) {
    cuda::atomic_thread_fence(cuda::memory_order_acq_rel, ScopeOf<S>::value);
  }
  // A doorbell: an MMIO store the hardware must neither merge nor reorder with other MMIO.
  __device__ void mmio_store64(uint64_t* p, uint64_t v) {
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }

  // One failed poll. A wait is bounded by the global timer, sampled every 1024th poll, so
  // that a poll costs an increment and a test (the bookkeeping of every poll slows the
  // thread post path: gpu/run-post-bench). A sample that finds another
  // polled word or value (progress, or the next wait), or that comes long after the last one
  // (a new wait), restarts the deadline. A timeout is logged in device memory, not printed.
  // Lanes posting in turn (`if (lane == k) put`) overlap their puts or not by how the
  // compiler shapes the wait loops: a printf call here, and later a second exit out of
  // reserve's wait, each cost most of it (gpu/run-post-bench, one QP).
  __device__ __forceinline__ bool spin(const char* what, const uint64_t* addr, uint64_t seen) {
    // A short sleep per failed poll gives the warp's issue slots to its other diverged lanes
    // (the one a waiter waits for may be among them): it helps thread-scope puts on 8 QPs
    // shared by 512 warps; longer sleeps slow the warp-scope rows. The first kEagerPolls
    // polls of a wait (a new word or value) do not sleep: a chain of posters handing a QP's
    // ready_head on ran at half the rate with every poll asleep (gpu/run-post-bench).
    if (addr != eager_addr_ || seen != eager_seen_) eager_addr_ = addr, eager_seen_ = seen, eager_ = 0;
    if (eager_ >= kEagerPolls) __nanosleep(50);
    else ++eager_;
    if constexpr (!kBoundedWaits) {
      return (void)what, (void)addr, (void)seen, true;
    } else {
      if ((++polls_ & 1023u) != 0) return true;
      const uint64_t now = global_timer_ns();
      if (addr != last_addr_ || seen != last_seen_ || now - last_ns_ > kNewWaitNs) start_ns_ = now;
      last_addr_ = addr, last_seen_ = seen, last_ns_ = now;
      if (now - start_ns_ < timeout_ns_) return true;
      log_timeout(now - start_ns_, what, addr, seen);
      start_ns_ = now;  // a caller that polls on gets a fresh deadline
      return false;
    }
  }

 private:
  __device__ static __forceinline__ void log_timeout(uint64_t ns, const char* what, const uint64_t* addr, uint64_t seen) {
    const unsigned long long k = atomicAdd(&g_timeout_log.count, 1ull);
    if (k >= kTimeoutRecords) return;
    TimeoutRecord& r = g_timeout_log.first[k];
    r.ns = ns, r.what = what, r.addr = addr, r.seen = seen, r.cta = blockIdx.x, r.thread = threadIdx.x;
  }

  __device__ static void copy(void* dst, const void* src, size_t n) {
    if (n == 16 && ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) != 0) {
      // Fixed indices, so that a 16-byte private buffer on either side can stay in registers.
#pragma unroll
      for (int i = 0; i < 16; ++i) static_cast<uint8_t*>(dst)[i] = static_cast<const uint8_t*>(src)[i];
      return;
    }
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | n) & 15) == 0) {
      for (size_t i = 0; i < n / 16; ++i) static_cast<uint4*>(dst)[i] = static_cast<const uint4*>(src)[i];
      return;
    }
    for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(dst)[i] = static_cast<const uint8_t*>(src)[i];
  }

  template <exec::Scope S>
  __device__ static cuda::atomic_ref<unsigned long long, ScopeOf<S>::value> ref(uint64_t* p) {
    return cuda::atomic_ref<unsigned long long, ScopeOf<S>::value>(*reinterpret_cast<unsigned long long*>(p));
  }

  static constexpr uint64_t kNewWaitNs = 50'000'000;  // far longer than 1024 polls take
  uint64_t timeout_ns_;
  const uint64_t* last_addr_ = nullptr;  // what the last sample saw
  uint64_t last_seen_ = 0, last_ns_ = 0;
  uint64_t start_ns_ = 0;                // when the current wait's deadline started
  uint32_t polls_ = 0;
  static constexpr uint32_t kEagerPolls = 16;
  const uint64_t* eager_addr_ = nullptr;  // the wait the eager polls count for
  uint64_t eager_seen_ = 0;
  uint32_t eager_ = 0;
};

using CudaCtx = BasicCudaCtx<true>;
using UnboundedCudaCtx = BasicCudaCtx<false>;

// Prints the timeouts kernels of this translation unit logged since the last call (the first
// kTimeoutRecords of them, and how many there were) and clears the log; returns how many.
// Call it with the kernels done.
inline unsigned long long report_timeouts(std::FILE* out = stderr) {
  TimeoutLog log;
  if (cudaMemcpyFromSymbol(&log, g_timeout_log, sizeof log) != cudaSuccess) return 0;
  for (unsigned long long k = 0; k < log.count && k < kTimeoutRecords; ++k) {
    const TimeoutRecord& r = log.first[k];
    char what[96] = "?";
    for (size_t i = 0; i + 1 < sizeof what; ++i)  // a byte at a time: the literal may end a page
      if (cudaMemcpy(what + i, r.what + i, 1, cudaMemcpyDeviceToHost) != cudaSuccess || what[i] == 0) break;
    what[sizeof what - 1] = 0;
    (void)cudaGetLastError();  // a failed read of the literal is not the caller's error
    std::fprintf(out, "doorbell: timeout after %llu ns: cta %u warp %u lane %u waited in \"%s\" on %p, last seen %llu\n",
                 (unsigned long long)r.ns, r.cta, r.thread >> 5, r.thread & 31u, what, static_cast<const void*>(r.addr),
                 (unsigned long long)r.seen);
  }
  if (log.count > kTimeoutRecords) std::fprintf(out, "doorbell: ... %llu timeouts in all\n", log.count);
  const TimeoutLog none{};
  (void)cudaMemcpyToSymbol(g_timeout_log, &none, sizeof none);
  return log.count;
}

}  // namespace doorbell::cuda_exec
