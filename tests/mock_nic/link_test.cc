// The shared-memory links between processes, exercised by two threads of one process (each
// maps the segment as a process would): messages of many sizes, enough to wrap each ring
// many times, come back answered in order; a request larger than a ring can take is an error.
#include "hw/mock_nic/link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace doorbell::mock_nic {
namespace {

TEST(ShmLinks, RequestsAndAnswersWrapTheRingsInOrder) {
  const std::string name = "/doorbell-link-test-" + std::to_string(getpid());
  auto a = ShmLinks::open(name, 2, 0, true);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  auto b = ShmLinks::open(name, 2, 1, false);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  ASSERT_TRUE((*a)->unlink().is_ok());
  // Process 1 answers each request with its bytes reversed.
  (*b)->set_server([](uint32_t from, const uint8_t* req, size_t len, ShmLinks::Reply& r) {
    EXPECT_EQ(from, 0u);
    uint8_t* ans = r.room(len);
    ASSERT_NE(ans, nullptr);
    for (size_t k = 0; k < len; ++k) ans[k] = req[len - 1 - k];
    r.done(len);
  });
  std::thread server([&] {
    std::string why;
    EXPECT_TRUE((*b)->serve_until_all_done(&why)) << why;
  });
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < 400; ++i) {
    std::vector<uint8_t> req(1 + (i * 7919) % (96 << 10)), ans;
    for (size_t k = 0; k < req.size(); ++k) req[k] = uint8_t(i + k * 3);
    std::string why;
    ASSERT_TRUE((*a)->call(1, req, &ans, &why, 10)) << why;
    ASSERT_EQ(ans.size(), req.size());
    for (size_t k = 0; k < req.size(); ++k) ASSERT_EQ(ans[k], req[req.size() - 1 - k]) << "message " << i << " byte " << k;
    bytes += req.size();
  }
  EXPECT_GT(bytes, 8 * ShmLinks::kRingBytes);  // each ring wrapped many times
  std::string why;
  std::vector<uint8_t> huge(ShmLinks::kMaxMessage + 1), ans;
  EXPECT_FALSE((*a)->call(1, huge, &ans, &why, 1));
  EXPECT_NE(why.find("larger than the link's"), std::string::npos) << why;
  EXPECT_TRUE((*a)->serve_until_all_done(&why)) << why;
  server.join();
}

TEST(ShmLinks, AProcessThatNeverAnswersIsAClearError) {
  const std::string name = "/doorbell-link-test2-" + std::to_string(getpid());
  auto a = ShmLinks::open(name, 2, 0, true);
  ASSERT_TRUE(a.is_ok());
  ASSERT_TRUE((*a)->unlink().is_ok());
  std::vector<uint8_t> req(16), ans;
  std::string why;
  EXPECT_FALSE((*a)->call(1, req, &ans, &why, 0.2));
  EXPECT_NE(why.find("process 1 did not answer"), std::string::npos) << why;
}

}  // namespace
}  // namespace doorbell::mock_nic
