// A scenario's seed replays to the same report whatever the process ran before it: every
// workload, in the weak memory mode, whose store buffers group stores by the host address's
// 64-byte line (model memory must sit on line boundaries, not where malloc happened to put it).
#include <gtest/gtest.h>

#include <string>

#include "scenarios/replay/parse.h"
#include "scenarios/replay/replay.h"
#include "tests/heap_shift.h"

namespace doorbell::scenario {
namespace {

const char* const kWeakScenarios[] = {
    "name: ibgda\ntopology: {pes: 2}\nstack: {cst: true, qp_depth: 16, num_requests_in_batch: 2}\n"
    "workload:\n  warps: 2\n  lanes: 2\n  ops:\n"
    "    - {op: put, pe: 0, target: 1, bytes: 300}\n"
    "    - {op: get, pe: 1, target: 0, bytes: 40}\n"
    "    - {op: fetch_add, pe: 1, target: 0, word: 0, value: 1, count: 2}\n",
    "name: ce\ntopology: {pes: 3}\nworkload: {p2p: {pattern: alltoall, bytes: 1000, step_bytes: 128}}\n",
    "name: nvls\ntopology: {pes: 3}\nworkload: {nvls: {count: 1000, dtype: f16, channels: 1, slot_bytes: 256, step_bytes: 64, calls: 2}}\n",
};

TEST(SameSeed, AWeakReplayIsTheSameWhereverTheHeapPutsTheModelsMemory) {
  for (const char* text : kWeakScenarios) {
    Result<Scenario> s = parse_text(std::string(text) + "run: {schedule: random, seed: 5, memory: weak}\nexpect: {result: completes}\n", "same_seed.yaml");
    ASSERT_TRUE(s) << s.status().message();
    testing::expect_replays_wherever_the_heap_puts_buffers([&] {
      const ReplayResult r = replay(*s);
      EXPECT_EQ(r.outcome, sim::RunKind::kCompleted) << text << r.detail;
      return r.report.dump();
    });
  }
}

}  // namespace
}  // namespace doorbell::scenario
