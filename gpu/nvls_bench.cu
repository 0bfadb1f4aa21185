// GPU benchmark of core/nvls's AllReduce and ReduceScatter over emulated multicast (run through
// the device tool, never in CI; multicast objects are never created: gpu/nvls_emu.cuh reaches
// every member through peer access). Two GPUs of one host, one process: first every (type, op)
// multimem has, both collectives in both modes (through the FIFOs; registered buffers, where
// the reduce reads every input and writes every output itself) checked against a host
// reference on an odd count; then f32 sum busbw beside NCCL's allreduce and reduce_scatter
// (built with -DDOORBELL_WITH_NCCL; NVLS off), with and without ncclCommRegister'd buffers, in
// the same run, as nccl-tests rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/nvls/collective.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_ctx.cuh"
#include "gpu/nvls_emu.cuh"

using doorbell::cuda_exec::CudaCtx;
using doorbell::cuda_exec::EmuMc;
using doorbell::cuda_exec::EmuMcs;
using namespace doorbell;

namespace {

constexpr int kRanks = 2;
uint32_t g_channels = 16, g_threads = 512, g_reducers = 4;
// A plan: the channels and reducers a call runs with, on regions of its own from channel
// `first` on (a region keeps its reducers' step bases from call to call, so plans with other
// reducer counts cannot share regions; as NCCL keeps buffers per protocol).
struct Plan {
  uint32_t channels, reducers, first;
};
// ReduceScatter's channels from 64 MiB in (NVLS_RS_CHANNELS; default: as many as the GPU
// holds, 22 on 132 SMs): it runs no gather CTAs, so its remote scatters can take the SMs the
// AllReduce's gathers take, which pays once steps are large and loses below 64 MiB. It shares
// the main plan's regions (the same reducers). An AllReduce below 8 MiB, through the FIFOs or
// into a registered output, takes 2 reducers a channel (NVLS_SMALL_REDUCERS), on regions laid
// out after the others: 2 measured faster at 4 MiB on earlier builds (a tie on the last), 4
// from 8 MiB (docs/nvls.md).
uint32_t g_rs_channels = 0, g_small_reducers = 2, g_alloc_channels = 0;
constexpr uint64_t kRsWideFrom = 64ull << 20, kSmallBelow = 8ull << 20;  // input bytes per rank
Plan main_plan() { return {g_channels, g_reducers, 0}; }
Plan wide_plan() { return {g_rs_channels, g_reducers, 0}; }
Plan small_plan() { return {g_channels, g_small_reducers, std::max(g_channels, g_rs_channels)}; }
bool has_small_plan() { return g_small_reducers != g_reducers; }
// Every plan a collective can run (the reference checks run each).
std::vector<Plan> plans_of(bool allreduce) {
  std::vector<Plan> p{main_plan()};
  if (allreduce && has_small_plan()) p.push_back(small_plan());
  if (!allreduce && g_rs_channels != g_channels) p.push_back(wide_plan());
  return p;
}
Plan plan_for(bool allreduce, uint64_t in_bytes, nvls::Registered reg) {
  if (!allreduce) return in_bytes >= kRsWideFrom ? wide_plan() : main_plan();
  return has_small_plan() && in_bytes < kSmallBelow && reg != nvls::Registered::kBoth ? small_plan() : main_plan();
}
// CTAs of nvls_kernel one GPU holds at once (set in main).
uint64_t g_resident = 0;
// The GPU each rank runs on: 0 and 1, or both on GPU 0 (a one-GPU machine: a check of the
// kernels, not a bandwidth figure).
int g_dev[kRanks] = {0, 1};
uint64_t g_slot = 1 << 20;
// NVLS_SYNC_WARP=1: the last warp of each CTA only posts (nvls::Args::sync_warp, NCCL's structure).
bool g_sync_warp = false;
// NVLS_WARP_HUNKS=1: copies and reduces split in hunks a warp wide (nvls::Args::warp_hunks, NCCL's structure).
bool g_warp_hunks = false;

// CudaCtx that also adds up the cycles its thread spends in failed polls (a poll's cycles
// count when the one before it was of the same wait): where a role waits, and for how long.
class WaitClockCtx : public CudaCtx {
 public:
  __device__ explicit WaitClockCtx(unsigned long long* sum) : sum_(sum) {}
  __device__ bool spin(const char* what, const uint64_t* addr, uint64_t seen) {
    const long long t = clock64();
    last_spin_ns_ = doorbell::cuda_exec::global_timer_ns();
    if (what == what_ && addr == addr_ && seen == seen_) waited_ += t - last_;
    what_ = what, addr_ = addr, seen_ = seen, last_ = t;
    return CudaCtx::spin(what, addr, seen);
  }
  __device__ ~WaitClockCtx() {
    if (sum_ != nullptr && waited_ != 0) atomicAdd(sum_, (unsigned long long)waited_);
  }
  unsigned long long last_spin_ns_ = 0;  // when this thread last polled in vain

