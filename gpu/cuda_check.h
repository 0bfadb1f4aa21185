// CHECK(call): stop with file:line and the CUDA error string when a runtime call fails;
// NCCLCHECK the same for NCCL (built with -DDOORBELL_WITH_NCCL).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

// Stop with file:line, the call's text and the library's message when `bad` holds.
#define DOORBELL_FAIL_IF(bad, x, msg)                                        \
  do {                                                                       \
    if (bad) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, msg); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

#define CHECK(x)                                                       \
  do {                                                                 \
    cudaError_t e_ = (x);                                              \
    DOORBELL_FAIL_IF(e_ != cudaSuccess, x, cudaGetErrorString(e_));    \
  } while (0)

#ifdef DOORBELL_WITH_NCCL
#include <nccl.h>

#define NCCLCHECK(x)                                                   \
  do {                                                                 \
    ncclResult_t r_ = (x);                                             \
    DOORBELL_FAIL_IF(r_ != ncclSuccess, x, ncclGetErrorString(r_));    \
  } while (0)
#endif
