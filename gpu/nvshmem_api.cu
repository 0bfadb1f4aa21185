// NVSHMEM-API programs over the verbs shim (issue 37): two PEs, one process each, built against
// the pip wheel and run by gpu/run-nvshmem-api exactly as gpu/run-nvshmem-demo runs its demo
// (unique-id bootstrap, IBGDA in CPU-assisted mode over the shim's mlx5_0). Each program
// checks its data; PE 0 prints a table row per program: pass / FAIL and its rate or
// bandwidth. Programs: put and get bandwidth at thread / warp / block scope, 8 B - 4 MiB; p
// and g rates; every AMO NVSHMEM has at 4 and 8 bytes (fetch and non-fetch) and signal set /
// add; a put-with-signal ping-pong; fence ordering; quiet; barrier.
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "gpu/nvshmem_api_expect.h"
#include "gpu/nvshmem_uid.h"

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

using doorbell::nvshmem_api::pattern;
constexpr size_t kMax = 4 << 20;

__global__ void fill(uint8_t* p, size_t n, int pe, int round) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = pattern(pe, i, round);
}
__global__ void count_bad(const uint8_t* p, size_t n, int pe, int round, unsigned long long* bad) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (p[i] != pattern(pe, i, round)) atomicAdd(bad, 1ull);
}

// `iters` transfers of `n` bytes at a scope (0 thread, 1 warp, 2 block), then quiet. put:
// into the peer's `remote`; get: from the peer's `remote` into `local`.
__global__ void move(uint8_t* remote, uint8_t* local, size_t n, int iters, int scope, bool get) {
  const int peer = 1 - nvshmem_my_pe();
  for (int i = 0; i < iters; ++i) {
    if (scope == 0 && threadIdx.x == 0) get ? nvshmem_getmem_nbi(local, remote, n, peer) : nvshmem_putmem_nbi(remote, local, n, peer);
    if (scope == 1 && threadIdx.x < 32) get ? nvshmemx_getmem_nbi_warp(local, remote, n, peer) : nvshmemx_putmem_nbi_warp(remote, local, n, peer);
    if (scope == 2) get ? nvshmemx_getmem_nbi_block(local, remote, n, peer) : nvshmemx_putmem_nbi_block(remote, local, n, peer);
  }
  __syncthreads();
  if (threadIdx.x == 0) nvshmem_quiet();
}

__global__ void p_stream(long* word, int iters) {
  for (int i = 1; i <= iters; ++i) nvshmem_long_p(word, long(i), 1);
  nvshmem_quiet();
}
__global__ void g_stream(const long* word, int iters, long* out) {
  long sum = 0;
  for (int i = 0; i < iters; ++i) sum += nvshmem_long_g(word, 1);
  *out = sum;
}