 private:
  unsigned long long* sum_;
  const char* what_ = nullptr;
  const uint64_t* addr_ = nullptr;
  uint64_t seen_ = 0;
  long long last_ = 0, waited_ = 0;
};

// prof (optional, kProfWords): cycles waited by scatter, reduce and gather CTAs [0, 3), their
// clocks in all [3, 6); per role the global timer at the first and last CTA start [6 + 4 role],
// first and last end (thread 0s), and the last failed poll [18 + role] (the waiters: WaitRecv,
// thread 0, and WaitSend, thread 8; nvls::Threads). With a sync warp a reducer's two waiters
// poll at once, so its cycles waited add up both.
constexpr int kProfWords = 21;
__global__ void __launch_bounds__(512, 1) nvls_kernel(EmuMcs mcs, nvls::Args a, unsigned* bad, unsigned long long* prof) {
  const uint32_t r = blockIdx.x % nvls::ctas_per_channel(a);
  const int role = r < a.nranks ? 0 : r < a.nranks + a.reducers ? 1 : 2;
  const long long t0 = clock64();
  const bool traced = prof != nullptr && threadIdx.x == 0;
  if (traced) {
    const unsigned long long now = doorbell::cuda_exec::global_timer_ns();
    atomicMin(prof + 6 + 4 * role, now), atomicMax(prof + 7 + 4 * role, now);
  }
  {
    const bool waiter = prof != nullptr && (threadIdx.x == 0 || threadIdx.x == 8);
    WaitClockCtx ctx(waiter ? prof + role : nullptr);
    // A CTA counts once where any of its waiters gave up.
    if (__syncthreads_or(!nvls::nvls_cta(ctx, mcs, a, blockIdx.x, threadIdx.x, blockDim.x)) && threadIdx.x == 0) atomicAdd(bad, 1u);
    if (waiter) atomicMax(prof + 18 + role, ctx.last_spin_ns_);
  }
  if (traced) {
    atomicAdd(prof + 3 + role, (unsigned long long)(clock64() - t0));
    const unsigned long long now = doorbell::cuda_exec::global_timer_ns();
    atomicMin(prof + 8 + 4 * role, now), atomicMax(prof + 9 + 4 * role, now);
  }
}

// One CTA moving `bytes` from src to dst in slot-sized pieces with core/nvls's copy loop
// (move_slot): what a single scatter or gather CTA can move, the per-CTA limit the timed
// model charges (docs/nvls.md).
__global__ void cta_copy_kernel(uint8_t* dst, const uint8_t* src, uint64_t bytes, uint64_t piece, bool warp_hunks) {
  CudaCtx ctx;
  for (uint64_t off = 0; off < bytes; off += piece)
    nvls::move_slot(ctx, dst + off, src + off, piece < bytes - off ? piece : bytes - off, threadIdx.x, blockDim.x, warp_hunks);
}

struct Rank {
  std::vector<uint8_t*> regions;  // by head * channels + channel, on this GPU
  std::vector<uint8_t*> at_head;  // the same, in the head's GPU (EmuMc::at_head; NVLS_EMU=pull: none)
  EmuMc* views = nullptr;         // device array, same order
  EmuMc* io = nullptr;            // device array: every member's input, every member's output (registered buffers)
  uint8_t *in = nullptr, *out = nullptr;
  unsigned* bad = nullptr;
  unsigned long long* prof = nullptr;  // NVLS_PROFILE=1: see nvls_kernel
  void *nccl_in = nullptr, *nccl_out = nullptr;  // ncclMemAlloc'd and registered with NCCL
  cudaStream_t stream;
};

// Environment knobs: whether `name` is set to `value`; a number, or `dflt` when unset.
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string(e) == value;
}
uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* e = std::getenv(name);
  return e != nullptr ? std::strtoull(e, nullptr, 10) : dflt;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Calls of any size and type follow each other on the same regions: the steps run on.
