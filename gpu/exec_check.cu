// GPU check of the execution context (run through the device tool, never in CI): the ticket
// lock and the publish ring from core/sync — the same sources the CPU model tests — on a
// Hopper GPU with CudaCtx. Prints what it measured; exits non-zero on a wrong result.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/sync/publish_ring.h"
#include "core/sync/ticket_lock.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/cuda_ctx.cuh"

using doorbell::cuda_exec::CudaCtx;
using namespace doorbell;


static_assert(exec::ExecContext<CudaCtx>);

struct Counters {
  unsigned long long timeouts;
  unsigned long long bad;
  unsigned long long consumed;
};

__global__ void ticket_kernel(sync::TicketLock* lock, uint64_t* counter, int iters, Counters* out) {
  CudaCtx ctx;
  for (int i = 0; i < iters; ++i) {
    uint64_t t;
    if (sync::ticket_acquire(ctx, lock, &t) != exec::WaitResult::kOk) {
      atomicAdd(&out->timeouts, 1ull);
      return;
    }
    // A deliberately non-atomic increment: correct only because the lock serialises it.
    const uint64_t v = ctx.load(exec::gpu_scope, exec::relaxed, counter);
    ctx.store(exec::gpu_scope, exec::relaxed, counter, v + 1);
    sync::ticket_release(ctx, lock, t);
  }
}

// CTA 0 lane 0 consumes; every warp of the other CTAs produces `iters` requests of 1..8 slots.
__global__ void ring_kernel(sync::PublishRing* r, int iters, uint64_t total, uint64_t timeout_ns, Counters* out) {
  CudaCtx ctx(timeout_ns);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      exec::WaitResult res;
      out->bad = sync::ring_consume(ctx, r, total, &res);
      out->consumed = ctx.load(exec::gpu_scope, exec::relaxed, &r->cons);
      if (res != exec::WaitResult::kOk) atomicAdd(&out->timeouts, 1ull);
    }
    return;
  }
  uint64_t end = 0;
  for (int i = 0; i < iters; ++i) {
    const uint64_t n = 1 + (ctx.warp() + i) % 8;
    if (sync::ring_produce(ctx, r, n, &end) != exec::WaitResult::kOk) {
      if (ctx.lane() == 0) atomicAdd(&out->timeouts, 1ull);
      return;
    }
  }
  if (sync::ring_quiet(ctx, r, end) != exec::WaitResult::kOk && ctx.lane() == 0) atomicAdd(&out->timeouts, 1ull);
}

static uint64_t ring_total(int ctas, int warps, int iters) {
  uint64_t t = 0;
  for (int w = 0; w < warps; ++w)
    for (int i = 0; i < iters; ++i) t += 1 + (w + i) % 8;
  return t * uint64_t(ctas - 1);
}

int main() {
  int failures = 0;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  Counters* cnt;
  CHECK(cudaMallocManaged(&cnt, sizeof(Counters)));

  {  // Ticket lock: every thread increments a plain counter under the lock.
    const int ctas = 32, threads = 128, iters = 20;
    sync::TicketLock* lock;
    uint64_t* counter;
    CHECK(cudaMalloc(&lock, sizeof *lock));
    CHECK(cudaMalloc(&counter, 8));
    CHECK(cudaMemset(lock, 0, sizeof *lock));
    CHECK(cudaMemset(counter, 0, 8));
    *cnt = {};
    auto t0 = std::chrono::steady_clock::now();
    ticket_kernel<<<ctas, threads>>>(lock, counter, iters, cnt);
    CHECK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t got;
    CHECK(cudaMemcpy(&got, counter, 8, cudaMemcpyDeviceToHost));
    const uint64_t want = uint64_t(ctas) * threads * iters;
    std::printf("ticket_lock: %d CTAs x %d threads x %d: counter %llu (want %llu), timeouts %llu, %.0f acquisitions/s %s\n",
                ctas, threads, iters, (unsigned long long)got, (unsigned long long)want, cnt->timeouts, double(want) / s,
                got == want && cnt->timeouts == 0 ? "OK" : "FAIL");
    failures += !(got == want && cnt->timeouts == 0);
  }

  // Planted: without rule (a) the last partial batch is never posted (total % batch != 0),
  // so consumer and producers stall until their bounded waits report it.
  for (int planted = 0; planted <= 1; ++planted)
    for (uint64_t batch : {1ull, 4ull, 32ull}) {
      if (planted && batch != 32) continue;
      const int ctas = planted ? 1 + 15 : 1 + 16, warps = 4, iters = planted ? 51 : 400;
      sync::PublishRing host{};
      host.nslots = 256;
      host.batch = batch;
      host.plant_no_idle_doorbell = planted;
      CHECK(cudaMalloc(&host.slots, host.nslots * 8));
      sync::PublishRing* r;
      CHECK(cudaMalloc(&r, sizeof *r));
      CHECK(cudaMemcpy(r, &host, sizeof host, cudaMemcpyHostToDevice));
      *cnt = {};
      const uint64_t total = ring_total(ctas, warps, iters);
      auto t0 = std::chrono::steady_clock::now();
      ring_kernel<<<ctas, warps * 32>>>(r, iters, total, planted ? 500'000'000ull : 5'000'000'000ull, cnt);
      CHECK(cudaDeviceSynchronize());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sync::PublishRing after;
      CHECK(cudaMemcpy(&after, r, sizeof after, cudaMemcpyDeviceToHost));
      const bool ok = planted ? cnt->timeouts > 0 : (cnt->consumed == total && cnt->bad == 0 && cnt->timeouts == 0);
      std::printf("publish_ring%s batch %llu: %d producer warps, consumed %llu of %llu, bad %llu, timeouts %llu, "
                  "resv %llu ready %llu prod %llu cons %llu, %.2f M slots/s %s\n",
                  planted ? " (planted: no idle doorbell)" : "", (unsigned long long)batch, (ctas - 1) * warps,
                  cnt->consumed, (unsigned long long)total, cnt->bad, cnt->timeouts, (unsigned long long)after.resv,
                  (unsigned long long)after.ready, (unsigned long long)after.prod, (unsigned long long)after.cons,
                  double(cnt->consumed) / s / 1e6, ok ? (planted ? "OK (bounded wait reported the stall)" : "OK") : "FAIL");
      failures += !ok;
      CHECK(cudaFree(host.slots));
      CHECK(cudaFree(r));
    }
  std::printf("%d passed, %d failed\n", 4 - failures, failures);
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return failures == 0 ? 0 : 1;
}
