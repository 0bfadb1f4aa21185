// The NVLS channel search against an oracle written apart from it (sim/nvls/plan_check.h):
// random topologies around one NVSwitch (2..8 GPUs, each link its own bandwidth) and random
// speed lists; every plan fits every link with the traffic routed channel by channel, and no
// faster speed of the list would have. Two planted slips in the search pass the hand-written
// cases of setup_test.cc and are found here.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/nvls/setup.h"
#include "sim/nvls/plan_check.h"
#include "tests/rc_find.h"

namespace doorbell::nvls {
namespace {

struct PlanCase {
  Topology t;
  std::vector<double> speeds;
};

void showValue(const PlanCase& k, std::ostream& os) {
  os << "up=";
  for (double v : k.t.gpu_to_nvs) os << v << " ";
  os << "down=";
  for (double v : k.t.nvs_to_gpu) os << v << " ";
  os << "speeds=";
  for (double v : k.speeds) os << v << " ";
}

// Whole GB/s: the search's running subtraction and the oracle's sums are then exact.
rc::Gen<PlanCase> gen_plan_case() {
  return rc::gen::exec([] {
    PlanCase k;
    const uint32_t n = *rc::gen::inRange(2u, 9u);
    for (uint32_t g = 0; g < n; ++g) {
      k.t.gpu_to_nvs.push_back(double(*rc::gen::inRange(40, 500)));
      k.t.nvs_to_gpu.push_back(double(*rc::gen::inRange(40, 500)));
    }
    k.speeds = *rc::gen::container<std::vector<double>>(*rc::gen::inRange<size_t>(1, 9), rc::gen::map(rc::gen::inRange(1, 80), [](int v) {
      return double(v);
    }));
    return k;
  });
}

std::string run(const PlanCase& k, const SearchPlants& pl = {}) { return check_plan(k.t, k.speeds, search_channels(k.t, k.speeds, pl)); }

RC_GTEST_PROP(NvlsPlanProperty, EveryPlanFitsItsLinksAndNoFasterSpeedWould, ()) {
  const PlanCase k = *gen_plan_case();
  const std::string why = run(k);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

TEST(NvlsPlanProperty, FindsSlipsTheHandWrittenCasesMiss) {
  SearchPlants unsorted, last;
  unsorted.unsorted_speeds = true;
  last.skips_last_gpu = true;
  for (const auto& [pl, name, what] : {std::tuple{unsorted, "speeds tried in list order", "fit every link, but the plan runs at"},
                                       std::tuple{last, "the last GPU's links not checked", "the plan oversubscribes a link"}}) {
    const std::string seen = testing::first_failure(name, [&pl = pl] { return run(*gen_plan_case(), pl); });
    EXPECT_FALSE(seen.empty()) << name << " was not found";
    EXPECT_NE(seen.find(what), std::string::npos) << name << ": " << seen;
    // setup_test.cc's cases (speeds fastest first, the slow GPU not the last) pass the plant.
    const std::vector<double> speeds = {60, 50, 40, 30, 24, 20, 15, 10};
    Topology h100{std::vector<double>(8, 360), std::vector<double>(8, 360)};
    EXPECT_EQ(search_channels(h100, speeds, pl).bw, 40) << name;
    h100.nvs_to_gpu[5] = 200;
    EXPECT_EQ(search_channels(h100, speeds, pl).bw, 20) << name;
    EXPECT_EQ(search_channels(Topology{{89, 89}, {89, 89}}, speeds, pl).bw, 24) << name;
  }
}

}  // namespace
}  // namespace doorbell::nvls
