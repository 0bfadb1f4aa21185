#include "sim/ibgda/faults.h"

#include <cmath>
#include <cstdio>
#include <random>

namespace doorbell::ibgda {

const char* fault_name(WorldFault::Kind k) { return mock_nic::fault_kind_name(k); }

std::string describe(const WorldFault& f) {
  char b[160], len[32] = "ever";
  if (!std::isinf(f.for_ns)) std::snprintf(len, sizeof len, "%.1fus", f.for_ns / 1000);
  std::snprintf(b, sizeof b, "%s pe=%u target=%u at=%.1fus for=%s count=%u", fault_name(f.kind), f.pe, f.target, f.at_ns / 1000,
                len, f.count);
  return b;
}

std::vector<WorldFault> random_faults(uint64_t seed, uint32_t npes, double horizon_ns) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  std::vector<WorldFault> out(1 + below(3));
  for (WorldFault& f : out) {
    f.kind = WorldFault::Kind(below(6));
    f.pe = uint32_t(below(npes));
    f.target = uint32_t(below(npes));
    f.at_ns = double(below(uint64_t(horizon_ns) + 1));
    static constexpr double kFor[] = {5e5, 2e6, 2e7};  // shorter and longer than a 7 ms retry timeout
    f.for_ns = kFor[below(3)];
    f.count = f.kind == WorldFault::kLostDoorbells ? uint32_t(1 + below(3)) : uint32_t(1 + below(30));
  }
  return out;
}

}  // namespace doorbell::ibgda
