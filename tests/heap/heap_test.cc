// The mspace allocator and the chunked symmetric heap: first fit, coalescing, growth by
// chunks reported to the transports, same offsets on every PE, and the chunk-split rule.
#include "core/heap/symmetric_heap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "core/heap/keys.h"
#include "hw/mem/os_va_space.h"
#include "tests/seeds.h"

namespace doorbell::heap {
namespace {

TEST(Mspace, FirstFitAlignsSplitsAndCoalesces) {
  Mspace m;
  m.add_region(0, 1024);
  auto a = m.alloc(100, 64), b = m.alloc(100, 64), c = m.alloc(100, 64);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 128u);  // aligned past a's 100 bytes
  EXPECT_EQ(*c, 256u);
  EXPECT_TRUE(m.free(*b).is_ok());
  EXPECT_EQ(*m.alloc(64, 64), 128u);  // first fit reuses b's hole
  EXPECT_TRUE(m.free(128).is_ok());
  EXPECT_TRUE(m.free(*a).is_ok());
  EXPECT_TRUE(m.free(*c).is_ok());
  EXPECT_EQ(m.free_chunks(), 1u);  // everything coalesced back into one chunk
  EXPECT_EQ(m.bytes_free(), 1024u);
  EXPECT_EQ(m.free(5).code(), Errc::kNotFound);
  EXPECT_FALSE(m.alloc(2048, 64).has_value());
}

TEST(Mspace, RandomAllocFreeNeverOverlapsAndCoalescesFully) {
  testing::sweep_seeds(1, 50, [](uint64_t seed) {
    std::mt19937_64 rng(seed);
    Mspace m;
    m.add_region(0, 1 << 20);
    std::map<uint64_t, uint64_t> live;
    for (int i = 0; i < 2000; ++i) {
      if (live.empty() || rng() % 3 != 0) {
        const uint64_t size = 1 + rng() % 5000, align = uint64_t(1) << (rng() % 8);
        if (auto off = m.alloc(size, align)) {
          EXPECT_EQ(*off % align, 0u);
          auto next = live.lower_bound(*off);
          if (next != live.end()) {
            EXPECT_LE(*off + size, next->first);
          }
          if (next != live.begin()) {
            EXPECT_LE(std::prev(next)->first + std::prev(next)->second, *off);
          }
          live[*off] = size;
        }
      } else {
        auto it = live.begin();
        std::advance(it, rng() % live.size());
        EXPECT_TRUE(m.free(it->first).is_ok());
        live.erase(it);
      }
    }
    for (auto& [o, s] : live) EXPECT_TRUE(m.free(o).is_ok());
    return m.free_chunks() == 1 && m.bytes_free() == (1u << 20) && !::testing::Test::HasFailure();
  });
}

TEST(SymmetricHeap, GrowsByChunksOnEveryPeAndReportsThem) {
  std::vector<std::pair<uint32_t, std::vector<uint8_t*>>> seen;
  HeapConfig c{3, 1 << 20, 64 << 10, 128 << 10};
  auto h = SymmetricHeap::create(c, mem::os_va_space(), [&](uint32_t chunk, const std::vector<uint8_t*>& a, uint64_t bytes) {
    EXPECT_EQ(bytes, 64u << 10);
    seen.push_back({chunk, a});
    return Status();
  });
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ((*h)->mapped(), 0u);
  auto a = (*h)->alloc(1000);
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ((*h)->chunks(), 1u);
  // 300 KiB: the free tail of chunk 0 (~63 KiB) plus 4 new chunks, mapped in handles of at
  // most 2 chunks.
  auto b = (*h)->alloc(300 << 10);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ((*h)->chunks(), 5u);
  EXPECT_EQ((*h)->mappings(), 1u + 2u);
  ASSERT_EQ(seen.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(seen[i].first, i);
    for (uint32_t pe = 0; pe < 3; ++pe) EXPECT_EQ(seen[i].second[pe], (*h)->base(pe) + (uint64_t(i) << 16));
  }
  // The memory is there on every PE, and the PEs' heaps are distinct.
  for (uint32_t pe = 0; pe < 3; ++pe) std::memset((*h)->base(pe) + *b, int(pe + 1), 300 << 10);
  EXPECT_EQ((*h)->base(0)[*b], 1);
  EXPECT_EQ((*h)->base(2)[*b + (300 << 10) - 1], 3);
  EXPECT_EQ((*h)->alloc(1 << 20).status().code(), Errc::kNoResource);  // beyond the reservation
}

TEST(KeyTables, FirstPieceStopsAtTheNearerChunkEnd) {
  KeyTables t;
  t.npes = 2;
  t.log2_granularity = 12;  // 4 KiB chunks
  t.nchunks = 64;
  const uint64_t lbase = 0x10000, rbase = 0x80000;
  std::vector<KeyEntry> lg(100), rg(200);
  t.lkeys_global = lg.data();
  t.rkeys_global = rg.data();
  for (uint32_t c = 0; c < 64; ++c) {
    KeyEntry l{0x100 + c, lbase + (uint64_t(c) + 1) * 4096};
    (c < KeyTables::kConstKeys ? t.lkeys_const[c] : lg[c - KeyTables::kConstKeys]) = l;
    for (uint32_t pe = 0; pe < 2; ++pe) {
      const uint32_t i = c * 2 + pe;
      KeyEntry r{0x1000 * (pe + 1) + c, rbase + (uint64_t(c) + 1) * 4096};
      (i < KeyTables::kConstKeys ? t.rkeys_const[i] : rg[i - KeyTables::kConstKeys]) = r;
    }
  }
  Piece p = first_piece(t, lbase, rbase, 4000, 100, 10000, 1, 0);  // local chunk ends after 96 bytes
  EXPECT_EQ(p.bytes, 96u);
  EXPECT_EQ(p.lkey, 0x100u);
  EXPECT_EQ(p.rkey, 0x2000u);
  p = first_piece(t, lbase, rbase, 8192, 4000, 10000, 0, 0);  // remote ends first
  EXPECT_EQ(p.bytes, 96u);
  EXPECT_EQ(p.lkey, 0x102u);
  EXPECT_EQ(p.rkey, 0x1000u);
  p = first_piece(t, lbase, rbase, 50 * 4096, 50 * 4096, 100, 1, 0);  // global-memory entries
  EXPECT_EQ(p.bytes, 100u);
  EXPECT_EQ(p.lkey, 0x100u + 50);
  EXPECT_EQ(p.rkey, 0x2000u + 50);
}

}  // namespace
}  // namespace doorbell::heap
