// Shared set-up for the IBGDA tests: a small model world (4 MiB heaps in 64 KiB chunks) and
// scheduler options.
#pragma once

#include <string>

#include "sim/ibgda/model_world.h"
#include "hw/gpu_sim/scheduler.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::ibgda {

inline WorldConfig world_cfg(uint32_t npes = 2, uint32_t log_depth = 6, uint32_t batch = 32) {
  WorldConfig c;
  c.npes = npes;
  c.log_qp_depth = log_depth;
  c.opt.num_requests_in_batch = batch;
  c.heap.heap_bytes = 4ull << 20;
  c.heap.granularity = 64ull << 10;
  c.heap.max_handle_bytes = 128ull << 10;
  return c;
}

inline gpu_sim::SchedOptions sched(uint64_t seed, gpu_sim::Policy p = gpu_sim::Policy::kRandom) {
  gpu_sim::SchedOptions o;
  o.seed = seed;
  o.policy = p;
  o.hang_spins = 256;
  o.races = true;
  return o;
}

// Launch `body(ctx, state)` as a kernel of shape `cfg` on every PE, with the NIC engines
// attached; run.
template <class Body>
gpu_sim::RunResult run_on_all(ModelWorld& w, gpu_sim::Scheduler& s, gpu_sim::LaunchConfig cfg, Body body) {
  for (uint32_t pe = 0; pe < w.config().npes; ++pe) {
    DevState* st = &w.state(pe);
    s.launch("pe" + std::to_string(pe), cfg, [st, body](gpu_sim::SimCtx& ctx) { body(ctx, *st); });
  }
  w.attach(s);
  return s.run();
}

}  // namespace doorbell::ibgda
