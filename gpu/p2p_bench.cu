// GPU benchmark of the copy-engine P2P transports (run through the device tool, never in CI):
// two processes, one GPU each (host/bootstrap/fork.h forks them and shares the connection
// words), exactly as two ranks of a job meet: the lazy IPC set-up of core/p2p/ipc_setup.h over
// the bootstrap's messages, receive buffers exported with cudaIpcGetMemHandle and opened through
// core/p2p/ipc_cache.h, then two alltoalls printed as nccl-tests rows beside the raw
// copy-engine peer bandwidth and, when built with -DDOORBELL_WITH_NCCL, NCCL's alltoall over
// the same two processes in the same run:
//   doorbell CE   core/p2p/ce_fifo.h — the kernel sides on CudaCtx, the send proxy
//                 (send_proxy_progress) in each rank's host thread with cudaMemcpyAsync on a
//                 non-blocking stream, registered buffers copied straight into the peer's buffer;
//   doorbell psm  core/p2p/psm_p2p.h (seed 004's kernel-less transport) — no kernel: the send
//                 proxy copies the user's bytes into the receiver's FIFO (opened through IPC),
//                 the receive proxy copies them out, both in the rank's host thread, each
//                 connection end on its own stream with an event per slot.
// Every byte of an extra run into cleared buffers is checked for both doorbell transports. Ends
// with a free + re-malloc at the same address on the receiver: the cache must reopen, and a
// cache without the buffer-id check is shown delivering into the freed allocation.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <new>
#include <vector>

#include "core/p2p/ce_fifo.h"
#include "core/p2p/ipc_cache.h"
#include "core/p2p/ipc_setup.h"
#include "core/p2p/psm_p2p.h"
#include "gpu/cuda_check.h"
#include "host/bootstrap/fork.h"
#include "hw/cuda/cuda_ctx.cuh"

using doorbell::bootstrap::Bootstrap;
using doorbell::cuda_exec::CudaCtx;
using namespace doorbell;
namespace psm = doorbell::p2p::psm;

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
// Send + receive buffers of 4 GiB each per rank: 8 GiB of an H100's 80 (16 on one shared GPU).
constexpr uint64_t kMaxBytes = 4ull << 30;
constexpr uint64_t kRawBytes = 1ull << 30;  // the raw peer copy's size
constexpr uint64_t kSizes[] = {64ull << 20, 256ull << 20, 1ull << 30, 2ull << 30, 4ull << 30};
// Steps per connection and alltoall (argv[1]), each at least 512 KiB. Registered buffers need no
// FIFO staging, so fewer, larger copies win: 2 by default (the note has a sweep).
uint64_t g_steps = 2;
uint64_t g_max_bytes = kMaxBytes;  // --max-mib: the largest size run (a short run: less)
int g_big_iters = kIters;          // --big-iters: operations per round at 2 GiB and above
bool g_psm_on = true;              // --no-psm: the CE and NCCL rows alone (the script's sweeps)

// psm: the table's choices — window 8, 512 KiB steps (NCCL's 4 MiB SIMPLE buffer / NCCL_STEPS),
// slot stride = step — and its channels per peer; the channel sweep runs 1, 2 and 4, each on
// connections of its own (a control block and FIFO per connection, set up before the fork).
constexpr uint32_t kPsmChannelCounts[] = {1, 2, 4};
constexpr uint32_t kPsmMaxChannels = 4;
constexpr uint32_t kPsmConns = 1 + 2 + 4;  // connections per direction over the three sets
constexpr uint32_t kPsmTableChannels = 2;
psm::Choices psm_choices() {
  psm::Choices c;
  c.window = 8;
  c.step_bytes = 512 << 10;
  c.chunk_bytes = 0;
  return c;
}
const psm::Choices g_psm = psm_choices();

// The forked ranks' shared host memory: the CE connections' words first (the CE code indexes
// them from the start of the mapping), then psm's control blocks, [sender][connection], each
// connection sender -> 1 - sender.
struct SharedWords {
  p2p::ConnShm ce[kRanks];
  psm::Shm psm_shm[kRanks][kPsmConns];
};

// Test bytes: no short period, so a copy from a wrong offset shows.
__host__ __device__ inline uint8_t pattern(uint32_t rank, uint64_t b) {
  return uint8_t((b * 0x9E3779B97F4A7C15ull + uint64_t(rank) * 0x632BE59BD9B4E019ull) >> 56);
}

