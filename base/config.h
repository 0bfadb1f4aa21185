// One place for the host/device annotation: core/ and hw/mlx5 headers compile unchanged
// under the host compiler (tests, fuzzers, the CPU model) and under nvcc (Hopper).
#pragma once

#if defined(__CUDACC__)
#define DOORBELL_HD __host__ __device__ __forceinline__
#else
// Host: plain inline. Forcing every protocol function inline (as __forceinline__ does on the
// device) made the heaviest host files compile several times slower for no gain in
// ibgda_bench, and slowed the NIC engine's use of the hw/mlx5 wire accessors.
#define DOORBELL_HD inline
#endif

// The uncommon half of a protocol step (the wait for an earlier span to publish, a transfer
// of several pieces): out of line on the host, so the step's common path is small and
// inlines without the rare path's registers and frame (callgrind shows the prologue and
// epilogue per step). The device keeps everything inline. Not every wait can go: split out
// of reserve and post_send's lock, the waits slow the GPU's thread-scope puts several times
// (lanes of one warp spinning on one QP; queue.h).
#if defined(__CUDACC__)
#define DOORBELL_HD_RARE __host__ __device__ __forceinline__
#else
#define DOORBELL_HD_RARE [[gnu::noinline]] inline
#endif

// The common path of a put (post_rma down to publish_wqe and submit), forced inline on the
// host too: left to GCC's budget, which of them it inlined changed with unrelated edits,
// and ibgda_bench with it. Their rare halves are DOORBELL_HD_RARE.
#if defined(__CUDACC__)
#define DOORBELL_HD_HOT __host__ __device__ __forceinline__
#else
#define DOORBELL_HD_HOT [[gnu::always_inline]] inline
#endif

// Out of line on the device too: code instantiated per (type, op) (nvls::with_type_op), called
// once per reduce step. Inlined into the kernel at each call site, 24 copies of it made
// gpu/nvls_bench.cu take minutes to compile. Also the rare operations of IBGDA failover's
// issue (core/ibgda/failover.h).
#if defined(__CUDACC__)
#define DOORBELL_HD_OUTLINED __host__ __device__ __noinline__
#else
#define DOORBELL_HD_OUTLINED inline
#endif
