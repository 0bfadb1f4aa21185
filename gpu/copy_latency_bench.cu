// What one copy costs the verbs shim's engine thread (hw/cuda/cuda_dma.h moves the client's
// device memory with copies; there is no load or store into it from the CPU): the wall time of
// each way of moving 8 B and 1 MiB between host and device memory on a non-blocking stream,
// median of many, while a kernel spins on the GPU as the client's do. Run by
// gpu/run-copy-latency-bench; GPU 0.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_dma.h"

namespace {

__global__ void spin(volatile int* stop, unsigned long long bound_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (*stop == 0 && t - t0 < bound_ns);
}

template <class F>
double median_us(int reps, F&& f) {
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

void row(const char* what, size_t bytes, double us) {
  std::printf("| %-58s | %8zu | %9.2f | %8.2f |\n", what, bytes, us, us > 0 ? double(bytes) / us / 1e3 : 0.0);
}

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));
  constexpr size_t kBig = 1 << 20;
  char* dev = nullptr;
  CHECK(cudaMalloc(&dev, kBig));
  std::vector<char> pageable(kBig, 1);
  char* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, kBig));
  int* stop = nullptr;
  CHECK(cudaMallocHost(&stop, sizeof(int)));
  *stop = 0;
  cudaStream_t spin_stream, s;
  CHECK(cudaStreamCreateWithFlags(&spin_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  spin<<<1, 32, 0, spin_stream>>>(stop, 20ull * 1000 * 1000 * 1000);  // a client kernel waiting on a flag
  auto dma = doorbell::cuda::CudaDma::create();
  if (!dma) return std::printf("copy_latency_bench: %s\n", dma.status().to_string().c_str()), 1;
  const CUstream cs = reinterpret_cast<CUstream>(s);
  const int reps = 2000;

  std::printf("| operation (a kernel spins meanwhile) | bytes | us, median | GB/s |\n|---|---|---|---|\n");
  CUmemorytype mt;
  row("cuPointerGetAttribute(MEMORY_TYPE), device pointer", 0,
      median_us(reps, [&] { cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(dev)); }));
  row("cuPointerGetAttribute(MEMORY_TYPE), malloc'd pointer", 0,
      median_us(reps, [&] { cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(pageable.data())); }));
  for (size_t n : {size_t(8), kBig}) {
    const int r = n == kBig ? 200 : reps;
    row("to device, pageable source, cuMemcpyAsync + cuStreamSynchronize", n, median_us(r, [&] {
          cuMemcpyAsync(CUdeviceptr(dev), CUdeviceptr(pageable.data()), n, cs), cuStreamSynchronize(cs);
        }));
    row("to device, pinned source, cuMemcpyAsync + cuStreamSynchronize", n, median_us(r, [&] {
          cuMemcpyAsync(CUdeviceptr(dev), CUdeviceptr(pinned), n, cs), cuStreamSynchronize(cs);
        }));
    row("to device, pinned source, cuMemcpyAsync only (posted)", n, median_us(r, [&] { cuMemcpyAsync(CUdeviceptr(dev), CUdeviceptr(pinned), n, cs); }));
    cuStreamSynchronize(cs);
    row("from device, pageable destination, + cuStreamSynchronize", n, median_us(r, [&] {
          cuMemcpyAsync(CUdeviceptr(pageable.data()), CUdeviceptr(dev), n, cs), cuStreamSynchronize(cs);
        }));
    row("from device, pinned destination, + cuStreamSynchronize", n, median_us(r, [&] {
          cuMemcpyAsync(CUdeviceptr(pinned), CUdeviceptr(dev), n, cs), cuStreamSynchronize(cs);
        }));
    row("from device, pinned destination, + spin on cuStreamQuery", n, median_us(r, [&] {
          cuMemcpyAsync(CUdeviceptr(pinned), CUdeviceptr(dev), n, cs);
          while (cuStreamQuery(cs) == CUDA_ERROR_NOT_READY) {
          }
        }));
    row("CudaDma::copy to device (the shim's path today)", n, median_us(r, [&] {
          (*dma)->copy(reinterpret_cast<std::byte*>(dev), reinterpret_cast<const std::byte*>(pageable.data()), n);
        }));
    row("CudaDma::copy from device (the shim's path today)", n, median_us(r, [&] {
          (*dma)->copy(reinterpret_cast<std::byte*>(pageable.data()), reinterpret_cast<const std::byte*>(dev), n);
        }));
  }
  row("CudaDma::fetch_add64 on a device word", 8, median_us(reps, [&] { (*dma)->fetch_add64(reinterpret_cast<std::byte*>(dev), 1); }));
  *stop = 1;
  CHECK(cudaDeviceSynchronize());
  std::printf("copy_latency_bench: %s\n", (*dma)->error().empty() ? "done" : (*dma)->error().c_str());
  return (*dma)->error().empty() ? 0 : 1;
}