// Filled and checked on the GPU: 4 GiB a size byte by byte on the host takes seconds.
__global__ void fill_kernel(uint8_t* p, uint32_t rank, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) p[i] = pattern(rank, i);
}
// got[i] must be pattern(rank, from + i); *first_bad ends as the lowest wrong i (~0: none).
__global__ void check_kernel(const uint8_t* got, uint32_t rank, uint64_t from, uint64_t n, unsigned long long* first_bad) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    if (got[i] != pattern(rank, from + i) && i < *static_cast<volatile unsigned long long*>(first_bad)) atomicMin(first_bad, (unsigned long long)i);
}
unsigned blocks_for(uint64_t n) { return unsigned(std::min<uint64_t>((n + 255) / 256, 8192)); }

// Thread 0 posts the outgoing connection's steps, thread 1 consumes the incoming one's
// (registered buffers: only the counters go through the FIFO).
__global__ void ce_kernel(p2p::Conn out, p2p::Conn in, uint64_t bytes, uint64_t base, unsigned* bad) {
  CudaCtx ctx;
  const p2p::Plants none{};
  if (threadIdx.x == 0 && p2p::ce_send(ctx, out, base, nullptr, bytes, none) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
  if (threadIdx.x == 1 && p2p::ce_recv(ctx, in, base, nullptr, bytes) != p2p::CeResult::kOk) atomicAdd(bad, 1u);
}

bool event_done(cudaEvent_t e) {
  const cudaError_t r = cudaEventQuery(e);
  if (r != cudaErrorNotReady) CHECK(r);  // a sticky error stops the run instead of spinning
  return r == cudaSuccess;
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
  bool query(uint64_t slot) { return event_done(events[slot]); }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// psm's host: shared words in the bootstrap's shared memory; each End's copies and slot events
// on that end's own non-blocking stream (End::id names them); ready() is the call's readyEvent.
struct PsmHost {
  const cudaStream_t* streams;  // [End::id]
  const cudaEvent_t* events;    // [End::id * window + slot]
  uint32_t window;
  cudaEvent_t ready_event;
  uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  void memcpy_async(const psm::End& e, void* dst, const void* src, uint64_t n) {
    CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, streams[e.id]));
  }
  void record(const psm::End& e, uint32_t slot) { CHECK(cudaEventRecord(events[e.id * window + slot], streams[e.id])); }
  bool query(const psm::End& e, uint32_t slot) { return event_done(events[e.id * window + slot]); }
  bool ready() { return event_done(ready_event); }
};