// Every AMO on the peer's words, in order; `olds` gets what each fetching one returned.
struct Amo {
  uint64_t w8[8];
  uint32_t w4[8];
  uint64_t sig[2];
};
__global__ void amos(Amo* a, unsigned long long* olds) {
  const int peer = 1;
  int k = 0;
  nvshmem_uint64_atomic_set(&a->w8[0], 100, peer);
  nvshmem_uint64_atomic_add(&a->w8[0], 5, peer);                                   // 105
  olds[k++] = nvshmem_uint64_atomic_fetch_add(&a->w8[0], 10, peer);                  // 105 -> 115
  nvshmem_uint64_atomic_inc(&a->w8[0], peer);                                        // 116
  olds[k++] = nvshmem_uint64_atomic_fetch_inc(&a->w8[0], peer);                      // 116 -> 117
  olds[k++] = nvshmem_uint64_atomic_swap(&a->w8[1], 0xf0f0, peer);                   // 0 -> 0xf0f0
  olds[k++] = nvshmem_uint64_atomic_compare_swap(&a->w8[1], 0xf0f0, 0xff00, peer);   // 0xf0f0 -> 0xff00
  olds[k++] = nvshmem_uint64_atomic_compare_swap(&a->w8[1], 1, 2, peer);             // no swap: 0xff00
  nvshmem_uint64_atomic_and(&a->w8[1], 0x0ff0, peer);                                // 0x0f00
  nvshmem_uint64_atomic_or(&a->w8[1], 0x000f, peer);                                 // 0x0f0f
  nvshmem_uint64_atomic_xor(&a->w8[1], 0x0101, peer);                                // 0x0e0e
  olds[k++] = nvshmem_uint64_atomic_fetch_and(&a->w8[1], 0x00ff, peer);              // 0x0e0e -> 0x000e
  olds[k++] = nvshmem_uint64_atomic_fetch_or(&a->w8[1], 0x1000, peer);               // 0x000e -> 0x100e
  olds[k++] = nvshmem_uint64_atomic_fetch_xor(&a->w8[1], 0x000e, peer);              // 0x100e -> 0x1000
  olds[k++] = nvshmem_uint64_atomic_fetch(&a->w8[1], peer);                          // 0x1000
  nvshmem_uint32_atomic_set(&a->w4[0], 7, peer);
  nvshmem_uint32_atomic_add(&a->w4[0], 3, peer);                                     // 10
  olds[k++] = nvshmem_uint32_atomic_fetch_add(&a->w4[0], 5, peer);                   // 10 -> 15
  nvshmem_uint32_atomic_inc(&a->w4[0], peer);                                        // 16
  olds[k++] = nvshmem_uint32_atomic_fetch_inc(&a->w4[0], peer);                      // 16 -> 17
  olds[k++] = nvshmem_uint32_atomic_swap(&a->w4[1], 0xabcd, peer);                   // 0 -> 0xabcd
  olds[k++] = nvshmem_uint32_atomic_compare_swap(&a->w4[1], 0xabcd, 0x1234, peer);   // -> 0x1234
  nvshmem_uint32_atomic_and(&a->w4[1], 0x0ff0, peer);                                // 0x0230
  nvshmem_uint32_atomic_or(&a->w4[1], 0x0001, peer);                                 // 0x0231
  nvshmem_uint32_atomic_xor(&a->w4[1], 0x0030, peer);                                // 0x0201
  olds[k++] = nvshmem_uint32_atomic_fetch_and(&a->w4[1], 0x0f01, peer);              // 0x0201 -> 0x0201
  olds[k++] = nvshmem_uint32_atomic_fetch_or(&a->w4[1], 0x8000, peer);               // 0x0201 -> 0x8201
  olds[k++] = nvshmem_uint32_atomic_fetch_xor(&a->w4[1], 0x0001, peer);              // 0x8201 -> 0x8200
  olds[k++] = nvshmem_uint32_atomic_fetch(&a->w4[1], peer);                          // 0x8200
  nvshmemx_signal_op(&a->sig[0], 9, NVSHMEM_SIGNAL_SET, peer);
  nvshmemx_signal_op(&a->sig[1], 4, NVSHMEM_SIGNAL_ADD, peer);
  nvshmemx_signal_op(&a->sig[1], 6, NVSHMEM_SIGNAL_ADD, peer);                       // 10
  nvshmem_quiet();
}
using doorbell::nvshmem_api::kAmoOlds;

__global__ void get_int(const int* p, long* out) { *out = nvshmem_int_g(p, 1); }

__global__ void amo_rate(uint64_t* w, int iters) {
  for (int i = 0; i < iters; ++i) (void)nvshmem_uint64_atomic_fetch_add(w, 1, 1);
}

// Ping-pong of 8-byte puts with a signal: PE 0 sends i, PE 1 answers i.
__global__ void putsig_pingpong(uint64_t* data, const uint64_t* src, uint64_t* sig, int iters) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  for (int i = 1; i <= iters; ++i) {
    if (me == 0) nvshmem_putmem_signal(data, src, 8, sig, uint64_t(i), NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, uint64_t(i));
    if (me == 1) nvshmem_putmem_signal(data, src, 8, sig, uint64_t(i), NVSHMEM_SIGNAL_SET, peer);
  }
  nvshmem_quiet();
}

