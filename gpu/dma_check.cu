// The NIC model's CUDA Dma (hw/cuda/cuda_dma.h) on a real GPU (run through the device tool;
// CI only compiles it). Two NIC models whose registered memory is cudaMalloc'd device memory:
//
// 1. WRITE 1 MiB device -> device, READ device -> host, fetch-add and compare-swap on a device
//    word with their results landing in device memory: checked with cudaMemcpy.
// 2. The default-stream hang: a kernel on the legacy default stream spins until a flag in
//    device memory is set, and the NIC sets it with an RDMA WRITE while the kernel runs. The
//    Dma's copy, on its own non-blocking stream, lands and the kernel ends at once. With the
//    Dma copying on the legacy stream instead, the copy waits behind the spinning kernel: the
//    kernel gives up after its bound (so the GPU is never held) and the check reports the hang
//    it reproduced.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_dma.h"
#include "hw/mock_nic/devx/rig.h"

using namespace doorbell;
using namespace doorbell::mock_nic;
using namespace doorbell::mock_nic::driver;

namespace {

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
constexpr size_t kHeap = 4 << 20;

__global__ void spin_until_set(volatile uint64_t* flag, unsigned long long bound_ns, unsigned long long* waited_ns,
                               volatile int* started) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  *started = 1;  // the host posts the WRITE only once the kernel spins
  __threadfence_system();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*flag == 0 && t - t0 < bound_ns);
  *waited_ns = t - t0;
}

int drain(SendQueue& q, int want) {
  int n = 0;
  while (const Cqe64* c = q.poll()) {
    if (c->opcode() != uint8_t(CqeOpcode::kReq)) {
      std::printf("dma_check: error CQE, syndrome 0x%x\n", reinterpret_cast<const ErrCqe64*>(c)->syndrome);
      return -1;
    }
    ++n;
  }
  if (n != want) std::printf("dma_check: %d of %d CQEs\n", n, want);
  return n;
}

