// Queue memory in GPU memory (cudaMalloc), as NVSHMEM places NIC buffers by default; host
// requests get pinned host memory. Registering GPU memory as a umem needs GPUDirect RDMA
// (nvidia-peermem or dma-buf) on the machine.
#pragma once

#include "hw/mlx5_devx/queue_set.h"

namespace doorbell::cuda_exec {

class CudaQueueMemory final : public devx::QueueMemory {
 public:
  Result<void*> alloc(size_t bytes, bool gpu) override;
  void free(void* p) override;
  Status fill(void* p, uint8_t byte, size_t n) override;
};

}  // namespace doorbell::cuda_exec
