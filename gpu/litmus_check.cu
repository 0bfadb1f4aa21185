// GPU litmus check (run through the device tool, never in CI): the litmus tests of
// core/exec/litmus.h — the same source the CPU model runs — on a Hopper GPU with CudaCtx,
// printed beside the CPU model's weak mode for the same tests and placements.
// Each run: `pairs` thread pairs, each doing `trials` trials on fresh, zeroed locations (x and
// y on different 128-byte lines). The two threads of a pair start trial i together: both wait
// for the global timer to pass base + i * period (no fence, no barrier: __syncthreads would
// order the very accesses tested). MP's reader first polls y (bounded) so that its test
// reads land just after y became visible — where a reordering can show.
// Exits non-zero when the GPU shows an outcome the PTX memory model forbids.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/exec/litmus.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_ctx.cuh"
#include "hw/gpu_sim/litmus.h"

using doorbell::cuda_exec::CudaCtx;
using namespace doorbell;

namespace {

constexpr uint32_t kWordsPerTrial = 32;  // 256 bytes: x at 0, y at +128

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Plain (weak) accesses instead of CudaCtx's ld/st.relaxed.<scope>: loads that may hit the
// SM's L1 (ld.global.ca), plain stores; fences as CudaCtx.
struct PlainCtx {
  CudaCtx c;
  template <exec::Scope S, exec::Order O>
  __device__ uint64_t load(exec::ScopeTag<S> s, exec::OrderTag<O> o, const uint64_t* p) {
    if constexpr (O != exec::Order::kRelaxed) return c.load(s, o, p);  // acquire stays acquire
    return __ldca(reinterpret_cast<const unsigned long long*>(p));
  }
  template <exec::Scope S, exec::Order O>
  __device__ void store(exec::ScopeTag<S> s, exec::OrderTag<O> o, uint64_t* p, uint64_t v) {
    if constexpr (O != exec::Order::kRelaxed) return c.store(s, o, p, v);  // release stays release
    asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  template <exec::Scope S>
  __device__ void fence(exec::ScopeTag<S> s) {
    c.fence(s);
  }
};

template <exec::Scope S, class Ctx>
__global__ void litmus_kernel(exec::Litmus t, bool same_cta, uint32_t trials, uint32_t period_ns, uint64_t* mem, uint64_t* res,
                              unsigned long long* base) {
  uint32_t pair, role;
  if (same_cta) {
    if (threadIdx.x % 32 != 0) return;
    pair = blockIdx.x, role = threadIdx.x / 32;
  } else {
    if (threadIdx.x != 0) return;
    pair = blockIdx.x / 2, role = blockIdx.x % 2;
  }
  Ctx ctx;
  const exec::ScopeTag<S> s;
  // One start time for the whole grid, published by thread 0 of block 0.
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicExch(base, (unsigned long long)(global_ns() + 200000));
  uint64_t t0;
  while ((t0 = *reinterpret_cast<volatile unsigned long long*>(base)) == 0) {
  }
  const bool mp = exec::litmus_is_mp(t);
  uint64_t r_pre = 0;
  for (uint32_t i = 0; i < trials; ++i) {
    const uint64_t idx = uint64_t(pair) * trials + i;
    uint64_t* x = mem + idx * kWordsPerTrial;
    const uint64_t start = t0 + uint64_t(i) * period_ns;
    // MP's reader brings x into its SM's L1 before the trial (a plain load may then hit it).
    if (mp && role == 1) r_pre = __ldca(reinterpret_cast<const unsigned long long*>(x));
    while (global_ns() < start) {
    }
    if (mp && role == 1)  // wait for the flag, so the test's loads follow it closely
      for (int k = 0; k < 256 && *reinterpret_cast<volatile uint64_t*>(x + 16) == 0; ++k) {
      }
    uint64_t r[2] = {7, 7};
    exec::litmus_thread(ctx, t, s, role, x, x + 16, r);
    res[(idx * 2 + role) * 2] = r[0];
    res[(idx * 2 + role) * 2 + 1] = r[1] | (r_pre << 8);  // r_pre is 0: keeps the pre-load
  }
}

struct Gpu {
  uint32_t pairs, trials;
  uint64_t *mem = nullptr, *res = nullptr;
  uint32_t period_ns;
  unsigned long long* base = nullptr;
  std::vector<uint64_t> host;
};

template <class Ctx>
uint64_t run_gpu(Gpu& g, exec::Litmus t, gpu_sim::LitmusPlace p) {
  const uint64_t n = uint64_t(g.pairs) * g.trials;
  CHECK(cudaMemset(g.mem, 0, n * kWordsPerTrial * 8));
  CHECK(cudaMemset(g.base, 0, sizeof *g.base));
  const bool same = p == gpu_sim::LitmusPlace::kSameCta;
  const dim3 grid(same ? g.pairs : 2 * g.pairs), block(same ? 64 : 32);
  switch (p) {
    case gpu_sim::LitmusPlace::kSameCta:
    case gpu_sim::LitmusPlace::kOtherCtaCta:
      litmus_kernel<exec::Scope::kCta, Ctx><<<grid, block>>>(t, same, g.trials, g.period_ns, g.mem, g.res, g.base);
      break;
    case gpu_sim::LitmusPlace::kOtherCtaGpu:
      litmus_kernel<exec::Scope::kGpu, Ctx><<<grid, block>>>(t, same, g.trials, g.period_ns, g.mem, g.res, g.base);
      break;
    default:
      litmus_kernel<exec::Scope::kSystem, Ctx><<<grid, block>>>(t, same, g.trials, g.period_ns, g.mem, g.res, g.base);
      break;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(g.host.data(), g.res, n * 4 * 8, cudaMemcpyDeviceToHost));
  uint64_t weak = 0;
  for (uint64_t i = 0; i < n; ++i) weak += exec::litmus_weak(t, g.host[i * 4], g.host[i * 4 + 2], g.host[i * 4 + 3]);
  return weak;
}

}  // namespace

int main(int argc, char** argv) {
  Gpu g;
  g.pairs = argc > 1 ? uint32_t(std::atoi(argv[1])) : 128;
  g.trials = argc > 2 ? uint32_t(std::atoi(argv[2])) : 20000;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 3;
  const uint64_t model_runs = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 20000;
  g.period_ns = argc > 5 ? uint32_t(std::atoi(argv[5])) : 2000;
  const uint64_t n = uint64_t(g.pairs) * g.trials;
  CHECK(cudaMalloc(&g.mem, n * kWordsPerTrial * 8));
  CHECK(cudaMalloc(&g.res, n * 4 * 8));
  CHECK(cudaMalloc(&g.base, sizeof *g.base));
  g.host.resize(n * 4);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("litmus: %s (sm_%d%d, %d SMs); GPU: %u pairs x %u trials = %llu trials a run (one every %u ns), %d runs "
              "per mode; model: weak mode, %llu seeded runs a cell\n\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, g.pairs, g.trials, (unsigned long long)n, g.period_ns,
              runs, (unsigned long long)model_runs);
  std::printf("| test | threads, fence scope | PTX | GPU, ld/st.relaxed (CudaCtx), per run | GPU, plain ld.ca/st, per run | model (weak mode) |\n"
              "|---|---|---|---|---|---|\n");
  int bad = 0;
  const gpu_sim::LitmusPlace places[] = {gpu_sim::LitmusPlace::kSameCta, gpu_sim::LitmusPlace::kOtherCtaCta,
                                         gpu_sim::LitmusPlace::kOtherCtaGpu, gpu_sim::LitmusPlace::kOtherCtaSys};
  for (exec::Litmus t : exec::kLitmusTests)
    for (gpu_sim::LitmusPlace p : places) {
      std::string cell[2];
      for (int mode = 0; mode < 2; ++mode)
        for (int r = 0; r < runs; ++r) {
          const uint64_t w = mode == 0 ? run_gpu<CudaCtx>(g, t, p) : run_gpu<PlainCtx>(g, t, p);
          cell[mode] += (r ? " / " : "") + std::to_string(w);
          if (w != 0 && !gpu_sim::ptx_allows(t, p)) bad = 1;
        }
      const uint64_t m = gpu_sim::run_litmus(t, p, model_runs, 1, gpu_sim::MemoryModel::kWeak);
      std::printf("| %s | %s | %s | %s | %s | %llu |\n", exec::litmus_name(t), gpu_sim::litmus_place_name(p),
                  gpu_sim::ptx_allows(t, p) ? "allowed" : "forbidden", cell[0].c_str(), cell[1].c_str(), (unsigned long long)m);
    }
  std::printf("\nlitmus: %s\n", bad ? "FAILED: the GPU showed an outcome PTX forbids" : "OK: no forbidden outcome on the GPU");
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return bad;
}
