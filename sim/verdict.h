// What a run on the model came to, named where it is found: the IBGDA workload runner, the
// copy-engine run and the NVLS run each set the kind themselves, so replay judges a kind and
// never reads it out of a message.
#pragma once

#include <cstdint>
#include <string>

#include "hw/gpu_sim/scheduler.h"

namespace doorbell::sim {

enum class RunKind : uint8_t {
  kCompleted,        // finished, every check held
  kHang,             // the scheduler found no lane able to move
  kStepLimit,        // the scheduler's step budget ran out
  kError,            // an operation or the set-up failed (an error CQE, a refused allocation, ...)
  kWrongData,        // finished, but a check of the bytes or counters failed
  kBrokenInvariant,  // a queue invariant broke (the root cause of any hang that follows)
  kRace,             // the race detector found a data race (SchedOptions::races)
};

// The name reports use: completed, hang, step-limit, error, wrong-data, broken-invariant, race.
constexpr const char* run_kind_name(RunKind k) {
  switch (k) {
    case RunKind::kCompleted: return "completed";
    case RunKind::kHang: return "hang";
    case RunKind::kStepLimit: return "step-limit";
    case RunKind::kError: return "error";
    case RunKind::kWrongData: return "wrong-data";
    case RunKind::kBrokenInvariant: return "broken-invariant";
    case RunKind::kRace: return "race";
  }
  return "?";
}

// A run the scheduler did not finish is a hang (or out of steps) whatever its checks found
// after it; a finished one is what they found.
constexpr RunKind finished_or(gpu_sim::Outcome o, RunKind found) {
  return o == gpu_sim::Outcome::kHang ? RunKind::kHang : o == gpu_sim::Outcome::kStepLimit ? RunKind::kStepLimit : found;
}

// A data race the detector found is the root cause of whatever else the run came to: it
// becomes the kind, its report the detail, with what the run came to after it.
inline void take_races(const gpu_sim::RunResult& r, RunKind* kind, std::string* detail) {
  if (r.races.empty()) return;
  *detail = r.races + (detail->empty() || *kind == RunKind::kCompleted ? std::string() : "then " + std::string(run_kind_name(*kind)) + ": " + *detail);
  *kind = RunKind::kRace;
}

// A kind with what explains it (a hang report, the error, what differed).
struct Verdict {
  RunKind kind = RunKind::kCompleted;
  std::string detail;
};

}  // namespace doorbell::sim
