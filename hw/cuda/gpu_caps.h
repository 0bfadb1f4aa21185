// What the CUDA driver says of a GPU that the IBGDA device state depends on (host code).
#pragma once

#include <cuda_runtime.h>

namespace doorbell::cuda_exec {

// Whether the GPU's threads see GPUDirect RDMA writes in the order the NIC made them (at least
// "owner" ordering: Hopper). Where it does, the protocol may skip CSTs (Options::may_skip_cst);
// where it does not (Ampere), every READ and fetch needs one before its data is read.
inline bool gpu_direct_writes_ordered(int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMAWritesOrdering, device) != cudaSuccess) return false;
  return v >= cudaGPUDirectRDMAWritesOrderingOwner;
}

}  // namespace doorbell::cuda_exec
