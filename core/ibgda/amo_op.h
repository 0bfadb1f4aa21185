// Every AMO NVSHMEM's device API has, by name (ops.h's amo() dispatches on it): for workloads,
// scenarios and checks that pick one at run time without the protocol's templates.
#pragma once

#include <cstdint>

#include "base/config.h"

namespace doorbell::ibgda {

enum class AmoOp : uint8_t { kFetchAdd, kCompareSwap, kSwap, kFetchAnd, kFetchOr, kFetchXor, kFetchInc, kAdd, kInc, kSet, kAnd, kOr, kXor };
inline constexpr uint32_t kAmoOps = 13;
DOORBELL_HD constexpr bool amo_fetches(AmoOp k) { return k <= AmoOp::kFetchInc; }

}  // namespace doorbell::ibgda
