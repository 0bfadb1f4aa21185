// The IBGDA stack's settings a user chooses — QPs per peer and NIC, queue depth, batching,
// layout, CST, CPU proxy, where the NIC's buffers live, ibuf slots, failover, where the
// counters start, RC timers, late responses, planted bugs — and the one function that turns
// them into a world's configuration. A scenario's `stack:` (scenarios/replay) and a random
// program (program.h) both hold a Stack, so a new setting is added in one place.
#pragma once

#include <cstdint>

#include "core/ibgda/state.h"
#include "sim/ibgda/model_world.h"

namespace doorbell::ibgda {

struct Stack {
  uint32_t num_rc_per_pe = 1;           // RC QPs per peer and NIC
  uint32_t default_rc_per_pe = 0;       // of them, the DEFAULT pool's (0: all)
  uint32_t nics_per_pe = 1;
  uint32_t log_qp_depth = 6;            // WQEBBs per QP (and CQEs per send CQ)
  uint32_t num_requests_in_batch = 32;  // power of two
  uint32_t ibuf_slots = 8;              // fetch slots per QP (power of two)
  bool pe_major = false;                // QP layout: PE-major (DeepEP's), else QP-major (NVSHMEM's)
  bool cst = false;                     // a CST before a get's data is read (else PCIe write ordering is trusted)
  bool cpu_proxy = false;               // a CPU thread rings the doorbells for the GPU
  bool nic_buffers_on_gpu = true;       // WQ rings and DBRs in GPU memory (else host memory)
  bool failover = false;                // backup QPs, health, host recovery (core/ibgda/failover.h)
  DcUse dc = DcUse::kNone;              // DC: none, to self (NVSHMEM's default), or every QP a DCI
  uint64_t start_index = 0;             // where every QP's counters begin (near 2^16, 2^32, 2^63: reach)
  uint32_t ack_timeout = 14, retry_count = 7, rnr_retry = 7;  // RC timers, as the driver sets them
  uint32_t response_delay = 0;          // NIC model: late READ / atomic responses
  Plants plant;                         // planted bugs (core/ibgda/state.h): tests of the checkers only
};

// A world of `npes` PEs with stack `s`, drawing from `seed`; the heap, the failover threads
// and the processes are the caller's to set.
WorldConfig world_config(const Stack& s, uint32_t npes, uint64_t seed);

}  // namespace doorbell::ibgda
