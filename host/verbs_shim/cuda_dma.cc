// The shim's CUDA plugin (libdoorbell_shim_cuda.so, loaded by the shim only when asked for,
// so the shim itself never needs libcuda): the engine thread works in device `ordinal`'s
// primary context, the one the program's CUDA runtime uses.
#include <cuda.h>

#include <cstdio>
#include <string>

#include "hw/cuda/cuda_dma.h"

extern "C" doorbell::mock_nic::Dma* doorbell_shim_make_cuda_dma(int ordinal, char* why, size_t why_len) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cuCtxPushCurrent(ctx) != CUDA_SUCCESS) {
    std::snprintf(why, why_len, "no CUDA device %d", ordinal);
    return nullptr;
  }
  auto d = doorbell::cuda::CudaDma::create();
  CUcontext popped;
  cuCtxPopCurrent(&popped);
  if (!d) {
    std::snprintf(why, why_len, "%s", d.status().to_string().c_str());
    return nullptr;
  }
  return d->release();
}