// The step a call of `bytes` moves: NCCL-like, smaller for smaller messages (the pipeline
// fills sooner), half the slot from 64 MiB, the whole slot from 1 GiB on (fewer flag round
// trips). An AllReduce through the FIFOs takes a quarter of the slot at every size (its
// scatter, reduce and gather overlap more; on 2 x H200 larger steps lost from 64 MiB), but a
// part (what one (head, channel) moves) of one to two such steps goes in a step of three
// quarters of the part and a short last one: such a call waits, after its last scatter, for
// that step's reduce and gather, which the short step shortens (docs/nvls.md). NVLS_STEP
// overrides.
uint64_t step_for(uint64_t bytes, bool fifo_allreduce, uint32_t channels) {
  if (fifo_allreduce) {
    const uint64_t part = bytes / kRanks / channels, quarter = g_slot / 4;
    return env_u64("NVLS_STEP", part >= quarter && part <= 2 * quarter ? (part * 3 / 4 + 15) / 16 * 16 : quarter);
  }
  return env_u64("NVLS_STEP", bytes >= (1ull << 30) ? g_slot : bytes >= (64ull << 20) ? g_slot / 2 : g_slot / 4);
}

// AllReduce: `count` elements in and out per rank. ReduceScatter: `count` out per rank, nranks
// times as many in (block h of the input is head h's).
// `plan`: none picks it by size (plan_for); the reference checks run every plan.
void collective(std::vector<Rank>& rk, bool allreduce, nvls::DType t, nvls::RedOp op, uint64_t count, nvls::Registered registered,
                bool profiled = false, const Plan* plan = nullptr) {
  const uint64_t in_bytes = count * nvls::dtype_bytes(t) * (allreduce ? 1 : kRanks);
  const Plan p = plan != nullptr ? *plan : plan_for(allreduce, in_bytes, registered);
  for (int r = 0; r < kRanks; ++r) {
    nvls::Args a;
    a.nranks = kRanks, a.rank = r, a.channels = p.channels, a.reducers = p.reducers;
    a.dtype = t, a.op = op, a.allreduce = allreduce, a.count = count;
    a.region.slot_bytes = g_slot;
    a.step_bytes = std::min(g_slot, step_for(in_bytes, allreduce && registered == nvls::Registered::kNone, p.channels) / 16 * 16);
    a.input = rk[r].in, a.output = rk[r].out, a.registered = registered, a.sync_warp = g_sync_warp;
    a.warp_hunks = g_warp_hunks;
    CHECK(cudaSetDevice(g_dev[r]));
    nvls_kernel<<<nvls::ctas_per_rank(a), g_threads, 0, rk[r].stream>>>(EmuMcs{rk[r].views + p.first, g_alloc_channels, rk[r].io}, a, rk[r].bad,
                                                                        profiled ? rk[r].prof : nullptr);
    CHECK(cudaGetLastError());
  }
}
void sync_all(std::vector<Rank>& rk) {
  for (int r = 0; r < kRanks; ++r) {
    CHECK(cudaSetDevice(g_dev[r]));
    CHECK(cudaStreamSynchronize(rk[r].stream));
  }
}


