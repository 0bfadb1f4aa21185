// GPU benchmark of the copy-engine P2P transport (run through the device tool, never in CI):
// core/p2p's FIFO on two GPUs of one host — the kernel side (CudaCtx) moves the counters, a
// host proxy thread per GPU runs send_proxy_progress with cudaMemcpyAsync on a non-blocking
// stream (registered buffers: copies go straight from the send to the peer's receive buffer) —
// as an alltoall, printed as nccl-tests rows beside the raw peer copy bandwidth and, when built
// with -DDOORBELL_WITH_NCCL, NCCL's alltoall (ncclSend / ncclRecv in a group) in the same run.
// Single process, peer access (the two-process IPC bootstrap is later work).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/p2p/ce_fifo.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_ctx.cuh"


using doorbell::cuda_exec::CudaCtx;
using namespace doorbell;

namespace {

constexpr int kGpus = 2;
constexpr int kIters = 5;
// Steps per connection and alltoall (argv[1]), each at least 512 KiB. Registered buffers need no
// FIFO staging, so fewer, larger copies win: 2 by default (a sweep of 1, 2, 4, 8 is in the note).
uint64_t g_steps = 2;

// The kernel of one GPU: thread 0 posts the outgoing connection's steps, thread 1 consumes the
// incoming one's (registered buffers: no bytes through the FIFO).
__global__ void ce_kernel(p2p::Conn out, p2p::Conn in, uint64_t bytes, uint64_t base, unsigned* bad) {
  CudaCtx ctx;
  const p2p::Plants none{};
  if (threadIdx.x == 0 && p2p::ce_send(ctx, out, base, nullptr, bytes, none) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
  if (threadIdx.x == 1 && p2p::ce_recv(ctx, in, base, nullptr, bytes) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
}

// send_proxy_progress's host: shared words in mapped host memory, copies and events on the
// connection's non-blocking stream.
struct CudaHost {
  cudaStream_t stream;
  cudaEvent_t* events;
  uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  void memcpy_async(void* dst, const void* src, uint64_t n) { CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream)); }
  void record(uint64_t slot) { CHECK(cudaEventRecord(events[slot], stream)); }
  bool query(uint64_t slot) {
    const cudaError_t e = cudaEventQuery(events[slot]);
    if (e != cudaErrorNotReady) CHECK(e);  // a sticky error stops the run instead of spinning
    return e == cudaSuccess;
  }
};

struct Gpu {
  uint8_t *send = nullptr, *recv = nullptr;
  cudaStream_t kernel_stream, proxy_stream, local_stream;
  cudaEvent_t events[p2p::kSteps];
  unsigned* bad = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void print_row(const char* who, uint64_t bytes, double s) {
  const double algbw = double(bytes) / s / 1e9, busbw = algbw * (kGpus - 1) / kGpus;
  std::printf("%-28s %12llu %12llu %10.1f %8.2f %8.2f\n", who, (unsigned long long)bytes, (unsigned long long)(bytes / 4), s * 1e6,
              algbw, busbw);
}

// The host proxy threads: one per GPU, alive for the whole benchmark, started per alltoall by a
// generation counter (thread start-up stays out of the timings).
struct Proxies {
  std::vector<Gpu>* g = nullptr;
  p2p::Conn conn[kGpus];
  uint64_t chunk = 0, step = 0;
  std::atomic<uint64_t> gen{0};
  std::atomic<int> done{0}, failed{0};
  std::atomic<bool> quit{false};
  std::vector<std::thread> threads;

