// Ranks forked by fork_ranks: they share the mapped memory, exchange blocks, pass messages
// (tests/bootstrap/messages.h), and a rank that fails, dies or throws fails the whole while
// the others get errors instead of hanging.
#include "host/bootstrap/fork.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "tests/bootstrap/messages.h"

namespace doorbell::bootstrap {
namespace {

constexpr uint64_t kMagic = 0xd00b'e11;

TEST(ForkRanks, ShareMemoryExchangeBlocksAndPassMessages) {
  constexpr uint32_t kRanks = 3;
  const Status s = fork_ranks(
      kRanks, 4096, [](SharedMemory m) { static_cast<uint64_t*>(m.data)[0] = kMagic; },
      [](Bootstrap& b, SharedMemory m) {
        auto* words = static_cast<uint64_t*>(m.data);
        const uint32_t r = b.rank();
        if (b.size() != kRanks || std::string(b.name()) != "fork" || m.bytes != 4096 || words[0] != kMagic) return 2;
        words[1 + r] = 100 + r;  // seen by the others once all passed the barrier
        if (!b.barrier()) return 3;
        for (uint32_t q = 0; q < kRanks; ++q)
          if (words[1 + q] != 100 + q) return 4;
        std::vector<uint64_t> blocks(kRanks * 2);
        blocks[r * 2] = r, blocks[r * 2 + 1] = r * 7;
        if (!b.allgather(blocks.data(), 16)) return 5;
        for (uint32_t q = 0; q < kRanks; ++q)
          if (blocks[q * 2] != q || blocks[q * 2 + 1] != q * 7) return 6;
        // 1 MiB and a bit: more than a socket pair buffers, so the copies come in pieces.
        const std::string wrong = testing::messages_wrong(b, (1 << 20) + 3);
        if (!wrong.empty()) std::fprintf(stderr, "%s\n", wrong.c_str());
        return wrong.empty() ? 0 : 7;
      });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

// Ranks 0 and 2 wait for rank 1 in an exchange; rank 1 fails in its own way. They must see an
// error (returning 0 then, so only rank 1 is named), never hang.
Status with_rank_1(int (*fail)()) {
  return fork_ranks(3, 0, nullptr, [fail](Bootstrap& b, SharedMemory) {
    if (b.rank() == 1) return fail();
    uint64_t v[3] = {};
    return b.allgather(v, 8).is_ok() ? 10 : 0;
  });
}

TEST(ForkRanks, ARankThatFailsFailsTheWhole) {
  const Status s = with_rank_1([] { return 3; });
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "bootstrap: fork_ranks: rank 1 exited with 3");
}

TEST(ForkRanks, ARankThatDiesOrThrowsFailsTheWhole) {
  const Status died = with_rank_1([]() -> int { std::abort(); });
  EXPECT_EQ(died.message(), "bootstrap: fork_ranks: rank 1 was killed by signal 6 (Aborted)") << died.to_string();
  const Status threw = with_rank_1([]() -> int { throw std::runtime_error("no"); });
  EXPECT_EQ(threw.message(), "bootstrap: fork_ranks: rank 1 exited with 1") << threw.to_string();
}

TEST(ForkRanks, OneRankAndNoRanks) {
  const Status one = fork_ranks(1, 0, nullptr, [](Bootstrap& b, SharedMemory m) {
    return b.size() == 1 && m.data == nullptr && b.barrier().is_ok() ? 0 : 1;
  });
  EXPECT_TRUE(one.is_ok()) << one.to_string();
  EXPECT_EQ(fork_ranks(0, 0, nullptr, [](Bootstrap&, SharedMemory) { return 0; }).code(), Errc::kBadParam);
}

}  // namespace
}  // namespace doorbell::bootstrap
