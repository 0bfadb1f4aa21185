// Seed 004's kernel-less transport (core/p2p/psm_p2p.h) on the CPU model: G GPUs, a
// sendrecv ring (each GPU to the next, as nccl-tests' sendrecv) or an alltoall, `channels`
// connections per ordered pair, `calls` back-to-back calls. Per GPU one host thread (the
// proxy thread) enqueues the user's producer kernel and readyEvent on the user stream, then
// progresses its send and receive args until they finished; with `overlap_calls` the user
// does not wait for a call before issuing the next (nothing on a kernel-less call's stream
// waits for its proxies) and the proxy progresses every posted call's args in post order.
// Every connection end has its own stream and `window` events. Checked during the run: one writer per control word, head and tail never
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

// Which connections share one control block. 2.26 allocates one per connection; 2.21 names
// its block by the two ranks alone, so a reading of it shares one among the pair's channels
// (kRankPair), or among both directions of the pair (kUnorderedPair), or among both
// directions on one channel (kPairChannel: a name made of the sorted ranks and the channel).
enum class ShmScope : uint8_t { kConnection, kRankPair, kUnorderedPair, kPairChannel };
const char* shm_scope_name(ShmScope s);

struct PsmRunConfig {
  uint32_t gpus = 2;
  bool alltoall = false;           // else: a ring, each GPU sending to the next
  uint64_t bytes_per_peer = 4096;  // per ordered pair and call, split evenly over the channels
  uint32_t channels = 2;
  uint32_t calls = 1;              // back-to-back calls on the same connections
  psm::Choices choices{8, 512, 0, false};
  ShmScope shm = ShmScope::kConnection;
  bool overlap_calls = false;
  psm::Plants plants;
  gpu_sim::StreamKind proxy_stream = gpu_sim::StreamKind::kNonBlocking;       // the send proxy's
  gpu_sim::StreamKind recv_proxy_stream = gpu_sim::StreamKind::kNonBlocking;  // the receive proxy's
  // The user's stream waits (a stream-ordered wait on the call's done word, as
  // cuStreamWaitValue) until the call finished, as it must before the user's next work reads
  // the received bytes; no communication kernel is involved.
  bool user_stream_waits = false;
  uint64_t copy_bytes_per_step = 1 << 20;
  bool phantom = false;            // sizes only
  uint64_t seed = 1;               // the user's bytes
};

// A stalled connection as the seed reads one: the send sub's position (base + transmitted of
// nsteps) and its view of recvMem.tail, the receive sub's and its view of sendMem.head.
struct PsmStall {
  std::string connection;  // empty: no connection stalled with both sides unfinished
  uint64_t send_base = 0, send_transmitted = 0, send_done = 0, nsteps = 0, send_sees_tail = 0;
  uint64_t recv_base = 0, recv_transmitted = 0, recv_done = 0, recv_sees_head = 0;
  std::string line() const;
};

struct PsmRunResult {
  gpu_sim::RunResult run;
  sim::RunKind kind = sim::RunKind::kCompleted;
  std::string failure;  // empty: completed, invariants held, every byte delivered once
  std::string first_violation;  // the first invariant broken, even when the run then hung
  uint64_t bytes_copied = 0;
  PsmStall stall;               // a hang: the least advanced stalled connection
};

PsmRunResult run_psm(const PsmRunConfig& c, gpu_sim::SchedOptions so);

}  // namespace doorbell::p2p
