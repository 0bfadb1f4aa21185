// gtest main for rapidcheck properties: fixes a seed (RC_PARAMS's, or a fresh one), prints it
// with the one-line command that replays the run, then runs the tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* env = std::getenv("RC_PARAMS");
  std::string params = env != nullptr ? env : "";
  if (params.find("seed=") == std::string::npos) {
    const unsigned long long seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
    params += (params.empty() ? "" : " ") + std::string("seed=") + std::to_string(seed);
    setenv("RC_PARAMS", params.c_str(), 1);
  }
  if (params.find("max_success=") == std::string::npos) {  // more cases than rapidcheck's 100
    params += " max_success=300";
    setenv("RC_PARAMS", params.c_str(), 1);
  }
  std::printf("[doorbell] rapidcheck %s\n[doorbell] replay: RC_PARAMS=\"%s\" %s --gtest_filter='%s'\n", params.c_str(),
              params.c_str(), argv[0], ::testing::GTEST_FLAG(filter).c_str());
  std::fflush(stdout);
  return RUN_ALL_TESTS();
}
