// NVLS on the CPU model: `ranks` GPUs on one model NVSwitch, a multicast region per (head,
// channel) bound on every rank, one kernel per rank running core/nvls's CTAs; the outputs are
// compared with a reference reduction. Inputs are small integers in every type, so sums are
// exact in any order and the comparison can be exact; `random_floats` draws any floats instead
// (then only order-independent checks hold).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/nvls/collective.h"
#include "core/nvls/ring.h"
#include "hw/mem/line_aligned.h"
#include "hw/gpu_sim/scheduler.h"
#include "sim/verdict.h"

namespace doorbell::nvls {

struct NvlsRunConfig {
  uint32_t ranks = 2, channels = 1;
  uint32_t reducers = 1;  // CTAs sharing each reduce step (Args::reducers)
  DType dtype = DType::kF32;
  RedOp op = RedOp::kSum;
  bool allreduce = true;
  uint64_t count = 1024;       // elements per rank (AllReduce) / out per rank (ReduceScatter)
  uint64_t slot_bytes = 4096;  // FIFO slot
  uint64_t step_bytes = 0;     // Args::step_bytes
  uint32_t warps_per_cta = 1, lanes = 4;
  uint32_t multicast_slots = 64;  // the switch's multicast objects
  uint32_t extra_objects = 0;     // held by others before this run creates its one
  Plants plants;
  uint64_t seed = 1;
  bool random_floats = false;
  bool phantom = false;  // sizes only: no data, no reference (large timed runs)
  bool ring = false;     // NCCL's ring AllReduce over the same switch instead (the comparison)
  uint32_t calls = 1;    // back-to-back calls on the same memory (each rank's next waits for its last)
  bool positions = true;  // check the protocol's positions (sequentially consistent runs; nvls_run.cc)
  Registered registered = Registered::kNone;  // user buffers bound to multicast objects (Args::registered)
  bool sync_warp = false;  // a sync warp posts (Args::sync_warp; needs warps_per_cta >= 2)
  bool warp_hunks = false;  // copies and reduces in hunks a warp wide (Args::warp_hunks)
};

struct NvlsRunResult {
  gpu_sim::RunResult run;
  // kError: a refused configuration, multicast set-up or multimem access; kWrongData: an
  // output differs from the reference; else the scheduler's hang or step limit.
  sim::RunKind kind = sim::RunKind::kCompleted;
  std::string failure;  // empty: completed and equal to the reference
  std::vector<mem::LineBytes> outputs;
  // nccl-tests' figures from the simulated time (timed schedule): size = bytes in per rank.
  double algbw_gbps = 0, busbw_gbps = 0;
};

// Why run_nvls refuses this shape whatever the schedule and the (type, op) (empty: none).
std::string config_error(const NvlsRunConfig& c);

NvlsRunResult run_nvls(const NvlsRunConfig& c, gpu_sim::SchedOptions so);

}  // namespace doorbell::nvls
