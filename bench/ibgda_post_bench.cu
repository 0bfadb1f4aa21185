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
#include "gpu/cuda_check.h"
#include "gpu/post_rig.cuh"
#include "hw/cuda/cuda_ctx.cuh"

using namespace doorbell;
using namespace doorbell::postbench;
using doorbell::cuda_exec::CudaCtx;
using doorbell::cuda_exec::UnboundedCudaCtx;

namespace {

// doorbell's device state, in constant memory as NVSHMEM keeps its own.
__constant__ ibgda::DevState c_state;

// Ctx: CudaCtx (bounded waits) or UnboundedCudaCtx (no device timeout, as NVSHMEM's default).
template <class Ctx, Posting kPosting>
__global__ void doorbell_kernel(uint32_t iters, unsigned long long* fails) {
  Ctx ctx;
  const ibgda::DevState& st = c_state;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t off = ((uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPutBytes) % kHeapBytes;
  const ibgda::QpSelector sel{kPosting != Posting::kInTurn ? ibgda::QpSelector::kByWarp : ibgda::QpSelector::kByCta, 0};
  bool ok = true;
  for (uint32_t i = 0; i < iters; ++i) {
    if constexpr (kPosting == Posting::kWarp) {
      ok &= ibgda::put_nbi_lanes(ctx, st, off, off, kPutBytes, 1) == ibgda::OpResult::kOk;
    } else if constexpr (kPosting == Posting::kLane0) {
      if (lane == 0) ok &= ibgda::put_nbi(ctx, st, off, off, kPutBytes, 1, sel) == ibgda::OpResult::kOk;
    } else {
      for (uint32_t k = 0; k < 32; ++k)
        if (lane == k) ok &= ibgda::put_nbi(ctx, st, off, off, kPutBytes, 1, sel) == ibgda::OpResult::kOk;
    }
  }
  ok &= ibgda::quiet(ctx, st, ibgda::select_qp(ctx, st, 1, sel)) == ibgda::OpResult::kOk;
  if (!ok) atomicAdd(fails, 1ull);
}

// One thread's puts through doorbell's post path (ibgda::post_rma's steps for a one-piece
// transfer) cut into the same phases as nvshmem_phase_kernel: lookup (QP, keys and
// addresses), reserve, write, submit. (The lookup's piece must reach the write: looked up
// again there, the write phase counted a second lookup.)
__global__ void doorbell_phase_kernel(uint32_t iters, unsigned long long* out, unsigned long long* fails) {
  CudaCtx ctx;
  const ibgda::DevState& st = c_state;
  unsigned long long sum[kPhases] = {};
  for (uint32_t i = 0; i < iters; ++i) {
    long long t0 = clock64();
    // As post_rma: the first piece (QP, keys, addresses) looked up once, before the
    // reservation, and the WQE written from it.
    const ibgda::DevQp qp = ibgda::select_qp(ctx, st, 1, ibgda::QpSelector{ibgda::QpSelector::kByCta, 0});  // a copy, as put_nbi takes it
    const heap::Piece head = ibgda::qp_piece(st, qp, 0, 0, kPutBytes, 1);
    const uint32_t n = 1;
    long long t1 = clock64();
    uint64_t base = 0;
    bool ok = ibgda::reserve(ctx, st, qp, n, &base) == ibgda::OpResult::kOk;
    long long t2 = clock64();
    ibgda::write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, base, 0, 0, kPutBytes, 1, true, &head);
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
  // A load after a fence (which empties the SM's L1), plain or through the read-only path,
  // and one that hits L1; an atomic beside a load or another atomic (do they overlap?). The
  // index `sink >> 63` (0) makes each load wait for the one before.
  time(10, [&](int) { ctx.fence(exec::gpu_scope); sink += word[32 + (sink >> 63)]; });
  time(11, [&](int) { ctx.fence(exec::gpu_scope); sink += __ldg(reinterpret_cast<const unsigned long long*>(word) + 40 + (sink >> 63)); });
  time(12, [&](int) { sink += word[48 + (sink >> 63)]; });
  time(13, [&](int i) { sink += ctx.load(exec::gpu_scope, exec::acquire, word + 56) + ctx.atomic_add(exec::gpu_scope, word + 64, 1) + i; });
  time(14, [&](int i) { sink += ctx.load(exec::gpu_scope, exec::relaxed, word + 56) + ctx.atomic_add(exec::gpu_scope, word + 64, 1) + i; });
  time(15, [&](int i) { sink += ctx.atomic_cas(exec::gpu_scope, word + 72, 0, 0) + ctx.atomic_cas(exec::gpu_scope, word + 80, 1, 1) + i; });
  out[16] = sink;
}
inline constexpr const char* kPrimitives[] = {"fence.acq_rel.gpu", "__threadfence", "fence.acq_rel.sys", "fence.acq_rel.cta",
                                              "atom.add.gpu", "ld.acquire.gpu", "ld.volatile", "st.release.gpu",
                                              "st.relaxed.sys", "st.mmio", "fence+ld.global", "fence+ld.global.nc", "ld.global (L1)",
                                              "ld.acquire+atom.add", "ld.relaxed+atom.add", "2 atom.cas"};

// doorbell's device state over the rings (post_rig), into c_state.
std::vector<void*> doorbell_state(const Rings& r, uint32_t nqps) {
  std::vector<void*> allocs;
  const ibgda::DevState s = doorbell_rig_state(r, nqps, allocs);
  CHECK(cudaMemcpyToSymbol(c_state, &s, sizeof(s)));
  return allocs;
}

struct Bench : PostRig {
  unsigned long long* fails = dalloc<unsigned long long>(1);

  template <class Launch>
  float run(const Shape& s, const char* who, Launch launch) { return PostRig::run(s.nqps, who, s.name, launch); }

  template <class Ctx>
  float doorbell(const Shape& s) {
    const std::vector<void*> allocs = doorbell_state(r, s.nqps);
    auto launch = [&](uint32_t iters) {
      if (s.posting == Posting::kWarp) doorbell_kernel<Ctx, Posting::kWarp><<<s.ctas, s.warps * 32, 0, work_stream>>>(iters, fails);
      else if (s.posting == Posting::kLane0) doorbell_kernel<Ctx, Posting::kLane0><<<s.ctas, s.warps * 32, 0, work_stream>>>(iters, fails);
      else doorbell_kernel<Ctx, Posting::kInTurn><<<s.ctas, s.warps * 32, 0, work_stream>>>(iters, fails);
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
    const Shape s{"phases", 1, 1, 1, Posting::kInTurn, iters};
    unsigned long long* out = dalloc<unsigned long long>(2 * kPhases);
    const std::vector<void*> allocs = doorbell_state(r, 1);
    // Each kernel once with nothing to post before the NIC runs (see PostRig::run).
    doorbell_phase_kernel<<<1, 1>>>(0, out, fails);
    CHECK(cudaDeviceSynchronize());
    run(s, "doorbell", [&] { doorbell_phase_kernel<<<1, 1, 0, work_stream>>>(iters, out, fails); });
    if (nvshmem_missing() == nullptr) {
      nvshmem_prepare(r, s);
      nvshmem_phases(0, out + kPhases, 0);
      CHECK(cudaDeviceSynchronize());
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
      {"1 CTA x 1 warp, 1 QP, thread", 1, 1, 1, Posting::kInTurn, 256},
      {"1 CTA x 1 warp, 1 QP, warp (32 WQEs)", 1, 1, 1, Posting::kWarp, 2048},
      {"128 CTAs x 1 warp, own QP, thread", 128, 1, 128, Posting::kInTurn, 256},
      {"128 CTAs x 1 warp, own QP, warp", 128, 1, 128, Posting::kWarp, 2048},
      {"128 CTAs x 4 warps, 8 shared QPs, thread", 128, 4, 8, Posting::kInTurn, 64},
      {"128 CTAs x 4 warps, 8 shared QPs, warp", 128, 4, 8, Posting::kWarp, 256},
      // One poster per warp (lane 0), one put per call: how a peer's rate depends on how
      // many posters share a QP.
      {"1 CTA x 1 warp, 1 QP, lane 0", 1, 1, 1, Posting::kLane0, 20000},
      {"128 CTAs x 4 warps, lane 0, own QP", 128, 4, 512, Posting::kLane0, 500},
      {"128 CTAs x 4 warps, lane 0, 8 shared QPs", 128, 4, 8, Posting::kLane0, 500},
      {"128 CTAs x 4 warps, lane 0, 1 QP", 128, 4, 1, Posting::kLane0, 500},
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
    const double wqes = double(s.posters()) * s.iters;
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
    uint64_t* word = dalloc<uint64_t>(96);
    unsigned long long* out = dalloc<unsigned long long>(17);
    primitive_kernel<<<1, 1>>>(word, out);
    unsigned long long h[17];
    CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    std::printf("primitives, one thread, cycles each:");
    for (int k = 0; k < 16; ++k) std::printf(" %s %llu%s", kPrimitives[k], h[k], k < 15 ? "," : "\n");
  }
  unsigned long long fails = 0;
  CHECK(cudaMemcpy(&fails, b.fails, 8, cudaMemcpyDeviceToHost));
  if (fails != 0) std::printf("doorbell: %llu threads saw an error or a timeout\n", fails);
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return fails != 0;
}
