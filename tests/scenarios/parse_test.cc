// Malformed scenario files: each gets `file:line: message` at the right line, and nothing
// runs. Plus the good path: every library scenario parses.
#include "scenarios/replay/parse.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace doorbell::scenario {
namespace {

struct Case {
  const char* file;
  int line;
  const char* says;
};

const Case kCases[] = {
    {"empty.yaml", 1, "a scenario is a mapping"},  // found by fuzz/scenario_fuzz: was line 0
    {"unknown_key.yaml", 3, "unknown key 'qp_depht' in stack (known: num_rc_per_pe, default_rc_per_pe, nics_per_pe, qp_depth"},
    {"wrong_type.yaml", 3, "'qp_depth' must be a non-negative integer, not 'sixty-four'"},
    {"negative_size.yaml", 4, "'bytes' must not be negative"},
    {"unknown_op.yaml", 4, "'op' must be one of put, get, fetch_add, add, compare_swap, quiet, put_signal, p, g, swap, fetch_and, fetch_or, fetch_xor, fetch_inc, inc, set, and, or, xor, not 'scatter'"},
    {"unreachable_pe.yaml", 5, "target PE 5 is unreachable: the topology has 2 PEs"},
    {"not_power_of_two.yaml", 2, "'qp_depth' must be a power of two, not 100"},
    {"missing_expect.yaml", 1, "missing 'expect'"},
    {"bad_bool.yaml", 3, "'cst' must be true or false"},
    {"empty_ops.yaml", 4, "'workload.ops' must be a non-empty list"},
    {"error_without_syndrome.yaml", 5, "an expected error needs 'syndrome'"},
    {"broken_yaml.yaml", 4, "end of sequence flow not found"},
    {"atomic_size.yaml", 5, "atomics are 8 bytes"},
    {"op_on_missing_pe.yaml", 5, "op on PE 3, but the topology has 2 PEs"},
    {"unknown_schedule.yaml", 5, "'schedule' must be one of random, pct, timed, preempt, not 'fifo'"},
    {"too_many_lanes.yaml", 3, "'lanes' must be in 1..32, not 64"},
    {"phantom_atomic.yaml", 5, "fetch_add needs real memory, and this scenario has 'memory: phantom'"},
    {"big_alltoall_real.yaml", 4, "more than 256 MiB per PE needs 'memory: phantom'"},
    {"warp_out_of_range.yaml", 5, "'warp' must be in 0..1, not 2"},
    {"bad_direction.yaml", 4, "'direction' must be one of dispatch, combine, both, not 'sideways'"},
    {"alltoall_uneven.yaml", 4, "'bytes_per_pe' must split into 8-byte-aligned blocks for 3 PEs"},
    {"link_down_forever.yaml", 4, "link_down needs 'for_us' (how long the port is down)"},
    {"bad_fault_list.yaml", 3, "'faults' must be a list, or 'random'"},
    {"adds_and_swaps_on_one_word.yaml", 5, "word 2 of PE 1 takes adds and compare-swaps; give them different words"},
    {"compare_on_fetch_add.yaml", 4, "'compare' is for compare_swap, not fetch_add"},
    {"expected_word_without_equals.yaml", 8, "an expected word needs 'equals'"},
    {"qp_on_warp_put.yaml", 5, "'qp' picks the QP of a thread-scope put or get, not of a collective put"},
    {"p_too_wide.yaml", 5, "p moves one value of 1 to 8 bytes"},
    {"default_pool_too_big.yaml", 3, "'default_rc_per_pe' is 3, more than num_rc_per_pe (2)"},
    {"amo_word_too_busy.yaml", 7, "word 3 of PE 1 takes 32 atomic calls with fetch_or; the order check searches 20 at most"},
    {"start_index_too_high.yaml", 3, "'start_index' must be in 0..13835058055282163712, not 18446744073709551000"},
    // A section only another workload has is refused, not ignored.
    {"p2p_with_stack.yaml", 3, "'stack' is for IBGDA workloads, not for p2p"},
    {"nvls_with_words.yaml", 7, "'words' is for IBGDA workloads, not for nvls"},
    {"p2p_with_ops.yaml", 5, "'ops' does not go with 'p2p'"},
    {"nvls_compare.yaml", 5, "'compare' is for IBGDA workloads, not for nvls"},
    {"nvls_sync_warp_one_warp.yaml", 5, "sync_warp needs 'warps' of 2 or more (the last warp only posts)"},
    {"nvls_registered_phantom.yaml", 5, "registered buffers need real memory, and this scenario has 'memory: phantom'"},
};

class BadScenario : public ::testing::TestWithParam<Case> {};

TEST_P(BadScenario, ReportsFileLineAndMessage) {
  const Case& c = GetParam();
  const std::string path = std::string(DOORBELL_BAD_SCENARIOS) + "/" + c.file;
  Result<Scenario> s = parse_file(path);
  ASSERT_FALSE(s.is_ok());
  const std::string want = path + ":" + std::to_string(c.line) + ": ";
  EXPECT_EQ(s.status().message().rfind(want, 0), 0u) << s.status().message();
  EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(All, BadScenario, ::testing::ValuesIn(kCases), [](const auto& info) {
  std::string n = info.param.file;
  return n.substr(0, n.find('.'));
});

TEST(GoodScenarios, EveryLibraryFileParses) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(DOORBELL_SCENARIO_LIBRARY)) {
    if (e.path().extension() != ".yaml") continue;
    Result<Scenario> s = parse_file(e.path().string());
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    ++n;
  }
  EXPECT_GE(n, 10);
  EXPECT_EQ(parse_file("/nonexistent.yaml").status().message(), "/nonexistent.yaml:0: cannot open the scenario file");
}

}  // namespace
}  // namespace doorbell::scenario