double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_channels = uint32_t(std::strtoul(argv[1], nullptr, 10));
  if (argc > 2) g_threads = uint32_t(std::strtoul(argv[2], nullptr, 10));
  if (argc > 3) g_slot = std::strtoull(argv[3], nullptr, 10);
  if (argc > 4) g_reducers = uint32_t(std::strtoul(argv[4], nullptr, 10));
  if (g_channels == 0) {
    std::printf("nvls_bench: channels must be positive\n");
    return 1;
  }
  // (reducers given: the small AllReduces take them too, unless NVLS_SMALL_REDUCERS says)
  g_small_reducers = uint32_t(env_u64("NVLS_SMALL_REDUCERS", argc > 4 ? g_reducers : 2));
  if (g_reducers == 0 || g_reducers > nvls::kMaxReducers || g_small_reducers == 0 || g_small_reducers > nvls::kMaxReducers) {
    std::printf("nvls_bench: reducers (and NVLS_SMALL_REDUCERS) are 1 to %u\n", nvls::kMaxReducers);
    return 1;
  }
  if (g_slot == 0 || g_slot % 16 != 0) {
    std::printf("nvls_bench: the slot size must be a positive multiple of 16 bytes\n");
    return 1;
  }
  int ngpu = 0;
  CHECK(cudaGetDeviceCount(&ngpu));
  if (ngpu < 1) {
    std::printf("nvls_bench: no GPU\n");
    return 1;
  }
  const bool one_gpu = ngpu < kRanks;
  g_sync_warp = env_is("NVLS_SYNC_WARP", "1");
  g_warp_hunks = env_is("NVLS_WARP_HUNKS", "1");
  const bool profile = env_is("NVLS_PROFILE", "1");
  const bool push = !env_is("NVLS_EMU", "pull");
  if (one_gpu) g_dev[1] = 0;
  // One GPU: both ranks run on it, and every CTA of both must be resident at once, so unless
  // told otherwise half the channels.
  if (one_gpu && argc <= 1) g_channels /= 2;
  {  // ReduceScatter's channel count from 64 MiB: NVLS_RS_CHANNELS, else all the GPU holds at once
    nvls::Args rs;
    rs.nranks = kRanks, rs.channels = 1, rs.reducers = g_reducers, rs.allreduce = false;
    int per_sm = 0, sms = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nvls_kernel, int(g_threads), 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    g_resident = uint64_t(per_sm) * uint64_t(sms);
    const uint32_t fit = uint32_t(g_resident / (nvls::ctas_per_channel(rs) * (one_gpu ? kRanks : 1)));
    g_rs_channels = uint32_t(env_u64("NVLS_RS_CHANNELS", std::max(g_channels, fit)));
    if (g_rs_channels == 0) {
      std::printf("nvls_bench: NVLS_RS_CHANNELS must be positive\n");
      return 1;
    }
    g_alloc_channels = std::max(g_channels, g_rs_channels) + (has_small_plan() ? g_channels : 0);
  }
  const uint64_t max_bytes = 1ull << 30;
  nvls::Region region{g_slot};
  std::vector<Rank> rk(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    CHECK(cudaSetDevice(g_dev[r]));
    if (!one_gpu) CHECK(cudaDeviceEnablePeerAccess(1 - r, 0));
    for (uint32_t i = 0; i < kRanks * g_alloc_channels; ++i) {
      uint8_t* p = nullptr;
      CHECK(cudaMalloc(&p, region.bytes()));
      CHECK(cudaMemset(p, 0, region.bytes()));
      rk[r].regions.push_back(p);
    }
    for (uint32_t i = 0; push && i < kRanks * g_alloc_channels; ++i) {  // in head i / channels's GPU
      uint8_t* p = nullptr;
      CHECK(cudaSetDevice(g_dev[i / g_alloc_channels]));
      CHECK(cudaMalloc(&p, region.bytes()));
      CHECK(cudaMemset(p, 0, region.bytes()));
      rk[r].at_head.push_back(p);
    }
    CHECK(cudaSetDevice(g_dev[r]));
    CHECK(cudaMalloc(&rk[r].in, max_bytes));
    CHECK(cudaMalloc(&rk[r].out, max_bytes));
    CHECK(cudaMalloc(&rk[r].bad, sizeof(unsigned)));
    CHECK(cudaMemset(rk[r].bad, 0, sizeof(unsigned)));
    if (profile) CHECK(cudaMalloc(&rk[r].prof, kProfWords * sizeof(unsigned long long)));
    CHECK(cudaStreamCreateWithFlags(&rk[r].stream, cudaStreamNonBlocking));
  }
  for (int r = 0; r < kRanks; ++r) {
    std::vector<EmuMc> v(kRanks * g_alloc_channels);
    for (uint32_t i = 0; i < v.size(); ++i) {
      v[i].n = kRanks, v[i].me = r, v[i].region = region;
      for (int m = 0; m < kRanks; ++m) {
        v[i].members[m] = rk[m].regions[i];
        if (push) v[i].at_head[m] = rk[m].at_head[i];
      }
    }
    CHECK(cudaSetDevice(g_dev[r]));
    CHECK(cudaMalloc(&rk[r].views, v.size() * sizeof(EmuMc)));
    CHECK(cudaMemcpy(rk[r].views, v.data(), v.size() * sizeof(EmuMc), cudaMemcpyHostToDevice));
    EmuMc io[2] = {};
    for (int k = 0; k < 2; ++k) {
      io[k].n = kRanks, io[k].me = r;
      for (int m = 0; m < kRanks; ++m) io[k].members[m] = k == 0 ? rk[m].in : rk[m].out;
    }
    CHECK(cudaMalloc(&rk[r].io, sizeof io));
    CHECK(cudaMemcpy(rk[r].io, io, sizeof io, cudaMemcpyHostToDevice));
  }
  CHECK(cudaDeviceSynchronize());
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  // Every CTA of both ranks spins on others: all must be resident at once.
  {
    nvls::Args ar, rs;
    ar.nranks = rs.nranks = kRanks, ar.channels = g_channels, rs.channels = g_rs_channels, ar.reducers = rs.reducers = g_reducers;
    ar.allreduce = true, rs.allreduce = false;
    const uint64_t need = uint64_t(std::max(nvls::ctas_per_rank(ar), nvls::ctas_per_rank(rs))) * (one_gpu ? kRanks : 1), have = g_resident;
    if (need > have) {
      std::printf("nvls_bench: %llu CTAs of %u threads per GPU cannot all be resident (%llu fit): fewer channels or threads\n",
                  (unsigned long long)need, g_threads, (unsigned long long)have);
      return 1;
    }
  }
  if (one_gpu) std::printf("nvls_bench: ONE GPU: both ranks on GPU 0 (kernel check; no bandwidth comparison)\n");
  {
    nvls::Args shape;
    shape.nranks = kRanks, shape.channels = g_channels, shape.reducers = g_reducers, shape.allreduce = true;
    std::printf("nvls_bench: %d x %s, core/nvls AllReduce / ReduceScatter over emulated multicast (peer access; %s), %u channels x %u CTAs per "
                "rank (%u reducers each, %u below 8 MiB through the FIFOs or into a registered output; ReduceScatter %u channels from 64 MiB), %u threads%s%s, %llu KiB slots (a step: a quarter of one below 64 MiB and through the AllReduce's FIFOs, where a part of one or two such steps goes in three quarters and the rest; half below 1 GiB)\n", kRanks, prop.name,
                push ? "the head's reads placed in its GPU" : "every copy in its member's GPU", g_channels,
                nvls::ctas_per_channel(shape), g_reducers, g_small_reducers, g_rs_channels, g_threads,
                g_sync_warp ? " (the last warp a sync warp)" : "", g_warp_hunks ? " (hunks a warp wide)" : "",
                (unsigned long long)(g_slot >> 10));
  }

  // Every (type, op) multimem has, on an odd count, both collectives: equal to the host reference.
  int status = 0;
  const uint64_t odd_count = (1 << 20) + 13;
  const bool check = !env_is("NVLS_CHECK", "0");
  if (!check) std::printf("nvls_bench: NVLS_CHECK=0: no reference checks (a sweep, not a result)\n");
  if (check)
  for (const auto reg : {nvls::Registered::kNone, nvls::Registered::kOutput, nvls::Registered::kBoth})
  for (const bool ar : {true, false})
  for (const Plan& plan : plans_of(ar))
    for (int ti = 0; ti < 8; ++ti)
      for (int oi = 0; oi < 3; ++oi) {
        const auto t = nvls::DType(ti);
        const auto op = nvls::RedOp(oi);
        if (nvls::multimem_pack_bytes(t, op) == 0) continue;
        const uint32_t es = nvls::dtype_bytes(t);
        // An odd count, except for a ReduceScatter with its input registered: its blocks must
        // start on 16 bytes to be read through multimem (else it runs the FIFO path).
        const uint64_t count = !ar && reg == nvls::Registered::kBoth ? odd_count - odd_count % 16 : odd_count;
        const uint64_t in_count = ar ? count : count * kRanks;
        std::vector<std::vector<uint8_t>> host(kRanks, std::vector<uint8_t>(in_count * es));
        uint64_t x = 88172645463325252ull + uint64_t(ti * 3 + oi);
        for (int r = 0; r < kRanks; ++r) {
          for (uint64_t e = 0; e < in_count; ++e) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            nvls::put_small(t, host[r].data() + e * es, int(x % 17) - 8);
          }
          CHECK(cudaSetDevice(g_dev[r]));
          CHECK(cudaMemcpy(rk[r].in, host[r].data(), in_count * es, cudaMemcpyHostToDevice));
          CHECK(cudaMemset(rk[r].out, 0, count * es));
          CHECK(cudaDeviceSynchronize());  // the kernels run on non-blocking streams
        }
        std::vector<uint8_t> ref = host[0];
        for (int r = 1; r < kRanks; ++r) nvls::reduce_into(t, op, ref.data(), host[r].data(), uint32_t(ref.size()));
        collective(rk, ar, t, op, count, reg, false, &plan);
        sync_all(rk);
        bool same = true;
        for (int r = 0; r < kRanks && same; ++r) {
          std::vector<uint8_t> got(count * es);
          CHECK(cudaSetDevice(g_dev[r]));
          CHECK(cudaMemcpy(got.data(), rk[r].out, count * es, cudaMemcpyDeviceToHost));
          same = std::equal(got.begin(), got.end(), ref.begin() + (ar ? 0 : r * count * es));  // ReduceScatter: block r
        }
        unsigned bad = 0;
        for (int r = 0; r < kRanks; ++r) {
          unsigned b = 0;
          CHECK(cudaSetDevice(g_dev[r]));
          CHECK(cudaMemcpy(&b, rk[r].bad, sizeof b, cudaMemcpyDeviceToHost));
          bad += b;
          cuda_exec::report_timeouts();
        }
        std::printf("  %s%s %-4s %-3s, %llu elements out, %u channels of %u reducers: %s%s\n", ar ? "allreduce    " : "reducescatter",
                    reg == nvls::Registered::kBoth ? " registered in + out" : reg == nvls::Registered::kOutput ? " registered out" : "", nvls::dtype_name(t),
                    nvls::redop_name(op), (unsigned long long)count, plan.channels, plan.reducers, same ? "equal to the reference" : "WRONG",
                    bad != 0 ? " (CTAs timed out)" : "");
        if (!same || bad != 0) status = 1;
      }

  {  // one CTA's copy rate, local to local and across to the other GPU (on one GPU: local twice)
    const uint64_t bytes = 256ull << 20;
    auto rate = [&](uint8_t* dst, const uint8_t* src) {
      CHECK(cudaSetDevice(g_dev[0]));
      cta_copy_kernel<<<1, g_threads, 0, rk[0].stream>>>(dst, src, bytes, g_slot, g_warp_hunks);  // warm-up
      CHECK(cudaStreamSynchronize(rk[0].stream));
      const auto t0 = std::chrono::steady_clock::now();
      cta_copy_kernel<<<1, g_threads, 0, rk[0].stream>>>(dst, src, bytes, g_slot, g_warp_hunks);
      CHECK(cudaStreamSynchronize(rk[0].stream));
      return double(bytes) / seconds_since(t0) / 1e9;
    };
    std::printf("one CTA of %u threads (move_slot, %llu KiB pieces): local to local %.1f GB/s, to the other GPU %.1f GB/s, from it %.1f GB/s\n",
                g_threads, (unsigned long long)(g_slot >> 10), rate(rk[0].out, rk[0].in), rate(rk[1].out, rk[0].in), rate(rk[0].out, rk[1].in));
  }
  if (one_gpu) {
    std::printf("nvls_bench: %s\n", status == 0 ? "OK" : "FAILED");
    return status;
  }
