// A seed must replay whatever the process did before it. The weak model groups stores by
// 64-byte line of their host address, so model buffers at whatever offset malloc gives them
// run another way once earlier allocations moved them (mem::LineBytes is the fix).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hw/gpu_sim/scheduler.h"

namespace doorbell::testing {

inline std::string fingerprint(const gpu_sim::RunResult& r) {
  return "steps " + std::to_string(r.steps) + ", trace " + std::to_string(r.trace_hash);
}

// Runs `run` (a weak-memory run returning what identifies it: a fingerprint, or a whole report)
// once, then 8 more times with 1..8 more small allocations held each time; each must match.
template <class Run>
void expect_replays_wherever_the_heap_puts_buffers(Run run) {
  const std::string a = run();
  std::vector<std::unique_ptr<char[]>> held;
  for (uint32_t shift = 1; shift <= 8; ++shift) {
    for (uint32_t i = 0; i < shift; ++i) held.emplace_back(new char[40]);  // kept: later runs' buffers land elsewhere
    EXPECT_EQ(a, run()) << "after " << shift << " more allocations";
  }
}

}  // namespace doorbell::testing
