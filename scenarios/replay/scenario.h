// A replay scenario: what every workload shares (topology, memory, schedule, seed, the
// expected outcome) and one of three workloads — IBGDA ops and generators on NIC models, a
// copy-engine P2P exchange, or an NVLS collective. Parsed from YAML (parse.h); each workload
// has its runner (runner.h).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "sim/ibgda/faults.h"
#include "sim/ibgda/stack.h"
#include "sim/ibgda/workload.h"
#include "sim/nvls/nvls_run.h"
#include "sim/p2p/ce_run.h"
#include "sim/p2p/psm_run.h"
#include "sim/p2p/smcuda_run.h"

namespace doorbell::scenario {

// The workload's ops are the one runner's (sim/ibgda/workload.h).
using ibgda::Op;
using ibgda::OpKind;
using ibgda::Scope;
using ibgda::is_atomic;
using ibgda::AmoOp;
using ibgda::AtomicCheck;
using ibgda::QpSelector;

inline constexpr uint32_t kCounterWords = 8;

// Generators: every PE sends bytes_per_pe / pes to each PE, in message_bytes messages.
struct AlltoallGen {
  uint64_t bytes_per_pe = 0, message_bytes = 0;
};
// A DeepEP-like MoE dispatch (tokens to their top-k experts), its combine (back), or both.
struct DispatchGen {
  uint32_t experts = 0, tokens = 0, topk = 0;
  uint64_t token_bytes = 0;
  bool forward = true;   // tokens to their experts
  bool combine = false;  // experts send tokens back (both: dispatch, then combine)
};

// IBGDA on NIC models: the stack, each PE's threads and the ops they run, generated
// messages, faults to inject.
struct IbgdaWorkload {
  ibgda::Stack stack;
  double wire_gbps = 0, pcie_gbps = 0;  // topology: the NIC's link rates (0: the cost model's)
  uint32_t ctas = 1, warps = 1, lanes = 1;
  std::vector<Op> ops;
  AlltoallGen alltoall;
  DispatchGen dispatch;
  std::vector<ibgda::WorldFault> faults;
  bool random_faults = false;      // `faults: random`: 1..3 recoverable faults drawn from the run's seed
  bool compare_cpu_proxy = false;  // also replay with a CPU proxy and report both rates
};

// The copy-engine transport (sim/p2p) and an NVLS collective (sim/nvls) are configured as
// their runs take them; the runner fills in what the common part holds (GPUs, memory, seed).
// `transport:` ce (the kernel + proxy transport, sim/p2p/ce_run.h), psm (seed 004's
// kernel-less one, psm_run.h) or smcuda (seed 001's large-message path, smcuda_run.h).
enum class P2pTransport : uint8_t { kCe, kPsm, kSmcuda };
struct P2pWorkload {
  P2pTransport transport = P2pTransport::kCe;
  p2p::CeRunConfig run;
  p2p::PsmRunConfig psm_run;
  p2p::SmcudaRunConfig smcuda_run;
};
struct NvlsWorkload {
  nvls::NvlsRunConfig run;
};

enum class Expect : uint8_t { kCompletes, kHangs, kErrors };

// A word's value the run must end with (`expect: words`).
struct ExpectWord {
  uint32_t pe = 0, word = 0;
  uint64_t equals = 0;
};

struct Expectation {
  Expect result = Expect::kCompletes;
  std::string syndrome;          // kErrors: text the error must contain, e.g. REMOTE_ACCESS_ERR
  std::string waits_on;          // kHangs: text the hang report must contain
  double max_sim_us = 0;         // timed schedule: the run must finish within this (0: no limit)
  std::vector<ExpectWord> words;  // IBGDA: counter words' final values
};

struct Scenario {
  std::string file, name, description;
  uint32_t pes = 2;
  bool phantom = false;                 // memory: phantom (sizes only, no bytes)
  std::string schedule = "random";      // random | pct | timed (simulated time, models/cost_model.h) | preempt
  std::string memory_model = "sc";      // sc | weak (store buffers and stale loads: hw/gpu_sim/weak_memory.h)
  uint64_t seed = 1;
  Expectation expect;
  std::variant<IbgdaWorkload, P2pWorkload, NvlsWorkload> work;
};

}  // namespace doorbell::scenario
