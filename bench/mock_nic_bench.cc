// The NIC model's fast path: small RDMA WRITEs executed per second on one core. The ring is
// refilled with valid WQEs (each carries its own wqe_index) once per ring pass, untimed;
// each timed iteration advances the DBR by one batch, rings the BlueFlame doorbell and lets
// the engine consume the batch.
#include <benchmark/benchmark.h>

#include "hw/mock_nic/devx/rig.h"

namespace {

using namespace doorbell;
using namespace doorbell::mock_nic::driver;

void BM_RdmaWriteFastPath(benchmark::State& state) {
  const uint32_t size = uint32_t(state.range(0));
  const uint32_t signal_every = uint32_t(state.range(1));
  const uint32_t log_sq = 12, ring = 1u << log_sq, batch = 256;
  Rig rig;
  SendQueue a = rig.make_sq(0, log_sq, 0, true), b = rig.make_sq(0, 6, 0, true);
  rig.connect(a, b);
  const uint64_t src = rig.alloc(1 << 20), dst = rig.alloc(1 << 20);
  const uint32_t all = mock_nic::kLocalWrite | mock_nic::kRemoteWrite;
  const uint32_t sk = rig.reg(src, 1 << 20, all), dk = rig.reg(dst, 1 << 20, all);
  auto fill = [&](uint64_t base) {
    a.pi = base;
    for (uint32_t i = 0; i < ring; ++i) {
      const uint64_t off = uint64_t(i % 4096) * 64;
      a.write(sk, src + off, size, dk, dst + off, (i + 1) % signal_every == 0 ? mlx5::kCtrlCqUpdate : 0);
    }
  };
  uint64_t consumed = 0;
  fill(0);
  for (auto _ : state) {
    if (consumed % ring == 0 && consumed != 0) {
      state.PauseTiming();
      fill(consumed);
      state.ResumeTiming();
    }
    consumed += batch;
    a.ring_doorbell(consumed);
    rig.nic().progress();
  }
  state.SetItemsProcessed(int64_t(consumed));
  state.SetBytesProcessed(int64_t(consumed) * size);
  if (rig.nic().qp(a.qpn)->stats.wqes != consumed || rig.nic().qp(a.qpn)->stats.errors != 0)
    state.SkipWithError("engine did not execute every WQE cleanly");
}
BENCHMARK(BM_RdmaWriteFastPath)
    ->ArgNames({"bytes", "signal_every"})
    ->Args({8, 64})
    ->Args({16, 64})
    ->Args({32, 64})
    ->Args({64, 64})
    ->Args({8, 1})
    ->Args({64, 1});

}  // namespace

BENCHMARK_MAIN();
