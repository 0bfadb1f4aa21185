// GPU benchmark of the copy-engine P2P transport (run through the device tool, never in CI):
// two processes, one GPU each (host/bootstrap/fork.h forks them and shares the connection
// words), exactly as two ranks of a job meet: the lazy IPC set-up of core/p2p/ipc_setup.h over
// the bootstrap's messages, receive buffers exported with cudaIpcGetMemHandle and opened through
// core/p2p/ipc_cache.h, then core/p2p's CE alltoall — the kernel sides on CudaCtx, the send
// proxy (send_proxy_progress) in each rank's host thread with cudaMemcpyAsync on a
// non-blocking stream, registered buffers copied straight into the peer's receive buffer —
// printed as nccl-tests rows beside the raw copy-engine peer bandwidth and, when built with
// -DDOORBELL_WITH_NCCL, NCCL's alltoall over the same two processes in the same run. Ends with
// a free + re-malloc at the same address on the receiver: the cache must reopen, and a cache
// without the buffer-id check is shown delivering into the freed allocation.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#include "core/p2p/ce_fifo.h"
#include "core/p2p/ipc_cache.h"
#include "core/p2p/ipc_setup.h"
#include "gpu/cuda_check.h"
#include "host/bootstrap/fork.h"
#include "hw/cuda/cuda_ctx.cuh"

using doorbell::bootstrap::Bootstrap;
using doorbell::cuda_exec::CudaCtx;
using namespace doorbell;

// A bootstrap call that fails: the peer is gone, so this rank stops (fork_ranks names it).
#define BOOTCHECK(x)                                              \
  do {                                                            \
    const Status s_ = (x);                                        \
    DOORBELL_FAIL_IF(!s_, x, s_.to_string().c_str());             \
  } while (0)

namespace {

template <class T>
T recv_from(Bootstrap& b, uint32_t peer) {
  Result<T> v = b.recv<T>(peer);
  DOORBELL_FAIL_IF(!v, b.recv<T>(peer), v.status().to_string().c_str());
  return *v;
}

constexpr int kRanks = 2;
constexpr int kIters = 20, kRounds = 5, kWarmup = 3;
constexpr uint64_t kMaxBytes = 1ull << 30;
// Steps per connection and alltoall (argv[1]), each at least 512 KiB. Registered buffers need no
// FIFO staging, so fewer, larger copies win: 2 by default (the note has a sweep).
uint64_t g_steps = 2;

// Thread 0 posts the outgoing connection's steps, thread 1 consumes the incoming one's
// (registered buffers: only the counters go through the FIFO).
__global__ void ce_kernel(p2p::Conn out, p2p::Conn in, uint64_t bytes, uint64_t base, unsigned* bad) {
  CudaCtx ctx;
  const p2p::Plants none{};
  if (threadIdx.x == 0 && p2p::ce_send(ctx, out, base, nullptr, bytes, none) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
  if (threadIdx.x == 1 && p2p::ce_recv(ctx, in, base, nullptr, bytes) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
}

// send_proxy_progress's host: shared words in the bootstrap's shared memory, copies and
// events on the connection's non-blocking stream.
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

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What a rank tells its peer about an exported buffer.
struct Export {
  cudaIpcMemHandle_t handle;
  p2p::IpcHandle meta;  // base / size in the owner's address space, buffer id
};

Export export_buffer(void* p, uint64_t bytes) {
  Export e{};
  CHECK(cudaIpcGetMemHandle(&e.handle, p));
  unsigned long long id = 0;
  const CUresult r = cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(p));
  const char* why = "?";
  if (r != CUDA_SUCCESS) (void)cuGetErrorString(r, &why);
  DOORBELL_FAIL_IF(r != CUDA_SUCCESS, cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID), why);
  e.meta = {reinterpret_cast<uint64_t>(p), bytes, id};
  return e;
}

// The receiving side's opener for IpcCache: the CUDA handle of each buffer id the peer sent;
// times every open (the seed's ~90 us).
struct Opener {
  std::map<uint64_t, cudaIpcMemHandle_t>* handles;
  std::vector<double>* open_us;
  uint8_t* operator()(const p2p::IpcHandle& h) const {
    void* p = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaIpcOpenMemHandle(&p, handles->at(h.buffer_id), cudaIpcMemLazyEnablePeerAccess));
    open_us->push_back(seconds_since(t0) * 1e6);
    return static_cast<uint8_t*>(p);
  }
};
struct Closer {
  void operator()(uint8_t* p, const p2p::IpcHandle&) const { CHECK(cudaIpcCloseMemHandle(p)); }
};
using Cache = p2p::IpcCache<Opener, Closer>;

