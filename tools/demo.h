// `doorbell demo`: drives the software NIC the way IBGDA does (batches of WQEs, one CQ_UPDATE
// per batch, a collapsed CQ, DBR then BlueFlame doorbell) and prints what happened.
#pragma once

#include <cstdint>

namespace doorbell::tools {

struct DemoOptions {
  uint64_t wqes = 1'000'000;
  uint32_t size = 8;        // bytes per RDMA WRITE
  uint32_t batch = 64;      // WQEs per doorbell
  uint32_t log_sq = 10;     // send ring WQEBBs
  bool cross_nic = false;   // peer QP on a second NIC model
};

// Runs the demo; returns the process exit status (non-zero when data or completions are wrong).
int run_demo(const DemoOptions& o);

}  // namespace doorbell::tools
