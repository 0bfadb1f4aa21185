// CHECK(call): stop with file:line and the CUDA error string when a runtime call fails;
// NCCLCHECK the same for NCCL (built with -DDOORBELL_WITH_NCCL). dalloc / dcopy: device
// arrays for the checks (filled, or copied from the host).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

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

template <class T>
T* dalloc(size_t n, int fill = 0) {
  T* p;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
  CHECK(cudaMemset(p, fill, n * sizeof(T)));
  return p;
}

template <class T>
T* dcopy(const std::vector<T>& v) {
  T* p = dalloc<T>(v.size());
  CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

#ifdef DOORBELL_WITH_NCCL
#include <nccl.h>

#define NCCLCHECK(x)                                                   \
  do {                                                                 \
    ncclResult_t r_ = (x);                                             \
    DOORBELL_FAIL_IF(r_ != ncclSuccess, x, ncclGetErrorString(r_));    \
  } while (0)
#endif
