#include "hw/cuda/cuda_queue_memory.h"

#include <cuda_runtime_api.h>

#include <string>

namespace doorbell::cuda_exec {

namespace {
Status cuda_error(const char* what, cudaError_t e) {
  return Status(Errc::kNoResource, std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

Result<void*> CudaQueueMemory::alloc(size_t bytes, bool gpu) {
  void* p = nullptr;
  const cudaError_t e = gpu ? cudaMalloc(&p, bytes) : cudaHostAlloc(&p, bytes, cudaHostAllocMapped);
  if (e != cudaSuccess) return cuda_error(gpu ? "cudaMalloc" : "cudaHostAlloc", e);
  if (Status st = fill(p, 0, bytes); !st) return st;
  return p;
}

void CudaQueueMemory::free(void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost)
    (void)cudaFreeHost(p);
  else
    (void)cudaFree(p);
}

Status CudaQueueMemory::fill(void* p, uint8_t byte, size_t n) {
  const cudaError_t e = cudaMemset(p, byte, n);
  return e == cudaSuccess ? Status() : cuda_error("cudaMemset", e);
}

}  // namespace doorbell::cuda_exec
