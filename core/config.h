// One place for the host/device annotation: core/ and hw/mlx5 headers compile unchanged
// under the host compiler (tests, fuzzers, the CPU model) and under nvcc (Hopper).
#pragma once

#if defined(__CUDACC__)
#define DOORBELL_HD __host__ __device__ __forceinline__
#else
#define DOORBELL_HD inline __attribute__((always_inline))
#endif