  void start() {
    for (int i = 0; i < kGpus; ++i)
      threads.emplace_back([this, i] {
        CHECK(cudaSetDevice(i));
        uint64_t seen = 0;
        for (;;) {
          uint64_t now;
          while ((now = gen.load(std::memory_order_acquire)) == seen) {
            if (quit.load()) return;
            std::this_thread::yield();  // idle while NCCL is timed
          }
          seen = now;
          CudaHost h{(*g)[i].proxy_stream, (*g)[i].events};
          p2p::ProxySub sub;
          sub.nsteps = p2p::steps_for(chunk, step);
          const p2p::Plants none{};
          const auto t0 = std::chrono::steady_clock::now();
          while (!sub.finished() && sub.bad_size == 0 && seconds_since(t0) < 10) (void)p2p::send_proxy_progress(h, conn[i], sub, none);
          if (!sub.finished()) failed.fetch_add(1);  // the kernel side gave up, or a bad size
          done.fetch_add(1, std::memory_order_release);
        }
      });
  }
  void stop() {
    quit = true;
    for (auto& t : threads) t.join();
  }
};

// One doorbell CE alltoall of `bytes` per GPU (bytes / 2 to each GPU, one of them itself).
double ce_alltoall(std::vector<Gpu>& g, Proxies& px, p2p::ConnShm* shm[kGpus], uint64_t bytes) {
  const uint64_t chunk = bytes / kGpus;
  const uint64_t step = std::max<uint64_t>(512 << 10, (chunk + g_steps - 1) / g_steps);
  for (int i = 0; i < kGpus; ++i) {  // conn[i]: GPU i -> GPU 1 - i
    *shm[i] = p2p::ConnShm{};
    px.conn[i] = p2p::Conn{};
    px.conn[i].shm = shm[i];
    px.conn[i].step_bytes = step;
    px.conn[i].direct = true;
    px.conn[i].direct_bytes = chunk;
    px.conn[i].src_direct = g[i].send + chunk * (1 - i);
    px.conn[i].dst_direct = g[1 - i].recv + chunk * i;
  }
  px.chunk = chunk, px.step = step;
  px.done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  px.gen.fetch_add(1, std::memory_order_release);
  for (int i = 0; i < kGpus; ++i) {
    CHECK(cudaSetDevice(i));
    ce_kernel<<<1, 2, 0, g[i].kernel_stream>>>(px.conn[i], px.conn[1 - i], chunk, 0, g[i].bad);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(g[i].recv + chunk * i, g[i].send + chunk * i, chunk, cudaMemcpyDeviceToDevice, g[i].local_stream));
  }
  while (px.done.load(std::memory_order_acquire) != kGpus) {  // the proxies give up after 10 s
  }
  for (int i = 0; i < kGpus; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamSynchronize(g[i].proxy_stream));
    CHECK(cudaStreamSynchronize(g[i].local_stream));
    CHECK(cudaStreamSynchronize(g[i].kernel_stream));
  }
  return seconds_since(t0);
}

#ifdef DOORBELL_WITH_NCCL
double nccl_alltoall(std::vector<Gpu>& g, ncclComm_t* comms, uint64_t bytes) {
  const uint64_t chunk = bytes / kGpus;
  const auto t0 = std::chrono::steady_clock::now();
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < kGpus; ++i)
    for (int p = 0; p < kGpus; ++p) {
      NCCLCHECK(ncclSend(g[i].send + chunk * p, chunk, ncclInt8, p, comms[i], g[i].kernel_stream));
      NCCLCHECK(ncclRecv(g[i].recv + chunk * p, chunk, ncclInt8, p, comms[i], g[i].kernel_stream));
    }
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < kGpus; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamSynchronize(g[i].kernel_stream));
  }
  return seconds_since(t0);
}
#endif

// Test bytes: no short period, so a copy from a wrong offset shows.
uint8_t pattern(int gpu, uint64_t b) { return uint8_t((b * 0x9E3779B97F4A7C15ull + uint64_t(gpu) * 0x632BE59BD9B4E019ull) >> 56); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_steps = std::max<uint64_t>(1, std::strtoull(argv[1], nullptr, 10));
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < kGpus) {
    std::printf("p2p_bench: needs %d GPUs, found %d\n", kGpus, n);
    return 1;
  }
  const uint64_t max_bytes = 1ull << 30;
  std::vector<Gpu> g(kGpus);
  for (int i = 0; i < kGpus; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaDeviceEnablePeerAccess(1 - i, 0));
    CHECK(cudaMalloc(&g[i].send, max_bytes));
    CHECK(cudaMalloc(&g[i].recv, max_bytes));
    CHECK(cudaMalloc(&g[i].bad, sizeof(unsigned)));
    CHECK(cudaMemset(g[i].bad, 0, sizeof(unsigned)));
    CHECK(cudaStreamCreateWithFlags(&g[i].kernel_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g[i].proxy_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g[i].local_stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : g[i].events) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    std::vector<uint8_t> pat(max_bytes);
    for (uint64_t b = 0; b < max_bytes; ++b) pat[b] = pattern(i, b);
    CHECK(cudaMemcpy(g[i].send, pat.data(), max_bytes, cudaMemcpyHostToDevice));
  }
  p2p::ConnShm* shm[kGpus];
  for (auto& s : shm) CHECK(cudaHostAlloc(&s, sizeof(p2p::ConnShm), cudaHostAllocMapped | cudaHostAllocPortable));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("p2p_bench: %d x %s; copy-engine alltoall (doorbell core/p2p, %llu steps per connection) vs raw peer copy%s\n",
              kGpus, prop.name, (unsigned long long)g_steps,
#ifdef DOORBELL_WITH_NCCL
              " vs NCCL"
#else
              ""
#endif
  );
  // Raw copy-engine peer bandwidth, one way, 1 GiB.
  {
    CHECK(cudaSetDevice(0));
    std::vector<double> t;
    for (int it = 0; it < kIters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      CHECK(cudaMemcpyPeerAsync(g[1].recv, 1, g[0].send, 0, max_bytes, g[0].proxy_stream));
      CHECK(cudaStreamSynchronize(g[0].proxy_stream));
      t.push_back(seconds_since(t0));
    }
    std::printf("raw peer copy GPU0->GPU1, 1 GiB: %.1f GB/s (median of %d)\n", double(max_bytes) / median(t) / 1e9, kIters);
  }
