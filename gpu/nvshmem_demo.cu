// An unmodified NVSHMEM 3.4 program over doorbell's software NIC (issue 16's demo): two PEs,
// one process and one GPU each, bootstrapped by unique id, with NVSHMEM's IBGDA transport
// as the only remote transport. What it drives is NVSHMEM's own device code (ibgda_device.cuh)
// and host set-up; the NIC it finds is the shim (host/verbs_shim) over the model. Built by
// gpu/run-nvshmem-demo against the pip wheel's headers and libraries (nvcc -rdc=true).
//
// Each PE: putmem_signal_nbi 1 MiB to the peer + quiet; signal_wait_until its own signal and
// checks the peer's bytes; getmem 1 MiB of the peer's source; 8- and 4-byte fetch-adds on
// the peer's counters (three each, so the old values must be 0, a, 2a in some order of the
// adds of both threads... here one thread: exactly 0, a, 2a); a barrier; its own counters
// then hold the peer's adds.
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/nvshmem_uid.h"

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr size_t kBytes = 1 << 20;

__device__ uint8_t pattern(int pe, size_t i) { return uint8_t(i * 13 + pe * 101 + 5); }

__global__ void fill(uint8_t* p, int pe) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kBytes; i += gridDim.x * blockDim.x) p[i] = pattern(pe, i);
}

struct Result {
  unsigned long long put_bad, get_bad, olds8[3], olds4[3];
};

__global__ void exchange(uint8_t* src, uint8_t* recv, uint8_t* got, uint64_t* sig, int64_t* c8, int* c4, Result* r) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  nvshmem_putmem_signal_nbi(recv, src, kBytes, sig, 1, NVSHMEM_SIGNAL_SET, peer);
  nvshmem_quiet();
  nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);  // the peer's bytes are here
  unsigned long long bad = 0;
  for (size_t i = 0; i < kBytes; ++i) bad += recv[i] != pattern(peer, i);
  r->put_bad = bad;
  nvshmem_getmem(got, src, kBytes, peer);
  bad = 0;
  for (size_t i = 0; i < kBytes; ++i) bad += got[i] != pattern(peer, i);
  r->get_bad = bad;
  for (int k = 0; k < 3; ++k) r->olds8[k] = (unsigned long long)nvshmem_uint64_atomic_fetch_add(reinterpret_cast<uint64_t*>(c8), 7, peer);
  for (int k = 0; k < 3; ++k) r->olds4[k] = (unsigned long long)nvshmem_int_atomic_fetch_add(c4, 5, peer);
  nvshmem_quiet();
}

// DEMO_TIMING=1: round trips and bandwidth through the shim. Signal ping-pong: PE 0 sets the
// peer's word to i and waits for its own to reach i, PE 1 answers each i. Put: PE 0 puts
// `puts` x 1 MiB and waits for them (quiet).
__global__ void signal_pingpong(uint64_t* sig, int iters) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  for (int i = 1; i <= iters; ++i) {
    if (me == 0) nvshmemx_signal_op(sig, uint64_t(i), NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, uint64_t(i));
    if (me == 1) nvshmemx_signal_op(sig, uint64_t(i), NVSHMEM_SIGNAL_SET, peer);
  }
  nvshmem_quiet();
}
__global__ void put_stream(uint8_t* dst, const uint8_t* src, int puts) {
  for (int i = 0; i < puts; ++i) nvshmem_putmem_nbi(dst, src, kBytes, 1);
  nvshmem_quiet();
}