#ifdef DOORBELL_WITH_NCCL
  ncclComm_t comms[kRanks];
  int devs[kRanks] = {0, 1};
  NCCLCHECK(ncclCommInitAll(comms, kRanks, devs));
  int nccl_version = 0;
  NCCLCHECK(ncclGetVersion(&nccl_version));
  std::printf("NCCL %d (headers %d), NCCL_NVLS_ENABLE=%s\n", nccl_version, NCCL_VERSION_CODE, std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "(unset)");
  // NCCL's own registered buffers (ncclCommRegister; it wants ncclMemAlloc's), the peer of
  // doorbell's registered mode.
  bool nccl_registered = true;
  for (int r = 0; r < kRanks && nccl_registered; ++r) {
    CHECK(cudaSetDevice(g_dev[r]));
    void* h = nullptr;
    nccl_registered = ncclMemAlloc(&rk[r].nccl_in, max_bytes) == ncclSuccess && ncclMemAlloc(&rk[r].nccl_out, max_bytes) == ncclSuccess &&
                      ncclCommRegister(comms[r], rk[r].nccl_in, max_bytes, &h) == ncclSuccess &&
                      ncclCommRegister(comms[r], rk[r].nccl_out, max_bytes, &h) == ncclSuccess;
  }
  std::printf("NCCL registered buffers (ncclMemAlloc + ncclCommRegister): %s\n", nccl_registered ? "yes" : "not available");
