// Builds core/nvls's kernels over the real multimem instructions (hw/cuda/nvls_multimem.cuh)
// and shows the guard: without DOORBELL_ALLOW_MULTICAST=1 the set-up refuses to create a
// multicast object and nothing runs. Never set it on the lent machines.
#include <cuda_runtime.h>

#include <cstdio>

#include "core/nvls/collective.h"
#include "hw/cuda/cuda_ctx.cuh"
#include "hw/cuda/nvls_multimem.cuh"

using namespace doorbell;

namespace {
struct Mcs {
  cuda_exec::MultimemMc* v;
  uint32_t channels;
  __device__ cuda_exec::MultimemMc& at(uint32_t h, uint32_t c) const { return v[h * channels + c]; }
  // Registered buffers are not bound here (Args::registered stays false): never reached.
  __device__ cuda_exec::MultimemMc& input() const { __trap(); return v[0]; }
  __device__ cuda_exec::MultimemMc& output() const { __trap(); return v[0]; }
};
}  // namespace

__global__ void nvls_multimem_kernel(Mcs m, nvls::Args a, unsigned* bad) {
  cuda_exec::CudaCtx ctx;
  if (__syncthreads_or(!nvls::nvls_cta(ctx, m, a, blockIdx.x, threadIdx.x, blockDim.x)) && threadIdx.x == 0) atomicAdd(bad, 1u);
}

int main() {
  cuda_exec::MultimemMc views[2];
  const int devs[2] = {0, 1};
  if (!cuda_exec::nvls_multicast_setup(devs, 2, 1 << 20, views)) {
    std::printf("nvls_multimem_check: multimem kernels built; multicast set-up refused, as it must be here\n");
    return 0;
  }
  std::printf("nvls_multimem_check: multicast objects created (DOORBELL_ALLOW_MULTICAST=1); no run is wired here\n");
  return 0;
}
