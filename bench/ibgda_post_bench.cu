// GPU post-path benchmark (run through the device tool: gpu/run-post-bench): WQE/s of
// 8-byte RDMA WRITE puts posted by doorbell's core/ibgda (CudaCtx; UnboundedCudaCtx) and by
// NVSHMEM 3.4.5's own IBGDA device code, side by side in one run, against the same instant fake NIC: one
// GPU thread per QP that reads the DBR and completes up to it through the collapsed CQE
// (no bytes move). Depth 1024, num_requests_in_batch 32, quiet at the end; each cell is
// the median of the repetitions. Exits non-zero if doorbell reports an error.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/post_bench.h"
#include "core/ibgda/api.h"
#include "core/ibgda/dev_state_builder.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_ctx.cuh"

using namespace doorbell;
using namespace doorbell::postbench;
using doorbell::cuda_exec::CudaCtx;
using doorbell::cuda_exec::UnboundedCudaCtx;

namespace {

// The fake NIC: thread q serves QP q. A new DBR value completes everything below it at
// once (one CQE for the newest WQE, as a collapsed CQ shows it). `stop` is host memory.
__global__ void fake_nic(Rings r, uint32_t nqps, const volatile uint32_t* stop) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= nqps) return;
  const volatile uint64_t* dbr = reinterpret_cast<const volatile uint64_t*>(r.dbr + q * 8);
  volatile uint64_t* tail = reinterpret_cast<volatile uint64_t*>(r.cqe + q * 64 + 56);
  uint16_t seen = 0;
  for (uint32_t idle = 0;; ++idle) {
    const uint16_t pi = mlx5::dbr_send(*dbr);
    if (pi != seen) {
      seen = pi, idle = 0;
      // The CQE of WQE pi - 1, of the first pass of a one-entry CQ: its last word only.
      *tail = mlx5::cqe_words(mlx5::requester_completion(0, uint16_t(pi - 1), 0, 0, 0, 0), 0, 0).w7;
    } else if ((idle & 1023) == 1023 && *stop != 0) {
      return;
    }
  }
}

// doorbell's device state, in constant memory as NVSHMEM keeps its own.
__constant__ ibgda::DevState c_state;

// Ctx: CudaCtx (bounded waits) or UnboundedCudaCtx (no device timeout, as NVSHMEM's default).
template <class Ctx, bool kWarp>
__global__ void doorbell_kernel(uint32_t iters, unsigned long long* fails) {
  Ctx ctx;
  const ibgda::DevState& st = c_state;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t off = ((uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPutBytes) % kHeapBytes;
  const ibgda::QpSelector sel{kWarp ? ibgda::QpSelector::kByWarp : ibgda::QpSelector::kByCta, 0};
  bool ok = true;
  for (uint32_t i = 0; i < iters; ++i) {
    if constexpr (kWarp) {
      ok &= ibgda::put_nbi_lanes(ctx, st, off, off, kPutBytes, 1) == ibgda::OpResult::kOk;
    } else {
      for (uint32_t k = 0; k < 32; ++k)
        if (lane == k) ok &= ibgda::put_nbi(ctx, st, off, off, kPutBytes, 1, sel) == ibgda::OpResult::kOk;
    }
  }
  ok &= ibgda::quiet(ctx, st, ibgda::select_qp(ctx, st, 1, sel)) == ibgda::OpResult::kOk;
  if (!ok) atomicAdd(fails, 1ull);
}

// One thread's puts through doorbell's post path (ibgda::post_rma's steps) cut into the
// same phases as nvshmem_phase_kernel: lookup (QP, pieces and keys), reserve, write, submit.
__global__ void doorbell_phase_kernel(uint32_t iters, unsigned long long* out, unsigned long long* fails) {
  CudaCtx ctx;
  const ibgda::DevState& st = c_state;
  unsigned long long sum[kPhases] = {};
  for (uint32_t i = 0; i < iters; ++i) {
    long long t0 = clock64();
    const ibgda::DevQp& qp = ibgda::select_qp(ctx, st, 1, ibgda::QpSelector{ibgda::QpSelector::kByCta, 0});
    const uint32_t n = ibgda::count_pieces(st, 0, 0, kPutBytes, 1);
    long long t1 = clock64();
    uint64_t base = 0;
    bool ok = ibgda::reserve(ctx, st, qp, n, &base) == ibgda::OpResult::kOk;
    long long t2 = clock64();
    ibgda::write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, base, 0, 0, kPutBytes, 1);
    long long t3 = clock64();
    ok &= ibgda::submit(ctx, st, qp, base, n) == ibgda::OpResult::kOk;
    long long t4 = clock64();
    if (!ok) {
      atomicAdd(fails, 1ull);
      return;
    }
    sum[0] += t1 - t0, sum[1] += t2 - t1, sum[2] += t3 - t2, sum[3] += t4 - t3;
  }
  ibgda::quiet(ctx, st, ibgda::select_qp(ctx, st, 1, ibgda::QpSelector{ibgda::QpSelector::kByCta, 0}));
  for (int k = 0; k < kPhases; ++k) out[k] = sum[k];
}