// The smcuda set-up between the two ranks, over bootstrap messages: both ask on their first
// send (requests cross: one byte each, so neither send waits), each answers the other's
// request and takes the other's answer.
p2p::IpcState ipc_setup(Bootstrap& b, uint32_t peer, bool peer_access) {
  p2p::IpcEndpoint ep;
  const p2p::IpcMsg first = ep.on_send();
  BOOTCHECK(b.send(peer, first));
  int answered = 0, answers = 0;
  while (answered + answers < 2) {
    const auto m = recv_from<p2p::IpcMsg>(b, peer);
    (m == p2p::IpcMsg::kRequest ? answered : answers) += 1;
    const p2p::IpcMsg reply = ep.on_message(m, peer_access);
    if (reply != p2p::IpcMsg::kNone) BOOTCHECK(b.send(peer, reply));
  }
  return ep.state;
}

struct Rank {
  uint32_t r, peer;
  uint8_t *send = nullptr, *recv = nullptr, *peer_recv = nullptr;
  p2p::ConnShm *shm_host = nullptr, *shm_dev = nullptr;  // [kRanks]: connection i -> 1 - i
  cudaStream_t kernel_stream, proxy_stream, local_stream;
  cudaEvent_t events[p2p::kSteps];
  unsigned* bad = nullptr;
  uint64_t base = 0;  // connection steps so far: the FIFO counters run on across operations
  int failed = 0;

  // One doorbell CE alltoall of `bytes` per rank (bytes / 2 to each rank, one of them itself).
  void ce_alltoall(uint64_t bytes) {
    const uint64_t chunk = bytes / kRanks;
    const uint64_t step = std::max<uint64_t>(512 << 10, (chunk + g_steps - 1) / g_steps);
    p2p::Conn out{}, in{};
    out.shm = shm_dev + r, in.shm = shm_dev + peer;
    out.step_bytes = in.step_bytes = step;
    ce_kernel<<<1, 2, 0, kernel_stream>>>(out, in, chunk, base, bad);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(recv + chunk * r, send + chunk * r, chunk, cudaMemcpyDeviceToDevice, local_stream));
    p2p::Conn px = out;  // the proxy's view: host pointers, registered buffers
    px.shm = shm_host + r;
    px.direct = true;
    px.direct_bytes = chunk;
    px.src_direct = send + chunk * peer;
    px.dst_direct = peer_recv + chunk * r;
    CudaHost h{proxy_stream, events};
    p2p::ProxySub sub;
    sub.base = base;
    sub.nsteps = p2p::steps_for(chunk, step);
    const p2p::Plants none{};
    const auto t0 = std::chrono::steady_clock::now();
    while (!sub.finished() && sub.bad_size == 0 && seconds_since(t0) < 10) (void)p2p::send_proxy_progress(h, px, sub, none);
    if (!sub.finished()) ++failed;  // the kernel side gave up, or a bad size
    base += sub.nsteps;
    CHECK(cudaStreamSynchronize(local_stream));
    CHECK(cudaStreamSynchronize(kernel_stream));
  }
};

void print_row(const char* who, uint64_t bytes, double s) {
  const double algbw = double(bytes) / s / 1e9, busbw = algbw * (kRanks - 1) / kRanks;
  std::printf("%-30s %12llu %12llu %10.1f %8.2f %8.2f\n", who, (unsigned long long)bytes, (unsigned long long)(bytes / 4), s * 1e6,
              algbw, busbw);
}