#ifdef DOORBELL_WITH_NCCL
  ncclComm_t comms[kGpus];
  int devs[kGpus] = {0, 1};
  NCCLCHECK(ncclCommInitAll(comms, kGpus, devs));
  const char* ce = std::getenv("NCCL_P2P_USE_CUDA_MEMCPY");
  std::printf("NCCL %d, NCCL_P2P_USE_CUDA_MEMCPY=%s\n", NCCL_VERSION_CODE, ce ? ce : "(unset)");
#endif
  std::printf("\n%-28s %12s %12s %10s %8s %8s\n", "alltoall (float count)", "size(B)", "count", "time(us)", "algbw", "busbw");
  int status = 0;
  Proxies px;
  px.g = &g;
  px.start();
  for (uint64_t bytes = 64ull << 20; bytes <= max_bytes; bytes *= 4) {
    std::vector<double> t;
    (void)ce_alltoall(g, px, shm, bytes);  // warm-up
    for (int it = 0; it < kIters; ++it) t.push_back(ce_alltoall(g, px, shm, bytes));
    print_row("doorbell CE (median of 5)", bytes, median(t));
    // Check one more run into cleared buffers, every byte: GPU i's receive buffer holds chunk i
    // of each GPU p's send buffer.
    const uint64_t chunk = bytes / kGpus;
    for (int i = 0; i < kGpus; ++i) {
      CHECK(cudaSetDevice(i));
      CHECK(cudaMemset(g[i].recv, 0, bytes));
    }
    (void)ce_alltoall(g, px, shm, bytes);
    if (px.failed.load() != 0) std::printf("  %d proxies did not finish\n", px.failed.load()), status = 1;
    for (int i = 0; i < kGpus; ++i) {
      unsigned bad = 0;
      CHECK(cudaMemcpy(&bad, g[i].bad, sizeof bad, cudaMemcpyDeviceToHost));
      std::vector<uint8_t> got(chunk);
      for (int p = 0; p < kGpus; ++p) {
        CHECK(cudaMemcpy(got.data(), g[i].recv + chunk * p, chunk, cudaMemcpyDeviceToHost));
        for (uint64_t b = 0; b < chunk; ++b)
          if (got[b] != pattern(p, chunk * i + b)) {
            std::printf("  WRONG DATA: GPU %d, from GPU %d, byte %llu\n", i, p, (unsigned long long)b);
            status = 1;
            break;
          }
      }
      if (bad != 0) std::printf("  GPU %d: %u kernel sides failed\n", i, bad), status = 1;
    }
#ifdef DOORBELL_WITH_NCCL
    t.clear();
    (void)nccl_alltoall(g, comms, bytes);
    for (int it = 0; it < kIters; ++it) t.push_back(nccl_alltoall(g, comms, bytes));
    print_row("NCCL (median of 5)", bytes, median(t));
#endif
  }
  px.stop();
  std::printf("p2p_bench: %s\n", status == 0 ? "data OK" : "FAILED");
  return status;
}