// What the primitives the post paths are made of cost one thread (cycles each, averaged).
// Fences, atomics and the acquire load are waited for; plain stores and the volatile load
// are not (nothing depends on them), so theirs is an issue cost, not a latency.
__global__ void primitive_kernel(uint64_t* word, unsigned long long* out) {
  CudaCtx ctx;
  constexpr int kN = 256;
  auto time = [&](int k, auto op) {
    const long long t0 = clock64();
    for (int i = 0; i < kN; ++i) op(i);
    out[k] = (clock64() - t0) / kN;
  };
  uint64_t sink = 0;
  time(0, [&](int) { ctx.fence(exec::gpu_scope); });
  time(1, [&](int) { __threadfence(); });
  time(2, [&](int) { ctx.fence(exec::system_scope); });
  time(3, [&](int) { ctx.fence(exec::cta_scope); });
  time(4, [&](int i) { sink += ctx.atomic_add(exec::gpu_scope, word, 1) + i; });
  time(5, [&](int) { sink += ctx.load(exec::gpu_scope, exec::acquire, word + 8); });
  time(6, [&](int) { sink += *reinterpret_cast<volatile uint64_t*>(word + 8); });
  time(7, [&](int i) { ctx.store(exec::gpu_scope, exec::release, word + 16, uint64_t(i)); });
  time(8, [&](int i) { ctx.store(exec::system_scope, exec::relaxed, word + 16, uint64_t(i)); });
  time(9, [&](int i) { ctx.mmio_store64(word + 24, uint64_t(i)); });
  out[10] = sink;
}
inline constexpr const char* kPrimitives[] = {"fence.acq_rel.gpu", "__threadfence", "fence.acq_rel.sys", "fence.acq_rel.cta",
                                              "atom.add.gpu", "ld.acquire.gpu", "ld.volatile", "st.release.gpu",
                                              "st.relaxed.sys", "st.mmio"};

// doorbell's device state over the shared rings: PE 0 posts to PE 1 on nqps QPs (QP-major).
// Returns its device allocations, for the caller to free once the fake NIC has stopped.
std::vector<void*> doorbell_state(const Rings& r, uint32_t nqps) {
  const uint32_t npes = 2, log_depth = uint32_t(__builtin_ctz(kDepth));
  ibgda::Mvars* mvars = dalloc<ibgda::Mvars>(npes * nqps);
  ibgda::DevStateBuilder b({0, npes, nqps, 1, ibgda::QpLayout::kQpMajor, log_depth, 8, kHeapBytes, false});
  for (uint32_t q = 0; q < nqps; ++q)
    for (uint32_t pe = 0; pe < npes; ++pe) {  // both PEs' QP q over ring q
      ibgda::QpRing g;
      g.qpn = 0x100 + q;
      g.wq = r.wq + size_t(q) * kDepth * 64;
      g.dbr = r.dbr + q * 8;
      g.bf = r.bf + q * 8;
      g.cqe = reinterpret_cast<const mlx5::Cqe64*>(r.cqe + q * 64);
      g.mv = mvars + b.slot(q, pe);
      g.ibuf = r.ibuf + size_t(q) * 4096, g.ibuf_lkey = 0x9000 + q;
      b.set_qp(false, q, pe, g);
    }
  std::vector<uint64_t> bases = {uint64_t(r.heap[0]), uint64_t(r.heap[1])};
  ibgda::ChunkReg regs[2];
  for (uint32_t p = 0; p < npes; ++p) regs[p].addr = bases[p], regs[p].keys[0] = 0x1000u + p * 16;
  b.set_chunk(0, regs, kHeapBytes);
  ibgda::DevState s = b.placed([](const auto& v) { return dcopy(v); });
  s.group_switches = dalloc<uint64_t>(ibgda::kQpPools);
  s.opt.num_requests_in_batch = kBatch;
  s.opt.nic_buf_on_gpumem = true;  // as NVSHMEM's state says: rings and DBRs are GPU memory
  s.heap_bases = dcopy(bases);
  s.error = dalloc<uint64_t>(1);
  CHECK(cudaMemcpyToSymbol(c_state, &s, sizeof(s)));
  return {mvars, s.qps, s.group_switches, s.heap_bases, s.error};
}