// One channel count's psm connections on this rank: per channel the send end (into the peer's
// FIFO) and the receive end (out of this rank's FIFO); their step counters run on across calls.
struct PsmSet {
  uint32_t channels = 0;
  std::vector<psm::End> send, recv;  // [channel]
};

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
  unsigned long long* first_bad = nullptr;  // check_kernel's answer
  // psm: the user's stream (its readyEvent and the self part), every End's stream and events.
  cudaStream_t user_stream;
  cudaEvent_t psm_ready;
  std::vector<cudaStream_t> psm_streams;
  std::vector<cudaEvent_t> psm_events;
  uint8_t *fifo = nullptr, *peer_fifo = nullptr;  // this rank's incoming FIFOs; the peer's, mapped
  PsmSet psm_sets[std::size(kPsmChannelCounts)];
  int psm_failed = 0;

  // A new psm connection end: its stream and window events.
  uint32_t psm_end() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    psm_streams.push_back(s);
    for (uint32_t w = 0; w < g_psm.window; ++w) {
      cudaEvent_t e;
      CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      psm_events.push_back(e);
    }
    return uint32_t(psm_streams.size() - 1);
  }

  // The psm connections of every channel count: connection j (of kPsmConns) of direction
  // s -> 1 - s has control block words->psm_shm[s][j] and its FIFO at j on the receiver.
  void psm_set_up(SharedWords* words) {
    const uint64_t conn_fifo = uint64_t(g_psm.window) * g_psm.slot_stride();
    uint32_t j = 0;
    for (size_t i = 0; i < std::size(kPsmChannelCounts); ++i) {
      PsmSet& ps = psm_sets[i];
      ps.channels = kPsmChannelCounts[i];
      ps.send.resize(ps.channels), ps.recv.resize(ps.channels);
      for (uint32_t c = 0; c < ps.channels; ++c, ++j) {
        ps.send[c].shm = &words->psm_shm[r][j], ps.send[c].id = psm_end(), ps.send[c].fifo = peer_fifo + j * conn_fifo;
        ps.recv[c].shm = &words->psm_shm[peer][j], ps.recv[c].id = psm_end(), ps.recv[c].fifo = fifo + j * conn_fifo;
      }
    }
  }
  PsmSet& psm_set(uint32_t channels) {
    for (PsmSet& ps : psm_sets)
      if (ps.channels == channels) return ps;
    std::abort();
  }

  // One psm alltoall of `bytes` per rank: the readyEvent and the self part (one copy) on the
  // user's stream, then both proxies of this rank in its host thread until both Args finished.
  // Returns false (and stops timing the transport) on a stall or a refused slot.
  bool psm_alltoall(uint64_t bytes, PsmSet& ps) {
    if (psm_failed != 0) return false;  // a stalled transport is not waited for at every op
    const uint64_t chunk = bytes / kRanks;
    CHECK(cudaEventRecord(psm_ready, user_stream));
    CHECK(cudaMemcpyAsync(recv + chunk * r, send + chunk * r, chunk, cudaMemcpyDeviceToDevice, user_stream));
    psm::Sub ss[kPsmMaxChannels], rs[kPsmMaxChannels];
    for (uint32_t c = 0; c < ps.channels; ++c) {
      const uint64_t lo = chunk * c / ps.channels, n = chunk * (c + 1) / ps.channels - lo;
      ss[c].end = &ps.send[c], ss[c].user = send + chunk * peer + lo, ss[c].bytes = n;
      rs[c].end = &ps.recv[c], rs[c].user = recv + chunk * peer + lo, rs[c].bytes = n;
    }
    psm::Args sa, ra;
    sa.subs = ss, sa.nsubs = ps.channels;
    ra.subs = rs, ra.nsubs = ps.channels;
    PsmHost h{psm_streams.data(), psm_events.data(), g_psm.window, psm_ready};
    const auto t0 = std::chrono::steady_clock::now();
    bool refused = false, late = false;
    for (uint64_t spin = 1; !(sa.finished() && ra.finished()) && !refused && !late; ++spin) {
      (void)psm::send_progress(h, sa, g_psm);
      (void)psm::recv_progress(h, ra, g_psm);
      for (uint32_t c = 0; c < ps.channels; ++c) refused |= rs[c].refused;
      if (spin % 4096 == 0) late = seconds_since(t0) > 10;
    }
    CHECK(cudaStreamSynchronize(user_stream));
    if (!refused && !late) return true;
    ++psm_failed;
    for (uint32_t c = 0; c < ps.channels; ++c)
      std::printf("  psm rank %u channel %u %s: send %llu+%llu of %llu steps (done %llu, sees tail %llu), receive %llu+%llu of %llu (done %llu, sees head %llu, bad size %llu)\n",
                  r, c, refused ? "refused a slot" : "stalled", (unsigned long long)ss[c].base, (unsigned long long)ss[c].transmitted,
                  (unsigned long long)ss[c].nsteps, (unsigned long long)ss[c].done, (unsigned long long)h.load(&ps.send[c].shm->tail),
                  (unsigned long long)rs[c].base, (unsigned long long)rs[c].transmitted, (unsigned long long)rs[c].nsteps,
                  (unsigned long long)rs[c].done, (unsigned long long)h.load(&ps.recv[c].shm->head), (unsigned long long)rs[c].bad_size);
    return false;
  }

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

// Operations per round: kIters, or g_big_iters at 2 GiB and above (--big-iters).
int iters_for(uint64_t bytes) { return bytes >= (2ull << 30) ? g_big_iters : kIters; }