// fence: PE 0 puts x = i, fences, puts flag = i; PE 1 sees flag = i and then x must be i.
// quiet: the same with quiet (x complete) before a signal.
__global__ void ordering(uint64_t* x, uint64_t* flag, const uint64_t* vals, int iters, bool use_quiet, unsigned long long* bad) {
  const int me = nvshmem_my_pe();
  for (int i = 1; i <= iters; ++i) {
    if (me == 0) {
      nvshmem_putmem_nbi(x, &vals[i], 8, 1);
      if (use_quiet) nvshmem_quiet();
      else nvshmem_fence();
      nvshmem_putmem_nbi(flag, &vals[i], 8, 1);
      nvshmem_uint64_wait_until(flag, NVSHMEM_CMP_GE, uint64_t(i));  // PE 1's acknowledgement
    } else {
      nvshmem_uint64_wait_until(flag, NVSHMEM_CMP_GE, uint64_t(i));
      if (*static_cast<volatile uint64_t*>(x) != uint64_t(i)) ++*bad;
      nvshmem_uint64_atomic_set(flag, uint64_t(i), 0);
    }
  }
  nvshmem_quiet();
}

__global__ void barriers(uint64_t* counter, int iters, unsigned long long* bad) {
  for (int i = 1; i <= iters; ++i) {
    nvshmem_uint64_atomic_add(counter, 1, 1 - nvshmem_my_pe());
    nvshmem_barrier_all();  // both adds of round i are in
    if (*static_cast<volatile uint64_t*>(counter) < uint64_t(i)) ++*bad;
    nvshmem_barrier_all();
  }
}

