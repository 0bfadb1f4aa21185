// The bootstrap's TCP backend with ranks on threads: blocks go all-to-all, messages pass
// point to point (tests/bootstrap/messages.h), and a root that cannot be reached, a malformed
// id, ranks that call different exchanges, a message of another size and a peer that is no
// other rank are clear errors.
#include "host/bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/bootstrap/messages.h"

namespace doorbell::bootstrap {
namespace {

// Run `body(rank)` on `n` threads, one TCP rank each.
template <class Body>
void on_ranks(uint32_t n, Body body) {
  const Result<std::string> uid = tcp_unique_id("127.0.0.1");
  ASSERT_TRUE(uid.is_ok()) << uid.status().to_string();
  std::vector<std::thread> ts;
  for (uint32_t r = 0; r < n; ++r) ts.emplace_back([&, r] { body(*uid, r); });
  for (auto& t : ts) t.join();
}

TEST(Bootstrap, TcpRanksExchangeBlocksAllToAll) {
  constexpr uint32_t kRanks = 4, kWords = 3;
  std::vector<std::vector<uint64_t>> seen(kRanks);
  on_ranks(kRanks, [&](const std::string& uid, uint32_t r) {
    Result<std::unique_ptr<Bootstrap>> b = tcp(uid, r, kRanks, 10);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_EQ((*b)->rank(), r);
    EXPECT_EQ((*b)->size(), kRanks);
    std::vector<uint64_t> buf(kRanks * kWords, 0);
    for (uint32_t i = 0; i < kWords; ++i) buf[r * kWords + i] = r * 1000 + i;
    ASSERT_TRUE((*b)->allgather(buf.data(), kWords * 8).is_ok());
    ASSERT_TRUE((*b)->barrier().is_ok());
    seen[r] = buf;
  });
  for (uint32_t r = 0; r < kRanks; ++r)
    for (uint32_t q = 0; q < kRanks; ++q)
      for (uint32_t i = 0; i < kWords; ++i) EXPECT_EQ(seen[r][q * kWords + i], q * 1000 + i) << "rank " << r << " block " << q;
}

TEST(Bootstrap, BlocksOfDifferentSizesIncludingNone) {
  constexpr uint32_t kRanks = 3;
  std::vector<std::vector<std::vector<uint8_t>>> seen(kRanks);
  on_ranks(kRanks, [&](const std::string& uid, uint32_t r) {
    Result<std::unique_ptr<Bootstrap>> b = tcp(uid, r, kRanks, 10);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    std::vector<uint8_t> mine(r * 5);  // rank 0 sends nothing
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = uint8_t(r * 16 + i);
    Result<std::vector<std::vector<uint8_t>>> all = allgatherv(**b, mine);
    ASSERT_TRUE(all.is_ok()) << all.status().to_string();
    seen[r] = *all;
  });
  for (uint32_t r = 0; r < kRanks; ++r) {
    ASSERT_EQ(seen[r].size(), kRanks);
    for (uint32_t q = 0; q < kRanks; ++q) {
      ASSERT_EQ(seen[r][q].size(), q * 5) << "rank " << r << " block " << q;
      for (size_t i = 0; i < seen[r][q].size(); ++i) EXPECT_EQ(seen[r][q][i], uint8_t(q * 16 + i));
    }
  }
}

TEST(Bootstrap, TcpRootThatIsNotThereIsAClearError) {
  const Result<std::string> uid = tcp_unique_id("127.0.0.1");  // a free port nobody listens on
  ASSERT_TRUE(uid.is_ok());
  Result<std::unique_ptr<Bootstrap>> b = tcp(*uid, 1, 2, 0.2);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("could not reach rank 0 at " + *uid), std::string::npos) << b.status().to_string();
}

TEST(Bootstrap, MalformedIdAndRankAreClearErrors) {
  EXPECT_NE(tcp("no-port", 1, 2, 0.1).status().message().find("is not host:port"), std::string::npos);
  EXPECT_NE(tcp("127.0.0.1:1", 2, 2, 0.1).status().message().find("rank 2 of a job of 2"), std::string::npos);
}

TEST(Bootstrap, RanksCallingDifferentExchangesIsAClearError) {
  std::string root_error;
  on_ranks(2, [&](const std::string& uid, uint32_t r) {
    Result<std::unique_ptr<Bootstrap>> b = tcp(uid, r, 2, 10);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    std::vector<uint8_t> buf(64);
    const Status s = (*b)->allgather(buf.data(), r == 0 ? 8 : 16);
    if (r == 0) root_error = s.message();
  });
  EXPECT_NE(root_error.find("the ranks called different exchanges"), std::string::npos) << root_error;
}

TEST(Bootstrap, TcpRanksPassMessages) {
  constexpr uint32_t kRanks = 4;
  std::vector<std::string> wrong(kRanks);
  on_ranks(kRanks, [&](const std::string& uid, uint32_t r) {
    Result<std::unique_ptr<Bootstrap>> b = tcp(uid, r, kRanks, 10);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    wrong[r] = testing::messages_wrong(**b, (4 << 20) + 3);  // more than a socket buffers
  });
  for (uint32_t r = 0; r < kRanks; ++r) EXPECT_EQ(wrong[r], "") << "rank " << r;
}

TEST(Bootstrap, MessageOfAnotherSizeIsAClearErrorAndTheNextStillPasses) {
  Status mismatch;
  Result<uint32_t> next = Status(Errc::kInternal, "not received");
  on_ranks(2, [&](const std::string& uid, uint32_t r) {
    Result<std::unique_ptr<Bootstrap>> b = tcp(uid, r, 2, 10);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    if (r == 0) {
      EXPECT_TRUE((*b)->send(1, uint64_t(5)).is_ok());
      EXPECT_TRUE((*b)->send(1, uint32_t(6)).is_ok());
    } else {
      uint8_t buf[16];
      mismatch = (*b)->recv(0, buf, sizeof buf);
      next = (*b)->recv<uint32_t>(0);
    }
  });
  EXPECT_EQ(mismatch.code(), Errc::kBadState);
  EXPECT_NE(mismatch.message().find("rank 0 sent 8 bytes, rank 1 expected 16"), std::string::npos) << mismatch.to_string();
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_EQ(*next, 6u);
}

TEST(Bootstrap, AloneWithoutALauncher) {
  const auto b = single();
  uint64_t v = 7;
  EXPECT_EQ(b->size(), 1u);
  EXPECT_TRUE(b->allgather(&v, 8).is_ok());
  EXPECT_EQ(v, 7u);
  // No other rank to name: itself, or one outside the job.
  const Status self = b->send(0, v), outside = b->recv(1, &v, 8);
  EXPECT_EQ(self.code(), Errc::kBadParam);
  EXPECT_NE(self.message().find("rank 0 cannot send to or receive from rank 0 (itself)"), std::string::npos) << self.to_string();
  EXPECT_EQ(outside.code(), Errc::kBadParam);
  EXPECT_NE(outside.message().find("rank 1 of a job of 1"), std::string::npos) << outside.to_string();
}

}  // namespace
}  // namespace doorbell::bootstrap
