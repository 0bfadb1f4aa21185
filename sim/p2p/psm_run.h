// Seed 004's kernel-less transport (core/p2p/psm_p2p.h) on the CPU model: G GPUs, a
// sendrecv (GPU 0 to 1) or an alltoall, `channels` connections per ordered pair, `calls`
// back-to-back calls. Per GPU one host thread (the proxy thread) enqueues the user's
// producer kernel and readyEvent on the user stream, then progresses its send and receive
// args of the call until both finished; every connection end has its own stream and
// `window` events. Checked during the run: one writer per control word, head and tail never
// move back, the credit band 0 <= tail - head <= window per connection (both sides count the
// same base), a slot filled only when free and freed only when full; after it: every byte of
// every sub delivered once, in its place.
#pragma once

#include <cstdint>
#include <string>

#include "core/p2p/psm_p2p.h"
#include "hw/gpu_sim/cuda_model.h"
#include "sim/verdict.h"

namespace doorbell::p2p {

struct PsmRunConfig {
  uint32_t gpus = 2;
  bool alltoall = false;           // else: GPU 0 sends to GPU 1
  uint64_t bytes_per_peer = 4096;  // per ordered pair and call, split evenly over the channels
  uint32_t channels = 2;
  uint32_t calls = 1;              // back-to-back calls on the same connections
  psm::Choices choices{8, 512, 0, false};
  bool shm_per_pair = false;       // one control block per rank pair, shared by its channels
  psm::Plants plants;
  gpu_sim::StreamKind proxy_stream = gpu_sim::StreamKind::kNonBlocking;
  uint64_t copy_bytes_per_step = 1 << 20;
  bool phantom = false;            // sizes only
  uint64_t seed = 1;               // the user's bytes
};

struct PsmRunResult {
  gpu_sim::RunResult run;
  sim::RunKind kind = sim::RunKind::kCompleted;
  std::string failure;  // empty: completed, invariants held, every byte delivered once
  uint64_t bytes_copied = 0;
};

PsmRunResult run_psm(const PsmRunConfig& c, gpu_sim::SchedOptions so);

}  // namespace doorbell::p2p