// One run: 1 over the Dma's stream (legacy: on the legacy default stream). Returns failures.
int run(bool legacy) {
  CHECK(cudaFree(nullptr));  // the runtime's primary context, current on this thread
  auto dma = cuda::CudaDma::create(legacy);
  if (!dma) return std::printf("dma_check: %s\n", dma.status().to_string().c_str()), 1;
  Rig rig(2);
  std::byte* heap[2];
  uint32_t key[2];
  for (int i = 0; i < 2; ++i) {
    rig.nic(i).set_dma(dma->get());
    CHECK(cudaMalloc(&heap[i], kHeap));
    CHECK(cudaMemset(heap[i], 0, kHeap));
    if (Status s = rig.mem.map_external(heap[i], kHeap, mem::MemKind::kGpu, "cuda heap"); !s) return std::printf("%s\n", s.to_string().c_str()), 1;
    key[i] = rig.reg(reinterpret_cast<uint64_t>(heap[i]), kHeap, kAll, i);
  }
  const uint64_t h0 = reinterpret_cast<uint64_t>(heap[0]), h1 = reinterpret_cast<uint64_t>(heap[1]);
  const uint64_t host = rig.alloc(1 << 20);
  const uint32_t hkey = rig.reg(host, 1 << 20, kAll, 0);
  std::vector<uint8_t> pattern(1 << 20);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint8_t(i * 7 + 3);
  CHECK(cudaMemcpy(heap[0], pattern.data(), pattern.size(), cudaMemcpyHostToDevice));
  SendQueue a = rig.make_sq(0, 6, 6), b = rig.make_sq(1, 6, 6);
  rig.connect(a, b);
  int bad = 0;

  if (!legacy) {
    a.write(key[0], h0, 1 << 20, key[1], h1);                                        // device -> device
    a.read(hkey, host, 4096, key[1], h1 + 8192);                                       // device -> host
    a.atomic(mlx5::WqeOpcode::kAtomicFa, 5, 0, key[0], h0 + (2 << 20), key[1], h1 + (3 << 20));
    a.atomic(mlx5::WqeOpcode::kAtomicCs, 77, 5, key[0], h0 + (2 << 20) + 8, key[1], h1 + (3 << 20));
    a.ring_doorbell();
    rig.run();
    if (drain(a, 4) != 4) ++bad;
    std::vector<uint8_t> got(1 << 20);
    CHECK(cudaMemcpy(got.data(), heap[1], got.size(), cudaMemcpyDeviceToHost));
    if (got != pattern) std::printf("dma_check: the 1 MiB WRITE landed wrong\n"), ++bad;
    if (std::memcmp(rig.mem.translate(host, 4096), pattern.data() + 8192, 4096) != 0) std::printf("dma_check: READ data wrong\n"), ++bad;
    uint64_t word = 0, olds[2] = {9, 9};
    CHECK(cudaMemcpy(&word, heap[1] + (3 << 20), 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(olds, heap[0] + (2 << 20), 16, cudaMemcpyDeviceToHost));
    if (word != 77 || olds[0] != 0 || olds[1] != 5)
      std::printf("dma_check: atomics: word %llu (want 77), old values %llu, %llu (want 0, 5)\n", (unsigned long long)word,
                  (unsigned long long)olds[0], (unsigned long long)olds[1]), ++bad;
    std::printf("dma_check: WRITE 1 MiB device->device, READ 4 KiB device->host, fetch-add + compare-swap on device memory: %s "
                "(%llu copies, %llu bytes through cuMemcpyAsync)\n",
                bad == 0 ? "OK" : "FAILED", (unsigned long long)(*dma)->copies(), (unsigned long long)(*dma)->bytes());
  }

  // The spinning kernel and the NIC's WRITE of its flag.
  uint64_t one = 1;
  CHECK(cudaMemcpy(heap[0] + 4096, &one, 8, cudaMemcpyHostToDevice));
  unsigned long long* waited = nullptr;
  int* started = nullptr;
  CHECK(cudaMallocHost(&waited, sizeof *waited));
  CHECK(cudaMallocHost(&started, sizeof *started));
  *waited = 0, *started = 0;
  const unsigned long long bound_ns = 3'000'000'000ull;
  spin_until_set<<<1, 1, 0, 0>>>(reinterpret_cast<volatile uint64_t*>(heap[1] + (3 << 20) + 64), bound_ns, waited, started);  // legacy default stream
  CHECK(cudaGetLastError());
  while (__atomic_load_n(started, __ATOMIC_ACQUIRE) == 0) {
  }
  a.write(key[0], h0 + 4096, 8, key[1], h1 + (3 << 20) + 64);
  a.ring_doorbell();
  rig.run();  // the engine's copy: on the Dma's stream
  const int cqes = drain(a, 1);
  CHECK(cudaDeviceSynchronize());
  const bool gave_up = *waited >= bound_ns;
  if (!legacy) {
    std::printf("dma_check: a kernel on the legacy stream spinning on a flag the NIC writes: %s after %.3f ms\n",
                gave_up ? "HUNG (gave up)" : "released", double(*waited) / 1e6);
    if (gave_up || *waited == 0 || cqes != 1) ++bad;  // it spun, and the NIC's WRITE released it
  } else {
    std::printf("dma_check: the same with the Dma copying on the legacy stream: %s (kernel waited %.3f ms)\n",
                gave_up ? "hangs, as expected: the default-stream hang reproduced" : "did NOT hang", double(*waited) / 1e6);
    if (!gave_up) ++bad;
  }
  if (!(*dma)->error().empty()) std::printf("dma_check: %s\n", (*dma)->error().c_str()), ++bad;
  CHECK(cudaFreeHost(waited));
  CHECK(cudaFreeHost(started));
  for (std::byte* h : heap) CHECK(cudaFree(h));
  return bad;
}

}  // namespace

int main() {
  const int bad = run(false) + run(true);
  std::printf("dma_check: %s\n", bad == 0 ? "all OK" : "FAILED");
  return bad == 0 ? 0 : 1;
}