double ms_of(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

int main() {
  const int rank = std::atoi(std::getenv("DEMO_RANK"));
  int gpus = 0;
  CK(cudaGetDeviceCount(&gpus));
  CK(cudaSetDevice(rank % gpus));
  const char* uid_file = std::getenv("DEMO_UID_FILE");
  if (!init_pes_from_uid_file(rank, uid_file)) return 1;
  const int me = nvshmem_my_pe(), peer = 1 - me;

  auto* buf = static_cast<uint8_t*>(nvshmem_malloc(kMax));   // what puts write and gets read
  auto* local = static_cast<uint8_t*>(nvshmem_malloc(kMax)); // the source of puts, the target of gets
  auto* amo = static_cast<Amo*>(nvshmem_calloc(1, sizeof(Amo)));
  auto* words = static_cast<uint64_t*>(nvshmem_calloc(16, 8));
  auto* vals = static_cast<uint64_t*>(nvshmem_malloc(8 * 1024));
  unsigned long long* dbad;
  unsigned long long* olds;
  long* gsum;
  CK(cudaMallocManaged(&dbad, 8));
  CK(cudaMallocManaged(&olds, 64 * 8));
  CK(cudaMallocManaged(&gsum, 8));
  {
    uint64_t v[1024];
    for (int i = 0; i < 1024; ++i) v[i] = uint64_t(i);
    CK(cudaMemcpy(vals, v, sizeof v, cudaMemcpyHostToDevice));
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int failures = 0;
  // The shim's profile of each program, where the verbs library NVSHMEM loaded (locally, so
  // found by name) is doorbell's (a real rdma-core has no such symbol): after each row.
  using Profile = size_t (*)(char*, size_t, int);
  // NVSHMEM_API_PROFILE=1: the measured part of each program only (prof_start / prof_stop).
  void* verbs = std::getenv("NVSHMEM_API_PROFILE") != nullptr ? dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD) : nullptr;
  auto profile = verbs != nullptr ? reinterpret_cast<Profile>(dlsym(verbs, "doorbell_shim_profile")) : nullptr;
  static char prof[4096] = "";
  auto prof_start = [&] {
    if (profile != nullptr) profile(nullptr, 0, 1);
  };
  auto prof_stop = [&] {
    if (profile != nullptr) profile(prof, sizeof prof, 0);
  };
  auto row = [&](const char* name, bool ok, const char* figure) {
    if (!ok) ++failures;
    if (me == 0) std::printf("| %-40s | %-4s | %s |\n", name, ok ? "pass" : "FAIL", figure), std::fflush(stdout);
    if (prof[0] != 0) std::fprintf(stderr, "[%s]\n%s", name, prof), prof[0] = 0;
  };
  auto bad_in = [&](const uint8_t* p, size_t n, int pe, int round) {
    *dbad = 0;
    count_bad<<<256, 256>>>(p, n, pe, round, dbad);
    CK(cudaDeviceSynchronize());
    return *dbad;
  };
  // Both PEs' verdicts, through a symmetric word PE 0 reads with a host-side g.
  auto* verdict = static_cast<int*>(nvshmem_malloc(4));
  auto agree = [&](bool mine) {
    const int v = mine;
    CK(cudaMemcpy(verdict, &v, 4, cudaMemcpyHostToDevice));
    nvshmem_barrier_all();
    int theirs = 1;
    if (me == 0) {  // host-side RMA is not on IBGDA's path: a one-thread kernel gets it
      get_int<<<1, 1>>>(verdict, gsum);
      CK(cudaDeviceSynchronize());
      theirs = int(*gsum);
    }
    nvshmem_barrier_all();
    return mine && theirs == 1;
  };
  if (me == 0) std::printf("| program | result | figure |\n|---|---|---|\n");

  // put / get bandwidth, thread / warp / block, 8 B - 4 MiB.
  const char* scopes[] = {"thread", "warp", "block"};
  const size_t sizes[] = {8, 4096, 65536, 1 << 20, 4 << 20};
  int round = 0;
  for (int get = 0; get < 2; ++get)
    for (int scope = 0; scope < 3; ++scope)
      for (size_t n : sizes) {
        ++round;
        const int iters = n <= 4096 ? 64 : n <= 65536 ? 16 : 4;
        fill<<<256, 256>>>(get ? buf : local, kMax, me, round);
        CK(cudaMemset(get ? local : buf, 0, kMax));
        CK(cudaDeviceSynchronize());
        nvshmem_barrier_all();
        double ms = 0;
        if (me == 0) {
          prof_start();
          CK(cudaEventRecord(a));
          move<<<1, scope == 2 ? 256 : 32>>>(buf, local, n, iters, scope, get);
          CK(cudaEventRecord(b));
          CK(cudaDeviceSynchronize());
          prof_stop();
          ms = ms_of(a, b);
        }
        nvshmem_barrier_all();
        // put: PE 1 holds PE 0's bytes; get: PE 0 holds PE 1's.
        unsigned long long bad = 0;
        if (!get && me == 1) bad = bad_in(buf, n, 0, round);
        if (get && me == 0) bad = bad_in(local, n, 1, round);
        const bool ok = agree(bad == 0);
        char name[64], fig[96];
        std::snprintf(name, sizeof name, "%s %s %zu B", get ? "get" : "put", scopes[scope], n);
        std::snprintf(fig, sizeof fig, "%.4f GB/s (%d x, %.3f ms)", ms > 0 ? double(n) * iters / (ms * 1e6) : 0.0, iters, ms);
        row(name, ok, fig);
      }

  // p and g rates: PE 1 checks the last value put, PE 0 the sum of what it got.
  {
    const int iters = 512;
    double pms = 0, gms = 0;
    nvshmem_barrier_all();
    if (me == 0) {
      prof_start();
      CK(cudaEventRecord(a));
      p_stream<<<1, 1>>>(reinterpret_cast<long*>(&words[0]), iters);
      CK(cudaEventRecord(b));
      CK(cudaDeviceSynchronize());
      prof_stop();
      pms = ms_of(a, b);
    }
    nvshmem_barrier_all();
    long last = 0;
    CK(cudaMemcpy(&last, &words[0], 8, cudaMemcpyDeviceToHost));
    char fig[96];
    std::snprintf(fig, sizeof fig, "%.0f puts/s (%d x long_p + quiet)", me == 0 ? iters / (pms / 1e3) : 0.0, iters);
    row("p rate", agree(me == 0 || last == iters), fig);
    if (me == 0) {
      prof_start();
      CK(cudaEventRecord(a));
      g_stream<<<1, 1>>>(reinterpret_cast<long*>(&words[0]), 64, gsum);
      CK(cudaEventRecord(b));
      CK(cudaDeviceSynchronize());
      prof_stop();
      gms = ms_of(a, b);
    }
    std::snprintf(fig, sizeof fig, "%.0f gets/s (64 x long_g)", me == 0 ? 64 / (gms / 1e3) : 0.0);
    const bool got_all = me == 1 || *gsum == 64L * iters;
    row("g rate", agree(got_all), fig);
  }

  // Every AMO, then the signal ops; PE 1 checks its words, PE 0 the fetched values.
  if (me == 0) {
    amos<<<1, 1>>>(amo, olds);
    CK(cudaDeviceSynchronize());
  }
  nvshmem_barrier_all();
  {
    Amo mine{};
    CK(cudaMemcpy(&mine, amo, sizeof mine, cudaMemcpyDeviceToHost));
    bool ok = true;
    if (me == 1)
      for (int k = 0; k < 2; ++k)
        ok &= mine.w8[k] == doorbell::nvshmem_api::kAmoW8[k] && mine.w4[k] == doorbell::nvshmem_api::kAmoW4[k] &&
              mine.sig[k] == doorbell::nvshmem_api::kAmoSig[k];
    if (me == 0)
      for (size_t k = 0; k < std::size(kAmoOlds); ++k) ok &= olds[k] == kAmoOlds[k];
    row("AMOs 8 B + 4 B (fetch, non-fetch), signal set / add", agree(ok), "17 fetched values, 6 final words");
  }
  {
    double ms = 0;
    if (me == 0) {
      prof_start();
      CK(cudaEventRecord(a));
      amo_rate<<<1, 1>>>(&words[1], 128);
      CK(cudaEventRecord(b));
      CK(cudaDeviceSynchronize());
      prof_stop();
      ms = ms_of(a, b);
    }
    nvshmem_barrier_all();
    uint64_t n = 0;
    CK(cudaMemcpy(&n, &words[1], 8, cudaMemcpyDeviceToHost));
    char fig[96];
    std::snprintf(fig, sizeof fig, "%.0f fetch-adds/s (128 x, each waited for)", me == 0 ? 128 / (ms / 1e3) : 0.0);
    row("atomic fetch-add rate", agree(me == 0 || n == 128), fig);
  }

  // put-with-signal ping-pong.
  {
    const int iters = 100;
    prof_start();
    CK(cudaEventRecord(a));
    putsig_pingpong<<<1, 1>>>(&words[2], &vals[7], &words[3], iters);
    CK(cudaEventRecord(b));
    CK(cudaDeviceSynchronize());
    prof_stop();
    uint64_t last = 0;
    CK(cudaMemcpy(&last, &words[2], 8, cudaMemcpyDeviceToHost));
    char fig[96];
    std::snprintf(fig, sizeof fig, "%.1f us round trip (%d x)", 1000.0 * ms_of(a, b) / iters, iters);
    row("put-with-signal ping-pong", agree(last == doorbell::nvshmem_api::kPingPongValue), fig);
  }
  nvshmem_barrier_all();

  // fence and quiet ordering.
  for (int q = 0; q < 2; ++q) {
    *dbad = 0;
    CK(cudaMemset(&words[4], 0, 16));
    nvshmem_barrier_all();
    ordering<<<1, 1>>>(&words[4], &words[5], vals, 200, q == 1, dbad);
    CK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    row(q ? "quiet: put, quiet, put flag - in order" : "fence: put, fence, put flag - in order", agree(*dbad == 0), "200 rounds, PE 1 checks");
  }
  // barrier.
  {
    *dbad = 0;
    CK(cudaMemset(&words[6], 0, 8));
    nvshmem_barrier_all();
    prof_start();
    CK(cudaEventRecord(a));
    barriers<<<1, 1>>>(&words[6], 20, dbad);
    CK(cudaEventRecord(b));
    CK(cudaDeviceSynchronize());
    prof_stop();
    char fig[96];
    std::snprintf(fig, sizeof fig, "%.1f us per barrier_all (40, device side)", 1000.0 * ms_of(a, b) / 40);
    row("barrier", agree(*dbad == 0), fig);
  }
  nvshmem_barrier_all();
  std::printf("PE %d: %d program(s) failed\n", me, failures);
  (void)peer;
  nvshmem_free(buf), nvshmem_free(local), nvshmem_free(amo), nvshmem_free(words), nvshmem_free(vals), nvshmem_free(verdict);
  nvshmem_finalize();
  return failures == 0 ? 0 : 1;
}
