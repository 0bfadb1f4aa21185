// A replay scenario: the stack settings, the workload every PE's GPU threads run, faults to
// inject, the schedule, and what the run is expected to do. Parsed from YAML (parse.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ibgda/state.h"
#include "sim/ibgda/faults.h"
#include "sim/ibgda/workload.h"

namespace doorbell::scenario {

enum class Expect : uint8_t { kCompletes, kHangs, kErrors };
// The workload's ops are the one runner's (sim/ibgda/workload.h).
using ibgda::Op;
using ibgda::OpKind;
using ibgda::Scope;
using ibgda::is_atomic;

inline constexpr uint32_t kCounterWords = 8;

// A word's value the run must end with (`expect: words`).
struct ExpectWord {
  uint32_t pe = 0, word = 0;
  uint64_t equals = 0;
};

// A copy-engine P2P workload (core/p2p): `pes` GPUs exchange `bytes` per connection through
// FIFOs of 8 slots, the kernel and the send proxies on streams of the given kinds.
struct P2pWorkload {
  bool on = false;
  bool alltoall = true;                 // else GPU 0 sends to GPU 1
  uint64_t bytes = 0;                   // per connection
  uint64_t step_bytes = 512 << 10;      // FIFO slot (NCCL: 4 MiB SIMPLE buffer / 8)
  std::string kernel_stream = "blocking", proxy_stream = "non_blocking";
  uint32_t max_connections = 8;         // CUDA_DEVICE_MAX_CONNECTIONS
  bool next_kernel_queued = false;      // the next operation's kernel waits behind this one
  bool registered = false;              // registered buffers: the proxy copies buffer to buffer
  // The 4 GB alltoall stall's hypotheses (p2p::CeRunConfig says what each does): H1 the
  // kernel's chunk differs from the proxy's step; H2 streams created before the proxies'; H3
  // the proxy's call-wide byte counter in 31 (int) or 32 (uint32_t) bits.
  uint64_t kernel_chunk_bytes = 0;
  uint32_t streams_before_proxies = 0;
  uint32_t proxy_counter_bits = 0;
};

// An NVLS collective (core/nvls) on `pes` GPUs of one model NVSwitch: `count` elements per
// rank (AllReduce) or out per rank (ReduceScatter), `channels` regions per head, `reducers`
// CTAs sharing each reduce step, FIFO slots of `slot_bytes`. With `memory: phantom` and the timed schedule: sizes only, simulated busbw.
struct NvlsWorkload {
  bool on = false;
  bool allreduce = true;
  uint64_t count = 0;
  std::string dtype = "f32", op = "sum";
  uint32_t channels = 2;
  uint32_t reducers = 1;
  uint64_t slot_bytes = 1 << 20;
};

struct Scenario {
  std::string file, name, description;
  // topology
  uint32_t pes = 2;
  double wire_gbps = 0, pcie_gbps = 0;   // link rates (0: the cost model's defaults)
  // stack
  uint32_t num_rc_per_pe = 1, nics_per_pe = 1, qp_depth = 64, num_requests_in_batch = 32, ibuf_slots = 8;
  bool pe_major = false, cst = false, cpu_proxy = false, nic_buffers_on_gpu = true;
  bool failover = false;                 // backup QPs, health, host recovery (core/ibgda/failover.h)
  uint64_t start_index = 0;              // where every QP's counters begin (near 2^16, 2^32, 2^63: reach)
  uint32_t ack_timeout = 14, retry_count = 7, rnr_retry = 7;  // RC timers, as the driver sets them
  ibgda::Plants plant;                   // planted bugs (core/ibgda/state.h)
  // workload
  uint32_t ctas = 1, warps = 1, lanes = 1;
  std::vector<Op> ops;
  uint64_t alltoall_bytes_per_pe = 0;    // generator: every PE sends bytes_per_pe / pes to each PE
  uint64_t alltoall_message_bytes = 0;
  uint32_t dispatch_experts = 0, dispatch_tokens = 0, dispatch_topk = 0;  // generator: MoE dispatch
  uint64_t dispatch_token_bytes = 0;
  bool dispatch_forward = true;          // tokens to their experts
  bool combine = false;                  // the dispatch's reverse: experts send tokens back (both: dispatch, then combine)
  bool phantom = false;                  // memory: phantom (sizes only, no bytes)
  P2pWorkload p2p;
  NvlsWorkload nvls;
  std::vector<ibgda::WorldFault> faults;
  bool random_faults = false;            // `faults: random`: 1..3 recoverable faults drawn from the run's seed
  // run
  bool compare_cpu_proxy = false;  // also replay with a CPU proxy and report both rates
  std::string schedule = "random";  // random | pct | timed (simulated time, models/cost_model.h)
  std::string memory_model = "sc";  // sc | weak (store buffers and stale loads: hw/gpu_sim/weak_memory.h)
  uint64_t seed = 1;
  uint32_t response_delay = 0;
  // expectation
  Expect expect = Expect::kCompletes;
  std::string expect_syndrome;   // kErrors: e.g. REMOTE_ACCESS_ERR
  std::string expect_waits_on;   // kHangs: text the hang report must contain
  std::vector<ExpectWord> expect_words;
  double expect_max_sim_us = 0;  // timed schedule: the run must finish within this (0: no limit)
};

}  // namespace doorbell::scenario
