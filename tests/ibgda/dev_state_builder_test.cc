#include "core/ibgda/dev_state_builder.h"

#include <gtest/gtest.h>

#include <vector>

namespace doorbell::ibgda {
namespace {

// Keys of chunk c on PE p and NIC d, distinct for every (c, p, d).
uint32_t key(uint32_t c, uint32_t p, uint32_t d) { return (c << 16) | (p << 8) | d; }

TEST(DevStateBuilder, KeysPastTheConstantTableLandInTheGlobalOneAndReadBack) {
  const uint32_t npes = 3, ndev = 2, nchunks = 9;  // 9 * 3 * 2 rkeys: most beyond kConstKeys
  DevStateBuilder b({1, npes, 1, ndev, QpLayout::kQpMajor, 4, 2, 1 << 20, false});
  std::vector<uint64_t> base = {0x10000000, 0x20000000, 0x30000000};
  for (uint32_t c = 0; c < nchunks; ++c) {
    std::vector<ChunkReg> regs(npes);
    for (uint32_t p = 0; p < npes; ++p) {
      regs[p].addr = base[p] + (uint64_t(c) << 20);
      for (uint32_t d = 0; d < ndev; ++d) regs[p].keys[d] = key(c, p, d);
    }
    b.set_chunk(c, regs.data(), 1 << 20);
  }
  const heap::KeyTables& t = b.state().keys;
  EXPECT_EQ(t.nchunks, nchunks);
  EXPECT_EQ(t.log2_granularity, 20u);
  ASSERT_NE(t.rkeys_global, nullptr);
  for (uint32_t c = 0; c < nchunks; ++c)
    for (uint32_t d = 0; d < ndev; ++d) {
      EXPECT_EQ(heap::lkey_entry(t, c, d).key, key(c, 1, d));  // this PE's own
      EXPECT_EQ(heap::lkey_entry(t, c, d).next_addr, base[1] + (uint64_t(c + 1) << 20));
      for (uint32_t p = 0; p < npes; ++p) {
        EXPECT_EQ(heap::rkey_entry(t, c, p, d).key, key(c, p, d));
        EXPECT_EQ(heap::rkey_entry(t, c, p, d).next_addr, base[p] + (uint64_t(c + 1) << 20));
      }
    }
  // Placed elsewhere, the arrays are the place's and hold the same entries.
  std::vector<std::vector<heap::KeyEntry>> copies;
  DevState placed = b.placed([&copies](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    if constexpr (std::is_same_v<T, heap::KeyEntry>) return copies.emplace_back(v).data();
    else return const_cast<T*>(v.data());
  });
  EXPECT_NE(placed.keys.rkeys_global, t.rkeys_global);
  EXPECT_EQ(heap::rkey_entry(placed.keys, nchunks - 1, 2, 1).key, key(nchunks - 1, 2, 1));
}

TEST(DevStateBuilder, QpsFollowTheLayoutOverNics) {
  for (QpLayout layout : {QpLayout::kQpMajor, QpLayout::kPeMajor}) {
    const uint32_t npes = 3, nrc = 2, ndev = 2;
    DevStateBuilder b({0, npes, nrc, ndev, layout, 6, 4, 4096, true});
    for (bool backup : {false, true})
      for (uint32_t g = 0; g < nrc * ndev; ++g)
        for (uint32_t peer = 0; peer < npes; ++peer)
          b.set_qp(backup, g, peer, {100 * g + peer + (backup ? 1000u : 0u), g % ndev});
    const DevState& s = b.state();
    ASSERT_EQ(b.qps(false).size(), size_t(npes * nrc * ndev));
    for (uint32_t g = 0; g < nrc * ndev; ++g)
      for (uint32_t peer = 0; peer < npes; ++peer) {
        // The layouts, written out (not through qp_slot, which the builder uses).
        const uint32_t slot = layout == QpLayout::kQpMajor ? g * npes + peer : peer * nrc * ndev + g;
        const DevQp& q = s.qps[slot];
        EXPECT_EQ(q.qpn, 100 * g + peer);
        EXPECT_EQ(q.pe, peer);
        EXPECT_EQ(q.dev, g % ndev);
        EXPECT_EQ(q.nwqes, 64u);
        EXPECT_EQ(q.ibuf_nslots, 4u);
        EXPECT_EQ(s.backups[slot].qpn, 1000 + 100 * g + peer);
      }
  }
}

}  // namespace
}  // namespace doorbell::ibgda
