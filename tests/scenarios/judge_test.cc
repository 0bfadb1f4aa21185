// The one expectation switch holds for every workload: a time limit (expect.max_sim_time_us)
// is checked for P2P and NVLS runs as for IBGDA ones, and an NVLS set-up error is a typed
// error. Sections a workload cannot use are refused by the parser (parse_test.cc).
#include "scenarios/replay/replay.h"

#include <gtest/gtest.h>

#include "scenarios/replay/parse.h"

namespace doorbell::scenario {
namespace {

ReplayResult replay_text(const std::string& text) {
  Result<Scenario> s = parse_text(text, "judge.yaml");
  if (!s) {
    ADD_FAILURE() << s.status().message();
    return {};
  }
  return replay(*s);
}

const char* const kWorkloads[] = {
    "workload: {nvls: {count: 16384, channels: 1, slot_bytes: 4096}}",
    "workload: {p2p: {pattern: sendrecv, bytes: 4096, step_bytes: 1024}}",
    "workload: {ops: [{op: put, pe: 0, target: 1, bytes: 64}]}",
};

TEST(Judge, TimeLimitHoldsForEveryWorkload) {
  for (const char* w : kWorkloads) {
    const std::string head = std::string("name: t\ntopology: {pes: 2}\n") + w + "\nrun: {schedule: timed}\n";
    const ReplayResult in_time = replay_text(head + "expect: {result: completes, max_sim_time_us: 100000}\n");
    EXPECT_TRUE(in_time.met) << w << ": " << in_time.detail;
    const ReplayResult late = replay_text(head + "expect: {result: completes, max_sim_time_us: 1}\n");
    EXPECT_EQ(late.outcome, sim::RunKind::kCompleted) << w;
    EXPECT_FALSE(late.met) << w;
    EXPECT_NE(late.detail.find("exceeds the limit of 1"), std::string::npos) << w << ": " << late.detail;
    EXPECT_EQ(late.report["expectation_met"], false) << w;
  }
}

TEST(Judge, AnErrorIsTypedWhereItIsFound) {
  const ReplayResult r = replay_text(
      "name: t\ntopology: {pes: 2}\nworkload: {nvls: {count: 256, dtype: f32, op: min}}\n"
      "expect: {result: errors, syndrome: no such form}\n");
  EXPECT_EQ(r.outcome, sim::RunKind::kError);
  EXPECT_TRUE(r.met) << r.detail;
}

}  // namespace
}  // namespace doorbell::scenario
