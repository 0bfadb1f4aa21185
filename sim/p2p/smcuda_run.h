// The smcuda large-message path (core/p2p/smcuda_pml.h) on the CPU model: two ranks, one GPU
// each, each a host agent that sends `messages` GPU buffers to the other (so the set-up's
// requests cross) over an in-order message FIFO per direction, while it serves the peer's
// messages: set-up answers, host-path copies, RGET pulls through its IPC cache with
// cudaMemcpyAsync and an event, FINs. A rank's CUDA may come up only after some sends (its
// early requests are refused NOT-READY); the sender reuses a few buffers, sometimes freeing and
// re-allocating one at the same address (a new buffer id: the receiver's cache must reopen).
// Checked: no IPC mapping without peer access or before the receiver's CUDA is up, every
// message's bytes in place as they were when it was sent, the two sides' RDMA flags agreeing
// at the end, every mapping closed at teardown.
#pragma once

#include <cstdint>
#include <string>

#include "core/p2p/smcuda_pml.h"
#include "hw/gpu_sim/scheduler.h"
#include "sim/verdict.h"

namespace doorbell::p2p {

struct SmcudaRunConfig {
  uint32_t messages = 16;     // per rank
  uint64_t max_bytes = 65536;  // message sizes cycle through 1 B .. max_bytes
  bool peer_access = true;    // cuDeviceCanAccessPeer between the two GPUs
  uint32_t cuda_ready_after[2] = {0, 0};  // a rank's CUDA is up from its n-th send on
  uint32_t buffers = 3;       // send buffers per rank, reused in turn
  uint32_t realloc_every = 4;  // every n-th message frees and re-allocates its buffer first (0: never)
  smcuda::Options options;
  bool plant_no_buffer_id_check = false;  // the receiver's cache ignores buffer ids
  uint64_t seed = 1;          // the messages' bytes
};

struct SmcudaRunResult {
  gpu_sim::RunResult run;
  sim::RunKind kind = sim::RunKind::kCompleted;
  std::string failure;  // empty: completed, every check held
  uint64_t rgets = 0, eagers = 0, opens = 0, hits = 0, reopens = 0;
  std::string states;   // each side's final set-up state and flag
};

SmcudaRunResult run_smcuda(const SmcudaRunConfig& c, gpu_sim::SchedOptions so);

}  // namespace doorbell::p2p