// POST_TRACE=1: each step of a run on stderr (to find where a run hangs).
void trace(const char* who, const char* what) {
  static const bool on = std::getenv("POST_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "[%s] %s\n", who, what);
}

struct Bench {
  Rings r;
  volatile uint32_t* stop = nullptr;
  cudaStream_t nic_stream, work_stream;
  cudaEvent_t begin, end, nic_done;
  unsigned long long* fails = dalloc<unsigned long long>(1);

  Bench() {
    r.wq = dalloc<uint8_t>(size_t(kMaxQps) * kDepth * 64);
    r.dbr = dalloc<uint64_t>(kMaxQps * 8);
    r.cqe = dalloc<uint8_t>(kMaxQps * 64);
    r.bf = dalloc<uint64_t>(kMaxQps * 8);
    r.heap[0] = dalloc<uint8_t>(kHeapBytes);
    r.heap[1] = dalloc<uint8_t>(kHeapBytes);
    r.ibuf = dalloc<uint8_t>(kMaxQps * 4096);
    CHECK(cudaHostAlloc(const_cast<uint32_t**>(&stop), 4, cudaHostAllocMapped));
    CHECK(cudaStreamCreateWithFlags(&nic_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&work_stream, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&begin));
    CHECK(cudaEventCreate(&end));
    CHECK(cudaEventCreate(&nic_done));
  }

  // Wait for `e` at most 20 s: a post path that hangs (NVSHMEM's waits have no timeout)
  // must not hang the benchmark.
  static void wait(cudaEvent_t e, const char* who, const char* what, const Shape& s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    cudaError_t r;
    while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("%s: hung %s on \"%s\" (20 s); stopping\n", who, what, s.name);
        std::fflush(stdout);
        std::_Exit(3);
      }
    }
    CHECK(r);
  }

  // Fresh rings, the fake NIC started, `launch` timed on the work stream; returns its ms.
  // Nothing here may synchronise the device while the NIC runs (no cudaMalloc / cudaFree).
  template <class Launch>
  float run(const Shape& s, const char* who, Launch launch) {
    trace(who, "rings");
    CHECK(cudaMemset(r.wq, 0, size_t(kMaxQps) * kDepth * 64));
    CHECK(cudaMemset(r.dbr, 0, kMaxQps * 8 * 8));
    CHECK(cudaMemset(r.cqe, 0xff, kMaxQps * 64));  // no CQE yet: wqe_counter 0xffff
    CHECK(cudaDeviceSynchronize());
    *stop = 0;
    fake_nic<<<(s.nqps + 127) / 128, 128, 0, nic_stream>>>(r, s.nqps, stop);
    CHECK(cudaGetLastError());
    trace(who, "nic started");
    CHECK(cudaEventRecord(begin, work_stream));
    launch();
    CHECK(cudaEventRecord(end, work_stream));
    trace(who, "launched");
    // A post path that hangs (NVSHMEM's waits have no timeout) must not hang the benchmark.
    wait(end, who, "posting", s);
    trace(who, "posted");
    *stop = 1;
    CHECK(cudaEventRecord(nic_done, nic_stream));
    wait(nic_done, who, "stopping the fake NIC", s);
    trace(who, "nic stopped");
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    return ms;
  }

  template <class Ctx>
  float doorbell(const Shape& s) {
    const std::vector<void*> allocs = doorbell_state(r, s.nqps);
    auto launch = [&](uint32_t iters) {
      if (s.warp) doorbell_kernel<Ctx, true><<<s.ctas, s.warps * 32, 0, work_stream>>>(iters, fails);
      else doorbell_kernel<Ctx, false><<<s.ctas, s.warps * 32, 0, work_stream>>>(iters, fails);
      CHECK(cudaGetLastError());
    };
    // An empty launch first: a kernel's first launch may resize local memory, which waits
    // for the device to go idle, and the running fake NIC never lets it.
    launch(0);
    CHECK(cudaStreamSynchronize(work_stream));
    const float ms = run(s, "doorbell", [&] { launch(s.iters); });
    for (void* p : allocs) CHECK(cudaFree(p));
    return ms;
  }
  // Cycles per put of each phase, one thread on one QP, for both implementations.
  void phases(uint32_t iters) {
    const Shape s{"phases", 1, 1, 1, false, iters};
    unsigned long long* out = dalloc<unsigned long long>(2 * kPhases);
    const std::vector<void*> allocs = doorbell_state(r, 1);
    run(s, "doorbell", [&] { doorbell_phase_kernel<<<1, 1, 0, work_stream>>>(iters, out, fails); });
    if (nvshmem_missing() == nullptr) {
      nvshmem_prepare(r, s);
      run(s, "NVSHMEM", [&] { nvshmem_phases(iters, out + kPhases, work_stream); });
      nvshmem_release();
    }
    unsigned long long h[2 * kPhases];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("one thread, one QP, %u puts: cycles per put  lookup  reserve  write  submit (with its doorbell)\n", iters);
    const char* who[2] = {"doorbell", "NVSHMEM 3.4.5"};
    for (int k = 0; k < 2; ++k)
      std::printf("  %-14s %8.0f %8.0f %6.0f %7.0f\n", who[k], double(h[k * kPhases]) / iters, double(h[k * kPhases + 1]) / iters,
                  double(h[k * kPhases + 2]) / iters, double(h[k * kPhases + 3]) / iters);
    for (void* p : allocs) CHECK(cudaFree(p));
    CHECK(cudaFree(out));
  }

  float nvshmem(const Shape& s) {
    nvshmem_prepare(r, s);
    const float ms = run(s, "NVSHMEM", [&] { nvshmem_launch(s, work_stream); });
    nvshmem_release();
    return ms;
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs); depth %u, num_requests_in_batch %u, %u-byte RDMA WRITEs, median of %d\n", prop.name,
              prop.multiProcessorCount, kDepth, kBatch, kPutBytes, reps);
  if (const char* why = nvshmem_missing()) std::printf("NVSHMEM column: %s\n", why);
  const Shape shapes[] = {
      {"1 CTA x 1 warp, 1 QP, thread", 1, 1, 1, false, 256},
      {"1 CTA x 1 warp, 1 QP, warp (32 WQEs)", 1, 1, 1, true, 2048},
      {"128 CTAs x 1 warp, own QP, thread", 128, 1, 128, false, 256},
      {"128 CTAs x 1 warp, own QP, warp", 128, 1, 128, true, 2048},
      {"128 CTAs x 4 warps, 8 shared QPs, thread", 128, 4, 8, false, 64},
      {"128 CTAs x 4 warps, 8 shared QPs, warp", 128, 4, 8, true, 256},
  };
  Bench b;
  // Two doorbell columns: bounded waits (CudaCtx, what the checks run) and unbounded ones
  // (UnboundedCudaCtx), like NVSHMEM's device code built without NVSHMEM_TIMEOUT_DEVICE_POLLING.
  std::printf("%-42s %14s %14s %7s %14s %7s\n", "config", "NVSHMEM 3.4.5", "doorbell", "ratio", "unbounded", "ratio");
  // argv[2]: the rows to run, 1-based, comma-separated ("5" or "1,3,5"); all by default.
  const std::string rows = argc > 2 ? argv[2] : "";
  for (const Shape& s : shapes) {
    const std::string row = std::to_string(&s - shapes + 1);
    if (!rows.empty() && ("," + rows + ",").find("," + row + ",") == std::string::npos) continue;
    const double wqes = double(s.ctas) * s.warps * 32 * s.iters;
    std::vector<float> d, u, n;
    for (int i = 0; i < reps; ++i) {
      d.push_back(b.doorbell<CudaCtx>(s));
      u.push_back(b.doorbell<UnboundedCudaCtx>(s));
      if (nvshmem_missing() == nullptr) n.push_back(b.nvshmem(s));
    }
    const double dr = wqes / (median(d) * 1e-3), ur = wqes / (median(u) * 1e-3);
    const double nr = n.empty() ? 0 : wqes / (median(n) * 1e-3);
    char ncell[32] = "-", ratio[16] = "-", uratio[16] = "-";
    if (nr > 0) {
      std::snprintf(ncell, sizeof ncell, "%.3g M/s", nr / 1e6);
      std::snprintf(ratio, sizeof ratio, "%.2fx", dr / nr), std::snprintf(uratio, sizeof uratio, "%.2fx", ur / nr);
    }
    std::printf("%-42s %14s %10.3g M/s %7s %10.3g M/s %7s\n", s.name, ncell, dr / 1e6, ratio, ur / 1e6, uratio);
  }
  b.phases(4096);
  {
    uint64_t* word = dalloc<uint64_t>(32);
    unsigned long long* out = dalloc<unsigned long long>(11);
    primitive_kernel<<<1, 1>>>(word, out);
    unsigned long long h[11];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("primitives, one thread, cycles each:");
    for (int k = 0; k < 10; ++k) std::printf(" %s %llu%s", kPrimitives[k], h[k], k < 9 ? "," : "\n");
  }
  unsigned long long fails = 0;
  CHECK(cudaMemcpy(&fails, b.fails, 8, cudaMemcpyDeviceToHost));
  if (fails != 0) std::printf("doorbell: %llu threads saw an error or a timeout\n", fails);
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return fails != 0;
}
