// The copy-engine transport on the CPU model: G GPUs, a connection per ordered pair that
// exchanges data (send / recv from GPU 0 to 1, or an alltoall), one kernel per GPU on its
// kernel stream (a lane per outgoing and per incoming connection), and per GPU a host thread
// that launches the kernel and runs the send proxies of its outgoing connections (one stream
// and NCCL_STEPS events per connection). Streams, hardware queues and copy engines are
// gpu_sim::CudaModel's, so the two real hangs of seed 004's family can be replayed: copies on
// the legacy default stream behind the spinning kernel, and copies queued behind it in a
// shared hardware queue.
#pragma once

#include <cstdint>
#include <string>

#include "core/p2p/ce_fifo.h"
#include "hw/gpu_sim/cuda_model.h"
#include "sim/verdict.h"

namespace doorbell::p2p {

struct CeRunConfig {
  uint32_t gpus = 2;
  bool alltoall = false;            // else: GPU 0 sends to GPU 1
  uint64_t bytes = 4096;            // per connection
  uint64_t step_bytes = 512;        // FIFO slot size
  uint64_t copy_bytes_per_step = 1 << 20;  // copy engines: bytes moved per scheduling step
  gpu_sim::StreamKind kernel_stream = gpu_sim::StreamKind::kBlocking;   // cudaStreamCreate's default
  gpu_sim::StreamKind proxy_stream = gpu_sim::StreamKind::kNonBlocking;
  uint32_t max_connections = 8;     // CUDA_DEVICE_MAX_CONNECTIONS
  Plants plants;
  uint64_t seed = 1;                // source bytes
  bool phantom = false;             // sizes only: no buffers, copies move no bytes (large runs)
  // Registered buffers: the proxy copies straight from the sender's to the receiver's buffer
  // (Conn::direct); the kernel only moves the counters.
  bool direct = false;
  // Hypothesis H1 of the 4 GB alltoall stall (registered buffers, phantom only): the kernel
  // moves chunks of this many bytes while the proxy counts step_bytes steps. 0: both the same.
  uint64_t kernel_chunk_bytes = 0;
  // The next operation's kernel is enqueued on the kernel stream right behind this one (it
  // waits for it): in a hardware queue shared with a proxy stream, work behind it waits too.
  bool next_kernel_queued = false;
  // Streams each GPU creates before its proxy streams (e.g. receiver proxies' streams): with
  // enough of them, proxy streams wrap onto the kernel's hardware queue (hypothesis H2).
  uint32_t extra_streams = 0;
  // Hypothesis H3 of the 4 GB alltoall stall: each GPU's send proxy keeps the call's completed
  // bytes, over all its connections, in a 32-bit counter (seed 004 adds `int copied` beside
  // `size_t totalCopySize` to the proxy args) and retires the call once counter >= total.
  // 31: a signed int — past 2 GiB it goes negative, which as a size_t compares above any total,
  // so the call retires mid-way and the proxy posts no more; 32: unsigned — past 4 GiB it wraps
  // and never reaches the total, so the call never retires. 0: 64 bits (the fix).
  uint32_t proxy_counter_bits = 0;
};

struct CeRunResult {
  gpu_sim::RunResult run;
  // kError: the buffers did not fit device memory; kWrongData: a check after the run failed
  // (bytes, steps, invariants, open mappings); else the scheduler's hang or step limit.
  sim::RunKind kind = sim::RunKind::kCompleted;
  std::string failure;    // empty: completed, every byte delivered once, invariants held
  uint64_t bytes_copied = 0;
};

// Per connection, checked after every step: head <= tail <= staged <= head + NCCL_STEPS; at
// the end: the kernel staged exactly the proxy's nsteps, the proxy's copies sum to the bytes,
// and (real memory) every byte arrived.
CeRunResult run_ce(const CeRunConfig& c, gpu_sim::SchedOptions so);

}  // namespace doorbell::p2p