#endif
  // nccl-tests' rows: size is the bytes each rank puts in (AllReduce: in = out; ReduceScatter:
  // in = nranks x out); busbw = algbw x 2(n-1)/n for AllReduce, (n-1)/n for ReduceScatter.
  for (const bool ar : {true, false}) {
    std::printf("\n%-28s %12s %12s %10s %8s %8s\n", ar ? "allreduce f32 sum" : "reducescatter f32 sum", "size(B)", "count", "time(us)", "algbw",
                "busbw");
    const uint64_t min_bytes = env_u64("NVLS_MIN", 4ull << 20), last = std::min(max_bytes, env_u64("NVLS_MAX", max_bytes));
    const uint64_t growth = std::max<uint64_t>(env_u64("NVLS_GROWTH", 2), 2);  // every power of two: the sizes between show too
    for (uint64_t bytes = std::max<uint64_t>(min_bytes, 64); bytes <= last; bytes = bytes > last / growth ? last + 1 : bytes * growth) {
      const uint64_t n = ar ? bytes / 4 : bytes / 4 / kRanks;  // elements out per rank
      auto rounds = [&](auto op) {
        for (int i = 0; i < 3; ++i) op();
        sync_all(rk);
        std::vector<double> t, host;
        for (int round = 0; round < 5; ++round) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < 20; ++i) op();
          host.push_back(seconds_since(t0) / 20);  // the launches alone: the host's share
          sync_all(rk);
          t.push_back(seconds_since(t0) / 20);
        }
        if (profile) std::printf("  (host: %.1f us per call to launch)\n", median(host) * 1e6);
        return median(t);
      };
      auto row = [&](const char* who, double s) {
        const double algbw = double(bytes) / s / 1e9;
        std::printf("%-28s %12llu %12llu %10.1f %8.2f %8.2f\n", who, (unsigned long long)bytes, (unsigned long long)n, s * 1e6, algbw,
                    algbw * (ar ? 2 : 1) * (kRanks - 1) / kRanks);
      };
      row("doorbell NVLS (emulated)", rounds([&] { collective(rk, ar, nvls::DType::kF32, nvls::RedOp::kSum, n, nvls::Registered::kNone); }));
      if (ar) row("doorbell registered out", rounds([&] { collective(rk, ar, nvls::DType::kF32, nvls::RedOp::kSum, n, nvls::Registered::kOutput); }));
      row("doorbell registered in+out", rounds([&] { collective(rk, ar, nvls::DType::kF32, nvls::RedOp::kSum, n, nvls::Registered::kBoth); }));
      if (profile) {  // one more call, counted: the share of each role's cycles spent waiting, rank 0
        for (int r = 0; r < kRanks; ++r) {
          CHECK(cudaSetDevice(g_dev[r]));
          unsigned long long init[kProfWords] = {};
          for (int role = 0; role < 3; ++role) init[6 + 4 * role] = init[8 + 4 * role] = ~0ull;
          CHECK(cudaMemcpy(rk[r].prof, init, sizeof init, cudaMemcpyHostToDevice));
          CHECK(cudaDeviceSynchronize());
        }
        const char* pm = std::getenv("NVLS_PROFILE_MODE");  // 0 FIFOs, 1 output registered, 2 input + output
        const auto mode = nvls::Registered(pm != nullptr ? std::clamp(std::atoi(pm), 0, 2) : 0);
        collective(rk, ar, nvls::DType::kF32, nvls::RedOp::kSum, n, mode, true);
        sync_all(rk);
        unsigned long long p[kProfWords];
        CHECK(cudaSetDevice(g_dev[0]));
        CHECK(cudaMemcpy(p, rk[0].prof, sizeof p, cudaMemcpyDeviceToHost));
        std::printf("  rank 0 waits: scatter %.0f %%, reduce %.0f %%, gather %.0f %% of their cycles\n", 100.0 * p[0] / p[3],
                    100.0 * p[1] / p[4], ar ? 100.0 * p[2] / p[5] : 0.0);
        // us after the first CTA started: first / last start, last failed poll, first / last end
        const unsigned long long z = std::min({p[6], p[10], p[14]});
        auto us = [z](unsigned long long t) { return t == ~0ull || t == 0 ? -1.0 : double(t - z) / 1e3; };
        const char* names[] = {"scatter", "reduce", "gather"};
        for (int role = 0; role < (ar ? 3 : 2); ++role)
          std::printf("  rank 0 %-7s us: start %.1f-%.1f, last wait %.1f, end %.1f-%.1f\n", names[role], us(p[6 + 4 * role]), us(p[7 + 4 * role]),
                      us(p[18 + role]), us(p[8 + 4 * role]), us(p[9 + 4 * role]));
      }