// nccl-tests' timing — a barrier, `iters` operations back to back (each waited for on the
// host), the slower rank's average — taken kRounds times; the median round (one round can
// catch a descheduled rank).
template <class Op>
double timed(Bootstrap& b, uint32_t peer, int iters, Op op) {
  for (int i = 0; i < kWarmup; ++i) op();
  std::vector<double> rounds;
  for (int round = 0; round < kRounds; ++round) {
    BOOTCHECK(b.barrier());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) op();
    const double t = seconds_since(t0) / iters;
    BOOTCHECK(b.send(peer, t));
    rounds.push_back(std::max(t, recv_from<double>(b, peer)));
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

// Whether both ranks say `mine` (a row is printed only where neither rank's transport failed).
bool both(Bootstrap& b, uint32_t peer, bool mine) {
  BOOTCHECK(b.send(peer, int(mine)));
  const bool theirs = recv_from<int>(b, peer) != 0;
  return mine && theirs;
}

// One more operation into cleared buffers, every byte checked: rank r's receive buffer holds
// chunk r of each rank p's send buffer. Returns the failures.
template <class Op>
int checked_run(Bootstrap& b, Rank& k, uint64_t bytes, const char* who, Op op) {
  const uint64_t chunk = bytes / kRanks;
  CHECK(cudaMemset(k.recv, 0, bytes));
  CHECK(cudaDeviceSynchronize());  // cleared before the peer may write
  BOOTCHECK(b.barrier());
  op();
  BOOTCHECK(b.barrier());
  int status = 0;
  for (uint32_t p = 0; p < kRanks; ++p) {
    CHECK(cudaMemset(k.first_bad, 0xff, sizeof *k.first_bad));
    check_kernel<<<blocks_for(chunk), 256>>>(k.recv + chunk * p, p, chunk * k.r, chunk, k.first_bad);
    CHECK(cudaGetLastError());
    unsigned long long bad = 0;
    CHECK(cudaMemcpy(&bad, k.first_bad, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad != ~0ull) {
      std::printf("  WRONG DATA (%s, %llu B): rank %u, from rank %u, byte %llu\n", who, (unsigned long long)bytes, k.r, p, bad);
      status = 1;
    }
  }
  BOOTCHECK(b.barrier());  // checked before the peer's next operation writes here
  return status;
}

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
  SharedWords* words = static_cast<SharedWords*>(shared.data);
  k.shm_host = words->ce;
  CHECK(cudaHostRegister(shared.data, shared.bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* dev = nullptr;
  CHECK(cudaHostGetDevicePointer(&dev, shared.data, 0));
  k.shm_dev = static_cast<SharedWords*>(dev)->ce;
  CHECK(cudaMalloc(&k.send, kMaxBytes));
  CHECK(cudaMalloc(&k.recv, kMaxBytes));
  CHECK(cudaMalloc(&k.bad, sizeof(unsigned)));
  CHECK(cudaMemset(k.bad, 0, sizeof(unsigned)));
  CHECK(cudaMalloc(&k.first_bad, sizeof *k.first_bad));
  // This rank's incoming psm FIFOs, one per connection (window * slot stride each), one allocation.
  const uint64_t fifo_bytes = uint64_t(kPsmConns) * g_psm.window * g_psm.slot_stride();
  CHECK(cudaMalloc(&k.fifo, fifo_bytes));
  CHECK(cudaStreamCreateWithFlags(&k.kernel_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&k.proxy_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&k.local_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&k.user_stream, cudaStreamNonBlocking));
  for (cudaEvent_t& e : k.events) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&k.psm_ready, cudaEventDisableTiming));
  fill_kernel<<<blocks_for(kMaxBytes), 256>>>(k.send, r, kMaxBytes);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

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
  // psm: the sender's copies land in the receiver's FIFO, so each rank maps its peer's FIFOs
  // (same set-up, same cache), then makes its connection ends.
  BOOTCHECK(b.send(peer, export_buffer(k.fifo, fifo_bytes)));
  const auto their_fifo = recv_from<Export>(b, peer);
  handles[their_fifo.meta.buffer_id] = their_fifo.handle;
  if (k.peer_recv != nullptr) k.peer_fifo = cache.map(their_fifo.meta, their_fifo.meta.base);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, gpu));
  std::printf("rank %u (pid %d): GPU %d, %s, IPC set-up %s, peer's receive buffer opened in %.0f us\n", r, int(getpid()), gpu,
              prop.name, p2p::ipc_state_name(st), open_us.empty() ? 0.0 : open_us.front());
  std::fflush(stdout);
  BOOTCHECK(b.barrier());
  if (k.peer_recv == nullptr) return 1;  // no IPC: this benchmark has no host path
  k.psm_set_up(words);

  int status = 0;
  // Raw copy-engine peer bandwidth, one way, 1 GiB, into the IPC mapping.
  if (r == 0) {
    std::vector<double> t;
    for (int it = 0; it < 5; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      CHECK(cudaMemcpyAsync(k.peer_recv, k.send, kRawBytes, cudaMemcpyDefault, k.proxy_stream));
      CHECK(cudaStreamSynchronize(k.proxy_stream));
      t.push_back(seconds_since(t0));
    }
    std::sort(t.begin(), t.end());
    std::printf("raw copy-engine peer copy rank0 -> rank1 (IPC mapping), 1 GiB: %.1f GB/s (median of 5)\n",
                double(kRawBytes) / t[2] / 1e9);
    if (g_psm_on) {
      // What one psm step costs the proxy thread, alone: its copy + event record posted, and a
      // query of a completed event (local 512 KiB copies, so the GPU keeps ahead of the host).
      const cudaStream_t s = k.psm_streams[0];
      const cudaEvent_t* ev = k.psm_events.data();
      const uint64_t step = g_psm.step_bytes;
      constexpr int kPosts = 512;
      double post_us = 0, query_us = 0;
      for (int pass = 0; pass < 2; ++pass) {  // the first pass warms up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kPosts; ++i) {
          CHECK(cudaMemcpyAsync(k.recv + (i % 64) * step, k.send + (i % 64) * step, step, cudaMemcpyDeviceToDevice, s));
          CHECK(cudaEventRecord(ev[i % g_psm.window], s));
        }
        post_us = seconds_since(t0) / kPosts * 1e6;
        CHECK(cudaStreamSynchronize(s));
        const auto t1 = std::chrono::steady_clock::now();
        for (int i = 0; i < kPosts; ++i) (void)event_done(ev[i % g_psm.window]);
        query_us = seconds_since(t1) / kPosts * 1e6;
      }
      std::printf("psm host cost per step (rank 0 alone): cudaMemcpyAsync of %llu KiB + cudaEventRecord %.2f us, cudaEventQuery %.2f us\n",
                  (unsigned long long)(step >> 10), post_us, query_us);
    }
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
  if (r == 0) {
    std::printf("\n%-30s %12s %12s %10s %8s %8s\n", "alltoall (avg of 20, median of 5)", "size(B)", "count", "time(us)", "algbw", "busbw");
    if (g_big_iters != kIters) std::printf("(at 2 GiB and above: avg of %d operations a round, median of %d)\n", g_big_iters, kRounds);
  }
  char psm_row[64];
  for (const uint64_t bytes : kSizes) {
    if (bytes > g_max_bytes) break;
    const uint64_t chunk = bytes / kRanks;
    const int iters = iters_for(bytes);
    const double t = timed(b, peer, iters, [&] { k.ce_alltoall(bytes); });
    if (r == 0) print_row("doorbell CE", bytes, t);
    status |= checked_run(b, k, bytes, "doorbell CE", [&] { k.ce_alltoall(bytes); });
    if (g_psm_on) {
      PsmSet& ps = k.psm_set(kPsmTableChannels);
      std::snprintf(psm_row, sizeof psm_row, "doorbell psm (%u ch)", ps.channels);
      const double tp = timed(b, peer, iters, [&] { (void)k.psm_alltoall(bytes, ps); });
      if (both(b, peer, k.psm_failed == 0) && r == 0) print_row(psm_row, bytes, tp);
      else if (r == 0) std::printf("%-30s %12llu  FAILED (stalled or refused; see above)\n", psm_row, (unsigned long long)bytes);
      status |= checked_run(b, k, bytes, psm_row, [&] { (void)k.psm_alltoall(bytes, ps); });
    }
#ifdef DOORBELL_WITH_NCCL
    if (comm != nullptr) {
      // Its self part inside the group, as nccl-tests' alltoall.
      const double tn = timed(b, peer, iters, [&] {
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
    (void)chunk;
    std::fflush(stdout);
  }
  // psm's channels per peer at 1 GiB (or the largest size run), each set on its own connections.
  if (g_psm_on) {
    const uint64_t bytes = std::min<uint64_t>(1ull << 30, g_max_bytes);
    if (r == 0) std::printf("\npsm channels per peer (window %u, %llu KiB steps), alltoall of %llu MiB per GPU:\n", g_psm.window,
                            (unsigned long long)(g_psm.step_bytes >> 10), (unsigned long long)(bytes >> 20));
    for (PsmSet& ps : k.psm_sets) {
      std::snprintf(psm_row, sizeof psm_row, "doorbell psm (%u ch)", ps.channels);
      const double tp = timed(b, peer, iters_for(bytes), [&] { (void)k.psm_alltoall(bytes, ps); });
      if (both(b, peer, k.psm_failed == 0) && r == 0) print_row(psm_row, bytes, tp);
      else if (r == 0) std::printf("%-30s %12llu  FAILED (stalled or refused; see above)\n", psm_row, (unsigned long long)bytes);
      status |= checked_run(b, k, bytes, psm_row, [&] { (void)k.psm_alltoall(bytes, ps); });
      std::fflush(stdout);
    }
  }
  unsigned bad = 0;
  CHECK(cudaMemcpy(&bad, k.bad, sizeof bad, cudaMemcpyDeviceToHost));
  if (bad != 0 || k.failed != 0) std::printf("  rank %u: %u kernel sides and %d proxies failed\n", r, bad, k.failed), status = 1;
  if (k.psm_failed != 0) std::printf("  rank %u: psm stalled or refused a slot\n", r), status = 1;
  cuda_exec::report_timeouts();  // waits that gave up, logged on the device
#ifdef DOORBELL_WITH_NCCL
  if (comm != nullptr) NCCLCHECK(ncclCommDestroy(comm));
#endif
  BOOTCHECK(b.barrier());
  std::vector<double> reuse_open_us;
  status |= reuse_demo(b, handles, reuse_open_us);
  if (r == 0 && !reuse_open_us.empty()) {
    std::printf("cudaIpcOpenMemHandle: %.0f us first open (%llu GiB; enables peer access)", open_us.front(), (unsigned long long)(kMaxBytes >> 30));
    for (double u : reuse_open_us) std::printf(", %.0f", u);
    std::printf(" us (64 MiB buffers: open, the same handle again, the re-allocated one)\n");
  }
  std::printf("p2p_bench rank %u: %s\n", r, status == 0 ? "data OK" : "FAILED");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // p2p_bench [steps] [--max-mib N] [--big-iters N] [--no-psm]
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (std::strcmp(argv[i], "--max-mib") == 0 && more) g_max_bytes = std::strtoull(argv[++i], nullptr, 10) << 20;
    else if (std::strcmp(argv[i], "--big-iters") == 0 && more) g_big_iters = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--no-psm") == 0) g_psm_on = false;
    else if (i == 1 && argv[i][0] != '-') g_steps = std::max<uint64_t>(1, std::strtoull(argv[i], nullptr, 10));
    else return std::fprintf(stderr, "usage: p2p_bench [steps] [--max-mib N] [--big-iters N] [--no-psm]\n"), 2;
  }
  g_max_bytes = std::min(g_max_bytes, kMaxBytes);
  std::printf("p2p_bench: %d processes, one GPU each (both on one where there is one); copy-engine alltoall (doorbell core/p2p, %llu steps per connection)",
              kRanks, (unsigned long long)g_steps);
  if (g_psm_on)
    std::printf("; kernel-less psm (core/p2p/psm_p2p.h: window %u, %llu KiB steps, %u channels per peer, self part one copy on the user stream)",
                g_psm.window, (unsigned long long)(g_psm.step_bytes >> 10), kPsmTableChannels);
  std::printf("; up to %llu MiB per GPU\n", (unsigned long long)(g_max_bytes >> 20));
  // The connections' words before the ranks exist: the CE FIFOs empty, every psm control block
  // set up once (all slots free, the sender's first credit) before either side starts.
  const uint64_t shared = (sizeof(SharedWords) + 4095) / 4096 * 4096;
  const Status s = bootstrap::fork_ranks(
      kRanks, shared,
      [](bootstrap::SharedMemory m) {
        SharedWords* w = new (m.data) SharedWords{};
        for (auto& side : w->psm_shm)
          for (psm::Shm& shm : side) psm::set_up(shm, g_psm);
      },
      rank_main);
  if (!s) std::fprintf(stderr, "p2p_bench: %s\n", s.to_string().c_str());
  return s ? 0 : 1;
}
