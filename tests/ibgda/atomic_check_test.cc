// The atomics reference check: results some order of the ops explains pass; each way a
// result can be impossible is named.
#include "sim/ibgda/atomic_check.h"

#include <gtest/gtest.h>

namespace doorbell::ibgda {
namespace {

std::string check(const AtomicCheck& a, uint64_t final_value) {
  return a.check([final_value](uint32_t, uint32_t) { return std::optional(final_value); });
}

TEST(AtomicCheck, FetchAddsThatFitAnOrderPass) {
  AtomicCheck a;
  a.fetch_add(1, 0, 5, 3);  // order: add 3, fetch-add 5 (saw 3), fetch-add 2 (saw 8), lost +4
  a.add(1, 0, 3);
  a.fetch_add(1, 0, 2, 8);
  a.fetch_add(1, 0, 4, std::nullopt);
  EXPECT_EQ(check(a, 14), "");
}

TEST(AtomicCheck, NamesWhatNoOrderOfAddsExplains) {
  AtomicCheck twice;
  twice.fetch_add(0, 3, 1, 0);
  twice.fetch_add(0, 3, 1, 0);
  EXPECT_EQ(check(twice, 2), "pe 0 word 3: a fetch-add returned 0 twice");
  AtomicCheck overlap;
  overlap.fetch_add(0, 0, 5, 0);
  overlap.fetch_add(0, 0, 1, 3);
  EXPECT_EQ(check(overlap, 6), "pe 0 word 0: fetch-adds returned 0 (adding 5) and 3: no order of the adds gives both");
  EXPECT_EQ(check(overlap, 7), "pe 0 word 0: final value 7, but its adds sum to 6");
  AtomicCheck beyond;
  beyond.fetch_add(0, 0, 1, 4);
  beyond.add(0, 0, 4);
  EXPECT_EQ(check(beyond, 5), "");
  AtomicCheck late;
  late.fetch_add(0, 0, 2, 4);
  late.add(0, 0, 1);
  EXPECT_EQ(check(late, 3), "pe 0 word 0: a fetch-add returned 4 (adding 2), beyond the final value 3");
}

TEST(AtomicCheck, CompareSwapsThatChainPass) {
  AtomicCheck a;
  a.compare_swap(1, 1, 0, 7, 0);  // won the election
  a.compare_swap(1, 1, 0, 7, 9);  // lost it, after the follow-up
  a.compare_swap(1, 1, 7, 9, 7);
  a.compare_swap(1, 1, 7, 9, 0);  // too early
  EXPECT_EQ(check(a, 9), "");
  AtomicCheck none;
  none.compare_swap(0, 0, 5, 6, 0);
  EXPECT_EQ(check(none, 0), "");
}

TEST(AtomicCheck, NamesCompareSwapsThatCannotChain) {
  AtomicCheck two_winners;
  two_winners.compare_swap(0, 0, 0, 1, 0);
  two_winners.compare_swap(0, 0, 0, 1, 0);
  EXPECT_EQ(check(two_winners, 1), "pe 0 word 0: the compare-swaps that succeeded (0->1, 0->1) do not lead from 0 to the final value 1");
  AtomicCheck wrong_end;
  wrong_end.compare_swap(0, 0, 0, 1, 0);
  EXPECT_NE(check(wrong_end, 2).find("do not lead from 0 to the final value 2"), std::string::npos);
  AtomicCheck unreachable;  // 5->6 succeeded, but the word never held 5
  unreachable.compare_swap(0, 0, 0, 6, 0);
  unreachable.compare_swap(0, 0, 5, 6, 5);
  EXPECT_NE(check(unreachable, 6).find("do not lead"), std::string::npos);
  AtomicCheck detached_cycle;  // balanced at every value, but 2->3->2 is not reached from 0
  detached_cycle.compare_swap(0, 0, 0, 1, 0);
  detached_cycle.compare_swap(0, 0, 2, 3, 2);
  detached_cycle.compare_swap(0, 0, 3, 2, 3);
  EXPECT_EQ(check(detached_cycle, 1),
            "pe 0 word 0: the compare-swaps that succeeded (0->1, 2->3, 3->2) do not lead from 0 to the final value 1");
  AtomicCheck never_held;
  never_held.compare_swap(0, 0, 0, 1, 0);
  never_held.compare_swap(0, 0, 0, 1, 4);
  EXPECT_EQ(check(never_held, 1), "pe 0 word 0: a compare-swap (0->1) returned 4, a value the word never held");
  AtomicCheck mixed;  // adds and compare-swaps on one word: an order is searched for
  mixed.add(0, 0, 1);
  mixed.compare_swap(0, 0, 0, 5, 0);  // first: 0 -> 5, then the add
  EXPECT_EQ(check(mixed, 6), "");
  EXPECT_EQ(check(mixed, 1).rfind("pe 0 word 0: no order of its atomics (add 1, compare_swap 5 if 0 -> 0)", 0), 0u) << check(mixed, 1);
}

// Every other AMO, 4- and 8-byte, mixed on one word: some order explains every fetched value
// and the final one, or the check names the word.
TEST(AtomicCheck, MixedAmosAreExplainedBySomeOrder) {
  auto check = [](const AtomicCheck& a, uint64_t final_value) {
    return a.check([final_value](uint32_t, uint32_t) { return std::optional<uint64_t>(final_value); });
  };
  AtomicCheck bits;  // or 0b0110, then fetch_and 0b0011 saw 0b0110, then xor 0b1000
  bits.amo(0, 0, AmoOp::kXor, 8, 0b1000, 0, std::nullopt);
  bits.amo(0, 0, AmoOp::kFetchAnd, 8, 0b0011, 0, 0b0110);
  bits.amo(0, 0, AmoOp::kOr, 8, 0b0110, 0, std::nullopt);
  EXPECT_EQ(check(bits, 0b1010), "");
  EXPECT_NE(check(bits, 0b0010), "");  // the xor must land somewhere
  AtomicCheck halves;  // a 4-byte add carries nothing into the high half
  halves.amo(0, 0, AmoOp::kSet, 8, 0x1'ffff'ffffull, 0, std::nullopt);
  halves.amo(0, 0, AmoOp::kFetchAdd, 4, 1, 0, 0xffff'ffffull);
  EXPECT_EQ(check(halves, 0x1'0000'0000ull), "");
  EXPECT_NE(check(halves, 0x2'0000'0000ull), "");
  AtomicCheck swaps;  // swap returned 7, but nothing ever wrote 7
  swaps.amo(0, 0, AmoOp::kSwap, 8, 3, 0, 7);
  swaps.amo(0, 0, AmoOp::kFetchInc, 8, 0, 0, 3);
  EXPECT_NE(check(swaps, 4), "");
  AtomicCheck many;
  for (int i = 0; i < 21; ++i) many.amo(0, 0, AmoOp::kOr, 8, 1, 0, std::nullopt);
  EXPECT_NE(check(many, 1).find("more than the order search takes (20)"), std::string::npos);
}

// One PE per process: each process checks its own words against every process's records.
TEST(AtomicCheck, RecordsMergedFromAnotherProcessAreCheckedWhereTheWordLives) {
  AtomicCheck here, there;  // pe 0's and pe 1's records; word 0 of pe 1 takes adds from both
  here.fetch_add(1, 0, 5, 0);
  there.fetch_add(1, 0, 2, std::nullopt);
  there.add(0, 1, 7);
  here.compare_swap(1, 2, 0, 9, 0);
  AtomicCheck at_pe1 = there;
  ASSERT_TRUE(at_pe1.merge(here.encode()));
  auto on_pe1 = [](uint64_t word0) {
    return [word0](uint32_t pe, uint32_t word) -> std::optional<uint64_t> {
      if (pe != 1) return std::nullopt;  // pe 0's words: checked in pe 0's process
      return word == 0 ? word0 : 9;
    };
  };
  EXPECT_EQ(at_pe1.check(on_pe1(7)), "");
  EXPECT_EQ(at_pe1.check(on_pe1(5)), "pe 1 word 0: final value 5, but its adds sum to 7");  // pe 0's add counts
  EXPECT_FALSE(at_pe1.merge(std::vector<uint8_t>(7)));  // not whole records
}

}  // namespace
}  // namespace doorbell::ibgda