// nccl-tests' timing — a barrier, kIters operations back to back, the slower rank's average —
// taken kRounds times; the median round (one round can catch a descheduled rank).
template <class Op>
double timed(Bootstrap& b, uint32_t peer, Op op) {
  for (int i = 0; i < kWarmup; ++i) op();
  std::vector<double> rounds;
  for (int round = 0; round < kRounds; ++round) {
    BOOTCHECK(b.barrier());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIters; ++i) op();
    const double t = seconds_since(t0) / kIters;
    BOOTCHECK(b.send(peer, t));
    rounds.push_back(std::max(t, recv_from<double>(b, peer)));
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

// Test bytes: no short period, so a copy from a wrong offset shows.
uint8_t pattern(uint32_t rank, uint64_t b) { return uint8_t((b * 0x9E3779B97F4A7C15ull + uint64_t(rank) * 0x632BE59BD9B4E019ull) >> 56); }

// Free + re-malloc at the same address, on the receiver (rank 1): rank 0 maps the buffer
// through a correct cache and through one without the buffer-id check, rank 1 frees it and
// allocates again (the peer's mapping still open: what a real owner does, not knowing of the
// cache); the correct cache must reopen and its marker arrive in the new buffer. Writing
// through the stale mapping is undefined behaviour in CUDA, so the planted cache is only asked
// where it would deliver. Returns the failures.
int reuse_demo(Bootstrap& b, std::map<uint64_t, cudaIpcMemHandle_t>& handles, std::vector<double>& open_us) {
  constexpr uint64_t kBytes = 64ull << 20;
  const uint32_t peer = 1 - b.rank();
  if (b.rank() == 1) {
    uint8_t* v1 = nullptr;
    CHECK(cudaMalloc(&v1, kBytes));
    BOOTCHECK(b.send(peer, export_buffer(v1, kBytes)));
    BOOTCHECK(b.barrier());  // rank 0 mapped it
    CHECK(cudaFree(v1));
    uint8_t* v2 = nullptr;
    CHECK(cudaMalloc(&v2, kBytes));
    CHECK(cudaMemset(v2, 0, kBytes));
    CHECK(cudaDeviceSynchronize());
    std::printf("reuse: the receiver freed its 64 MiB buffer and allocated again: %s address (%p -> %p)\n",
                v1 == v2 ? "the same" : "a different", (void*)v1, (void*)v2);
    BOOTCHECK(b.send(peer, export_buffer(v2, kBytes)));
    BOOTCHECK(b.barrier());  // rank 0 delivered
    uint8_t got = 0;
    CHECK(cudaMemcpy(&got, v2, 1, cudaMemcpyDeviceToHost));
    std::printf("reuse: the marker sent through the correct cache %s the new buffer\n", got == 0xA5 ? "arrived in" : "is MISSING from");
    const int status = got == 0xA5 ? 0 : 1;
    BOOTCHECK(b.barrier());  // rank 0 closed its mappings
    CHECK(cudaFree(v2));
    BOOTCHECK(b.send(peer, status));
    return status;
  }
  Cache good(Opener{&handles, &open_us}, Closer{});
  Cache planted(Opener{&handles, &open_us}, Closer{}, /*plant_no_id_check=*/true);
  const auto e1 = recv_from<Export>(b, peer);
  handles[e1.meta.buffer_id] = e1.handle;
  uint8_t* old_map = good.map(e1.meta, e1.meta.base);
  (void)planted.map(e1.meta, e1.meta.base);  // the same context: the same pointer, counted twice
  BOOTCHECK(b.barrier());
  const auto e2 = recv_from<Export>(b, peer);
  handles[e2.meta.buffer_id] = e2.handle;
  const uint8_t a = 0xA5;
  uint8_t* new_map = good.map(e2.meta, e2.meta.base);
  CHECK(cudaMemcpy(new_map, &a, 1, cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());  // a pageable copy may return before its DMA landed
  if (new_map == old_map) std::printf("reuse: the reopened handle mapped at the old address\n");
  const bool same_va = e1.meta.base == e2.meta.base;
  const bool stale = planted.map(e2.meta, e2.meta.base) == old_map;
  std::printf("reuse: correct cache: %llu opens, %llu stale mapping closed and reopened; without the buffer-id check: %s\n",
              (unsigned long long)good.opens(), (unsigned long long)good.reopens(),
              stale ? "a hit on the stale mapping (it would deliver into the freed allocation)" : "reopened (address not reused)");
  BOOTCHECK(b.barrier());
  planted.close_all();
  good.close_all();
  BOOTCHECK(b.barrier());
  int status = recv_from<int>(b, peer);
  if (good.reopens() != (same_va ? 1u : 0u) || stale != same_va) status = 1;
  return status;
}

int rank_main(Bootstrap& b, bootstrap::SharedMemory shared) {
  const uint32_t r = b.rank(), peer = 1 - r;
  // One GPU each where there are two; on a one-GPU machine both ranks share it (IPC between
  // two processes of one GPU works; NCCL refuses a GPU twice, so its rows are left out).
  int ngpu = 0;
  CHECK(cudaGetDeviceCount(&ngpu));
  const int gpu = int(r) % ngpu, peer_gpu = int(peer) % ngpu;
  const bool one_gpu = gpu == peer_gpu;
  CHECK(cudaSetDevice(gpu));
  Rank k;
  k.r = r, k.peer = peer;
  // The connection words live in the shared host memory, mapped for this rank's GPU.
  k.shm_host = static_cast<p2p::ConnShm*>(shared.data);
  CHECK(cudaHostRegister(shared.data, shared.bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* dev = nullptr;
  CHECK(cudaHostGetDevicePointer(&dev, shared.data, 0));
  k.shm_dev = static_cast<p2p::ConnShm*>(dev);
  CHECK(cudaMalloc(&k.send, kMaxBytes));
  CHECK(cudaMalloc(&k.recv, kMaxBytes));
  CHECK(cudaMalloc(&k.bad, sizeof(unsigned)));
  CHECK(cudaMemset(k.bad, 0, sizeof(unsigned)));
  CHECK(cudaStreamCreateWithFlags(&k.kernel_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&k.proxy_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&k.local_stream, cudaStreamNonBlocking));
  for (cudaEvent_t& e : k.events) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  {
    std::vector<uint8_t> pat(kMaxBytes);
    for (uint64_t i = 0; i < kMaxBytes; ++i) pat[i] = pattern(r, i);
    CHECK(cudaMemcpy(k.send, pat.data(), kMaxBytes, cudaMemcpyHostToDevice));
  }

  // Lazy IPC set-up, then the peer's receive buffer through the handle cache.
  int can = 1;  // a GPU reaches its own memory
  if (!one_gpu) CHECK(cudaDeviceCanAccessPeer(&can, gpu, peer_gpu));
  const p2p::IpcState st = ipc_setup(b, peer, can != 0);
  BOOTCHECK(b.send(peer, export_buffer(k.recv, kMaxBytes)));
  const auto theirs = recv_from<Export>(b, peer);
  std::map<uint64_t, cudaIpcMemHandle_t> handles{{theirs.meta.buffer_id, theirs.handle}};
  std::vector<double> open_us;
  Cache cache(Opener{&handles, &open_us}, Closer{});
  if (st == p2p::IpcState::kOk || st == p2p::IpcState::kAcked) k.peer_recv = cache.map(theirs.meta, theirs.meta.base);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, gpu));
  std::printf("rank %u (pid %d): GPU %d, %s, IPC set-up %s, peer's receive buffer opened in %.0f us\n", r, int(getpid()), gpu,
              prop.name, p2p::ipc_state_name(st), open_us.empty() ? 0.0 : open_us.front());
  std::fflush(stdout);
  BOOTCHECK(b.barrier());
  if (k.peer_recv == nullptr) return 1;  // no IPC: this benchmark has no host path

  int status = 0;
  // Raw copy-engine peer bandwidth, one way, 1 GiB, into the IPC mapping.
  if (r == 0) {
    std::vector<double> t;
    for (int it = 0; it < 5; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      CHECK(cudaMemcpyAsync(k.peer_recv, k.send, kMaxBytes, cudaMemcpyDefault, k.proxy_stream));
      CHECK(cudaStreamSynchronize(k.proxy_stream));
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    std::printf("raw copy-engine peer copy rank0 -> rank1 (IPC mapping), 1 GiB: %.1f GB/s (median of 5)\n",
                double(kMaxBytes) / t[2] / 1e9);
  }
  BOOTCHECK(b.barrier());
#ifdef DOORBELL_WITH_NCCL
  ncclComm_t comm = nullptr;
  if (!one_gpu) {
    ncclUniqueId id;
    if (r == 0) {
      NCCLCHECK(ncclGetUniqueId(&id));
      BOOTCHECK(b.send(peer, id));
    } else {
      id = recv_from<ncclUniqueId>(b, peer);
    }
    NCCLCHECK(ncclCommInitRank(&comm, kRanks, id, int(r)));
    const char* ce = std::getenv("NCCL_P2P_USE_CUDA_MEMCPY");
    if (r == 0) std::printf("NCCL %d (two ranks), NCCL_P2P_USE_CUDA_MEMCPY=%s\n", NCCL_VERSION_CODE, ce ? ce : "(unset)");
  } else if (r == 0) {
    std::printf("NCCL: left out (both ranks on one GPU: NCCL refuses a GPU twice)\n");
  }
#endif
  if (r == 0)
    std::printf("\n%-30s %12s %12s %10s %8s %8s\n", "alltoall (avg of 20, median of 5)", "size(B)", "count", "time(us)", "algbw", "busbw");
  for (uint64_t bytes = 64ull << 20; bytes <= kMaxBytes; bytes *= 4) {
    const double t = timed(b, peer, [&] { k.ce_alltoall(bytes); });
    if (r == 0) print_row("doorbell CE", bytes, t);
    // One more run into cleared buffers, every byte checked: rank r's receive buffer holds
    // chunk r of each rank p's send buffer.
    const uint64_t chunk = bytes / kRanks;
    CHECK(cudaMemset(k.recv, 0, bytes));
    CHECK(cudaDeviceSynchronize());  // cleared before the peer may write
    BOOTCHECK(b.barrier());
    k.ce_alltoall(bytes);
    BOOTCHECK(b.barrier());
    std::vector<uint8_t> got(chunk);
    for (uint32_t p = 0; p < kRanks; ++p) {
      CHECK(cudaMemcpy(got.data(), k.recv + chunk * p, chunk, cudaMemcpyDeviceToHost));
      for (uint64_t i = 0; i < chunk; ++i)
        if (got[i] != pattern(p, chunk * r + i)) {
          std::printf("  WRONG DATA: rank %u, from rank %u, byte %llu\n", r, p, (unsigned long long)i);
          status = 1;
          break;
        }
    }
    BOOTCHECK(b.barrier());  // checked before the peer's next operation writes here
#ifdef DOORBELL_WITH_NCCL
    if (comm != nullptr) {
      const double tn = timed(b, peer, [&] {
        NCCLCHECK(ncclGroupStart());
        for (int p = 0; p < kRanks; ++p) {
          NCCLCHECK(ncclSend(k.send + chunk * p, chunk, ncclInt8, p, comm, k.kernel_stream));
          NCCLCHECK(ncclRecv(k.recv + chunk * p, chunk, ncclInt8, p, comm, k.kernel_stream));
        }
        NCCLCHECK(ncclGroupEnd());
        CHECK(cudaStreamSynchronize(k.kernel_stream));
      });
      if (r == 0) print_row("NCCL", bytes, tn);
    }
#endif
    std::fflush(stdout);
  }
  unsigned bad = 0;
  CHECK(cudaMemcpy(&bad, k.bad, sizeof bad, cudaMemcpyDeviceToHost));
  if (bad != 0 || k.failed != 0) std::printf("  rank %u: %u kernel sides and %d proxies failed\n", r, bad, k.failed), status = 1;
  cuda_exec::report_timeouts();  // waits that gave up, logged on the device
#ifdef DOORBELL_WITH_NCCL
  if (comm != nullptr) NCCLCHECK(ncclCommDestroy(comm));
#endif
  BOOTCHECK(b.barrier());
  std::vector<double> reuse_open_us;
  status |= reuse_demo(b, handles, reuse_open_us);
  if (r == 0 && !reuse_open_us.empty()) {
    std::printf("cudaIpcOpenMemHandle: %.0f us first open (1 GiB; enables peer access)", open_us.front());
    for (double u : reuse_open_us) std::printf(", %.0f", u);
    std::printf(" us (64 MiB buffers: open, the same handle again, the re-allocated one)\n");
  }
  std::printf("p2p_bench rank %u: %s\n", r, status == 0 ? "data OK" : "FAILED");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_steps = std::max<uint64_t>(1, std::strtoull(argv[1], nullptr, 10));
  std::printf("p2p_bench: %d processes, one GPU each (both on one where there is one); copy-engine alltoall (doorbell core/p2p, %llu steps per connection)\n",
              kRanks, (unsigned long long)g_steps);
  // Two connections' words (rank i -> 1 - i), one page, empty FIFOs before the ranks exist.
  const uint64_t shared = 4096;
  static_assert(kRanks * sizeof(p2p::ConnShm) <= shared);
  const Status s = bootstrap::fork_ranks(
      kRanks, shared,
      [](bootstrap::SharedMemory m) { for (int i = 0; i < kRanks; ++i) new (static_cast<p2p::ConnShm*>(m.data) + i) p2p::ConnShm{}; },
      rank_main);
  if (!s) std::fprintf(stderr, "p2p_bench: %s\n", s.to_string().c_str());
  return s ? 0 : 1;
}
