// Seed sweeps for randomized tests: every sweep prints its seed range, a failing seed is
// printed with the one-line command that replays exactly that run, and DOORBELL_SEED=N
// replays a single seed.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <unistd.h>

namespace doorbell::testing {

inline std::string replay_command(uint64_t seed) {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return "DOORBELL_SEED=" + std::to_string(seed) + " " + (n > 0 ? exe : "<test binary>") + " --gtest_filter='" +
         (info ? std::string(info->test_suite_name()) + "." + info->name() : "*") + "'";
}

// Calls body(seed) for seeds first..first+count-1 (or DOORBELL_SEED alone) until one returns
// false; returns that seed, or 0 when every seed passed.
inline uint64_t sweep_seeds(uint64_t first, uint64_t count, const std::function<bool(uint64_t)>& body) {
  if (const char* s = std::getenv("DOORBELL_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    count = 1;
  }
  std::printf("[doorbell] seeds %llu..%llu\n", (unsigned long long)first, (unsigned long long)(first + count - 1));
  for (uint64_t seed = first; seed < first + count; ++seed)
    if (!body(seed)) {
      std::printf("[doorbell] failing seed %llu; replay: %s\n", (unsigned long long)seed, replay_command(seed).c_str());
      return seed;
    }
  return 0;
}

}  // namespace doorbell::testing