void timing(int me, uint8_t* src, uint8_t* recv) {
  const int iters = 50, puts = 20;
  auto* sig = static_cast<uint64_t*>(nvshmem_calloc(1, 8));  // collective: both PEs time
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  nvshmem_barrier_all();
  CK(cudaEventRecord(a));
  signal_pingpong<<<1, 1>>>(sig, iters);
  CK(cudaEventRecord(b));
  CK(cudaDeviceSynchronize());
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  if (me == 0) std::printf("timing PE 0: signal round trip %.1f us (%d round trips)\n", 1000.0 * ms / iters, iters);
  nvshmem_barrier_all();
  if (me == 0) {
    CK(cudaEventRecord(a));
    put_stream<<<1, 1>>>(recv, src, puts);
    CK(cudaEventRecord(b));
    CK(cudaDeviceSynchronize());
    CK(cudaEventElapsedTime(&ms, a, b));
    std::printf("timing PE 0: putmem_nbi 1 MiB x %d + quiet: %.3f GB/s\n", puts, double(puts) * kBytes / (ms * 1e6));
  }
  nvshmem_barrier_all();
  nvshmem_free(sig);
}

int main() {
  const int rank = std::atoi(std::getenv("DEMO_RANK")), gpus = [] {
    int n = 0;
    cudaGetDeviceCount(&n);
    return n;
  }();
  const char* uid_file = std::getenv("DEMO_UID_FILE");
  CK(cudaSetDevice(rank % gpus));
  if (!init_pes_from_uid_file(rank, uid_file)) return 1;
  const int me = nvshmem_my_pe(), peer = 1 - me;
  auto step = [me](const char* what) { std::printf("demo PE %d: %s\n", me, what), std::fflush(stdout); };
  step("initialized");
  auto* src = static_cast<uint8_t*>(nvshmem_malloc(kBytes));
  auto* recv = static_cast<uint8_t*>(nvshmem_calloc(kBytes, 1));
  auto* got = static_cast<uint8_t*>(nvshmem_calloc(kBytes, 1));
  auto* sig = static_cast<uint64_t*>(nvshmem_calloc(1, 8));
  auto* c8 = static_cast<int64_t*>(nvshmem_calloc(1, 8));
  auto* c4 = static_cast<int*>(nvshmem_calloc(1, 4));
  Result* r;
  CK(cudaMallocManaged(&r, sizeof *r));
  std::memset(r, 0xff, sizeof *r);
  fill<<<64, 256>>>(src, me);
  CK(cudaDeviceSynchronize());
  step("heap allocated and filled");
  nvshmem_barrier_all();
  step("first barrier passed");
  exchange<<<1, 1>>>(src, recv, got, sig, c8, c4, r);
  CK(cudaDeviceSynchronize());
  step("exchange kernel done");
  nvshmem_barrier_all();  // the peer's fetch-adds on this PE's counters are done
  step("second barrier passed");
  int64_t mine8 = 0;
  int mine4 = 0;
  CK(cudaMemcpy(&mine8, c8, 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&mine4, c4, 4, cudaMemcpyDeviceToHost));
  const bool olds_ok = r->olds8[0] == 0 && r->olds8[1] == 7 && r->olds8[2] == 14 && r->olds4[0] == 0 && r->olds4[1] == 5 && r->olds4[2] == 10;
  const bool ok = r->put_bad == 0 && r->get_bad == 0 && olds_ok && mine8 == 21 && mine4 == 15;
  std::printf("PE %d of 2: putmem_signal_nbi 1 MiB + quiet + signal_wait_until: %llu bytes wrong; getmem 1 MiB: %llu bytes wrong; "
              "8-byte fetch-add olds %llu %llu %llu, 4-byte %llu %llu %llu; my counters after the peer's adds %lld / %d (want 21 / 15): %s\n",
              me, r->put_bad, r->get_bad, r->olds8[0], r->olds8[1], r->olds8[2], r->olds4[0], r->olds4[1], r->olds4[2], (long long)mine8, mine4,
              ok ? "OK" : "WRONG");
  (void)peer;
  if (const char* t = std::getenv("DEMO_TIMING"); t != nullptr && *t == '1') timing(me, src, recv);
  nvshmem_free(src), nvshmem_free(recv), nvshmem_free(got), nvshmem_free(sig), nvshmem_free(c8), nvshmem_free(c4);
  nvshmem_finalize();
  return ok ? 0 : 1;
}