#ifdef DOORBELL_WITH_NCCL
      for (const bool reg : {false, true}) {
        if (reg && !nccl_registered) continue;
        row(reg ? "NCCL registered" : "NCCL", rounds([&] {
          NCCLCHECK(ncclGroupStart());
          for (int r = 0; r < kRanks; ++r) {
            void* in = reg ? rk[r].nccl_in : rk[r].in;
            void* out = reg ? rk[r].nccl_out : rk[r].out;
            if (ar) NCCLCHECK(ncclAllReduce(in, out, n, ncclFloat, ncclSum, comms[r], rk[r].stream));
            else NCCLCHECK(ncclReduceScatter(in, out, n, ncclFloat, ncclSum, comms[r], rk[r].stream));
          }
          NCCLCHECK(ncclGroupEnd());
        }));
      }
#endif
      std::fflush(stdout);
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    unsigned bad = 0;
    CHECK(cudaSetDevice(g_dev[r]));
    CHECK(cudaMemcpy(&bad, rk[r].bad, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad != 0) std::printf("  rank %d: %u CTAs timed out\n", r, bad), status = 1;
    cuda_exec::report_timeouts();  // this device's waits that gave up
  }
  std::printf("nvls_bench: %s\n", status == 0 ? "OK" : "FAILED");
  return status;
}
