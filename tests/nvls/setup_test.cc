// NVLS set-up: multimem pack sizes, how a CTA's threads split a step's bytes, the CTA clamp,
// the channel search around one NVSwitch, the connection indexes and the memory footprint
// (core/nvls).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "base/nvls/pack.h"
#include "core/nvls/collective.h"
#include "core/nvls/setup.h"

namespace doorbell::nvls {
namespace {

TEST(NvlsPack, SizesFollowThePtxInstructionSet) {
  EXPECT_EQ(multimem_pack_bytes(DType::kF32, RedOp::kSum), 16u);   // .v4.f32
  EXPECT_EQ(multimem_pack_bytes(DType::kF16, RedOp::kSum), 16u);
  EXPECT_EQ(multimem_pack_bytes(DType::kBf16, RedOp::kSum), 16u);
  EXPECT_EQ(multimem_pack_bytes(DType::kF64, RedOp::kSum), 8u);    // no vector form
  EXPECT_EQ(multimem_pack_bytes(DType::kF16, RedOp::kMin), 16u);
  EXPECT_EQ(multimem_pack_bytes(DType::kBf16, RedOp::kMax), 16u);
  EXPECT_EQ(multimem_pack_bytes(DType::kI32, RedOp::kSum), 4u);    // integers: one element
  EXPECT_EQ(multimem_pack_bytes(DType::kU64, RedOp::kMax), 8u);
  EXPECT_EQ(multimem_pack_bytes(DType::kI64, RedOp::kMin), 8u);
  EXPECT_EQ(multimem_pack_bytes(DType::kF32, RedOp::kMin), 0u);    // no such instruction
  EXPECT_EQ(multimem_pack_bytes(DType::kF64, RedOp::kMax), 0u);
}

// The GPU's reduce runs a loop per (type, op) through with_type_op (core/nvls reduce_copy):
// every pair must reach the loop as itself, and as compile-time constants.
TEST(NvlsPack, WithTypeOpHandsEveryPairOnAsConstants) {
  for (int ti = 0; ti < 8; ++ti)
    for (int oi = 0; oi < 3; ++oi) {
      DType got_t{};
      RedOp got_op{};
      with_type_op(DType(ti), RedOp(oi), [&](auto t, auto op) {
        static_assert(decltype(t)::value == DType(t) && decltype(op)::value == RedOp(op));
        got_t = t, got_op = op;
      });
      EXPECT_EQ(int(got_t), ti);
      EXPECT_EQ(int(got_op), oi);
    }
}

struct Lanes {
  uint32_t w;
  uint32_t warp_size() const { return w; }
};
// split_packs, in hunks a warp wide (NCCL's) or the CTA's width (hunk_lanes): over sizes, pack
// widths, warp widths and CTA widths, whole warps or not, every pack before the returned end
// is taken by exactly one thread, none past it, the tail is under a pack, and a hunk's U packs
// are one hunk-wide stride apart.
TEST(NvlsSplit, EveryPackIsTakenOnceAndAHunkIsItsLanesWide) {
  constexpr uint32_t kU = 4;
  for (uint32_t w : {4u, 32u})
    for (bool warp_hunks : {false, true})
      for (uint32_t nthreads : {1u, 3u, 4u, 12u, 32u, 96u, 100u})
        for (uint32_t pack : {2u, 8u, 16u})
          for (uint64_t n = 0; n < 9000; n += n < 300 ? 1 : 97) {
            std::vector<int> taken(n / pack + 1, 0);
            const uint32_t lanes = hunk_lanes(Lanes{w}, warp_hunks, nthreads);
            ASSERT_EQ(lanes, warp_hunks && nthreads % w == 0 ? w : nthreads);
            uint64_t end = 0;
            for (uint32_t tid = 0; tid < nthreads; ++tid) {
              auto hunk = [&](uint64_t off, uint64_t stride) {
                ASSERT_EQ(stride, uint64_t(lanes) * pack);
                ASSERT_EQ(off % (kU * stride) / pack, tid % lanes) << "lane " << tid % lanes << " of its hunk";
                for (uint32_t u = 0; u < kU; ++u) ++taken[(off + u * stride) / pack];
              };
              end = split_packs<kU>(n, pack, tid, nthreads, lanes, hunk, [&](uint64_t off) { ++taken[off / pack]; });
            }
            ASSERT_EQ(end, n / pack * pack);
            for (uint64_t i = 0; i < taken.size(); ++i)
              ASSERT_EQ(taken[i], i < end / pack ? 1 : 0)
                  << "pack " << i << " of n " << n << ", pack " << pack << ", " << nthreads << " threads, " << lanes << " to a hunk";
          }
}

TEST(NvlsSetup, CtasAreTheClampedRequestNotTheChannelCount) {
  EXPECT_EQ(nvls_ctas(16, 16, 32), 16u);
  EXPECT_EQ(nvls_ctas(4, 16, 32), 16u);
  EXPECT_EQ(nvls_ctas(64, 16, 32), 32u);
  EXPECT_EQ(nvls_ctas(24, 16, 32), 24u);
}

TEST(NvlsSetup, UnsupportedSaysWhy) {
  Topology t{{400}, {400}};
  EXPECT_EQ(unsupported_reason(t), "NVLS needs at least 2 ranks");
  t = {{400, 400}, {400, 400}, false};
  EXPECT_EQ(unsupported_reason(t), "a GPU does not support multicast objects");
  t = {{400, 0}, {400, 400}};
  EXPECT_EQ(unsupported_reason(t), "GPU 1 has no NVLink to the switch");
  EXPECT_EQ(search_channels(t, {40, 20}).bw, 0);
}

// Each GPU pays bw for every channel and bw more for the one it heads: (n + 1) bw per link.
TEST(NvlsSetup, ChannelSearchGivesOneChannelPerHeadAndTheHeadTwiceTheBandwidth) {
  const std::vector<double> speeds = {60, 50, 40, 30, 24, 20, 15, 10};
  Topology h100{std::vector<double>(8, 360), std::vector<double>(8, 360)};
  ChannelPlan p = search_channels(h100, speeds);
  EXPECT_EQ(p.bw, 40);  // 9 x 40 = 360
  ASSERT_EQ(p.heads.size(), 8u);
  for (uint32_t h = 0; h < 8; ++h) EXPECT_EQ(p.heads[h], h);
  // One slow GPU limits every channel; at 2 ranks the head's 2 bw decides: 3 bw <= link.
  h100.nvs_to_gpu[5] = 200;
  EXPECT_EQ(search_channels(h100, speeds).bw, 20);
  Topology two{{89, 89}, {89, 89}};
  EXPECT_EQ(search_channels(two, speeds).bw, 24);  // 3 x 30 = 90 > 89
}

TEST(NvlsSetup, ConnectionIndexesAndFootprint) {
  EXPECT_EQ(up_index(8, 0), 9u);
  EXPECT_EQ(up_index(8, 7), 16u);
  EXPECT_EQ(down_index(8, 3), 12u);
  // 16 channels, NCCL's NVLS buffer of 1 MiB (assumption for the print) and 4 KiB of flags, 8 heads.
  const Footprint f = footprint(16, 1 << 20, 4096, 8);
  EXPECT_EQ(f.per_head, 16ull * 2 * ((1 << 20) + 4096));
  EXPECT_EQ(f.per_rank, f.per_head * 8);
  std::printf("[doorbell] NVLS footprint, 16 channels x 2 x (1 MiB + 4 KiB) x 8 heads: %.1f MiB per rank\n",
              double(f.per_rank) / double(1 << 20));
}

}  // namespace
}  // namespace doorbell::nvls
