// The NVSHMEM-API programs of gpu/nvshmem_api.cu (NVSHMEM 3.4.5 over the verbs shim on two
// GPUs) on doorbell's device API in the model, two PEs set up as NVSHMEM sets them up (RC to
// the peer, a DCI to each PE's own DCT). Where the programs overlap - put / get at thread,
// warp and block scope, p and g, every AMO and signal op, the put-with-signal ping-pong,
// fence and quiet ordering - each must leave what the GPU run's checks want
// (gpu/nvshmem_api_expect.h), in the SC and the weak memory mode. Not here: the barrier (the
// device API has none) and transfers above 64 KiB (time).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/ibgda/api.h"
#include "gpu/nvshmem_api_expect.h"
#include "tests/ibgda/world_rig.h"

namespace doorbell::ibgda {
namespace {

using gpu_sim::MemoryModel;
using gpu_sim::Outcome;
using gpu_sim::SimCtx;
namespace na = nvshmem_api;

class NvshmemApiPrograms : public ::testing::TestWithParam<MemoryModel> {
 protected:
  void SetUp() override {
    WorldConfig c = world_cfg(2, 8, 32);
    c.num_rc_per_pe = 2;  // NVSHMEM's IBGDA_NUM_RC_PER_PE: puts to a peer take either, so a fence has work
    c.dc = DcUse::kSelf;
    auto w = ModelWorld::create(c);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    world = std::move(*w);
  }
  gpu_sim::SchedOptions so(uint64_t seed) const {
    gpu_sim::SchedOptions o = sched(seed);
    o.memory = GetParam();
    return o;
  }
  template <class T>
  T* at(uint32_t pe, uint64_t off) { return reinterpret_cast<T*>(world->at(pe, off)); }
  std::unique_ptr<ModelWorld> world;
};

// put / get bandwidth's data: PE 0 moves n bytes (twice) at a scope; the receiver holds the
// sender's round pattern.
TEST_P(NvshmemApiPrograms, PutAndGetAtEveryScope) {
  constexpr uint64_t kMax = 64 << 10;
  const uint64_t buf = *world->malloc(kMax), local = *world->malloc(kMax);
  int round = 0;
  for (const bool get : {false, true})
    for (const int scope : {0, 1, 2})
      for (const uint64_t n : {uint64_t(8), uint64_t(4096), kMax}) {
        ++round;
        uint8_t* src = at<uint8_t>(get ? 1 : 0, get ? buf : local);
        for (uint64_t i = 0; i < n; ++i) src[i] = na::pattern(get ? 1 : 0, i, round);
        std::memset(at<uint8_t>(get ? 0 : 1, get ? local : buf), 0, n);
        gpu_sim::Scheduler s(so(uint64_t(round)));
        const gpu_sim::LaunchConfig shape{1, scope == 2 ? 8u : 1u, scope == 0 ? 1u : 32u};
        const auto r = run_on_all(*world, s, shape, [&](SimCtx& ctx, const DevState& st) {
          if (st.my_pe != 0) return;
          for (int it = 0; it < 2; ++it) {
            const OpResult res = scope == 0   ? (get ? get_nbi(ctx, st, local, buf, n, 1) : put_nbi(ctx, st, buf, local, n, 1))
                                 : scope == 1 ? (get ? get_nbi_warp(ctx, st, local, buf, n, 1) : put_nbi_warp(ctx, st, buf, local, n, 1))
                                              : (get ? get_nbi_block(ctx, st, local, buf, n, 1) : put_nbi_block(ctx, st, buf, local, n, 1));
            EXPECT_EQ(res, OpResult::kOk);
          }
          ctx.sync_cta();
          if (ctx.warp() == 0 && ctx.lane() == 0) {
            EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
          }
        });
        ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
        const uint8_t* got = at<uint8_t>(get ? 0 : 1, get ? local : buf);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < n; ++i) bad += got[i] != na::pattern(get ? 1 : 0, i, round);
        EXPECT_EQ(bad, 0u) << (get ? "get" : "put") << " scope " << scope << " " << n << " B";
      }
}

// p and g: 512 long_p to PE 1 (it holds the last), then 64 long_g (their sum).
TEST_P(NvshmemApiPrograms, PAndG) {
  const uint64_t word = *world->malloc(8);
  *at<long>(1, word) = 0;
  long sum = 0;
  gpu_sim::Scheduler s(so(2));
  const auto r = run_on_all(*world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    if (st.my_pe != 0) return;
    for (long i = 1; i <= 512; ++i) EXPECT_EQ(p<long>(ctx, st, word, i, 1), OpResult::kOk);
    EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
    for (int i = 0; i < 64; ++i) {
      long v = 0;
      EXPECT_EQ(g<long>(ctx, st, word, 1, &v), OpResult::kOk);
      sum += v;
    }
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  EXPECT_EQ(*at<long>(1, word), 512);
  EXPECT_EQ(sum, 64L * 512);
}

// Every AMO at 8 and 4 bytes on PE 1's words, in the GPU program's order, then signal set and
// add twice: the same fetched values and final words.
TEST_P(NvshmemApiPrograms, EveryAmoAndSignalOp) {
  struct Amo {
    uint64_t w8[8];
    uint32_t w4[8];
    uint64_t sig[2];
  };
  const uint64_t a = *world->malloc(sizeof(Amo));
  std::memset(at<uint8_t>(1, a), 0, sizeof(Amo));
  const uint64_t w80 = a + offsetof(Amo, w8), w81 = w80 + 8, w40 = a + offsetof(Amo, w4), w41 = w40 + 4;
  const uint64_t s0 = a + offsetof(Amo, sig), s1 = s0 + 8;
  std::vector<unsigned long long> olds;
  gpu_sim::Scheduler s(so(3));
  const auto r = run_on_all(*world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    if (st.my_pe != 0) return;
    const uint32_t peer = 1;
    uint64_t o8 = 0;
    uint32_t o4 = 0;
    auto ok = [](OpResult x) { EXPECT_EQ(x, OpResult::kOk); };
    auto f8 = [&](OpResult x) { ok(x), olds.push_back(o8); };
    auto f4 = [&](OpResult x) { ok(x), olds.push_back(o4); };
    ok(atomic_set<uint64_t>(ctx, st, w80, 100, peer));
    ok(atomic_add<uint64_t>(ctx, st, w80, 5, peer));
    f8(atomic_fetch_add<uint64_t>(ctx, st, w80, 10, peer, &o8));
    ok(atomic_inc<uint64_t>(ctx, st, w80, peer));
    f8(atomic_fetch_inc<uint64_t>(ctx, st, w80, peer, &o8));
    f8(atomic_swap<uint64_t>(ctx, st, w81, 0xf0f0, peer, &o8));
    f8(atomic_compare_swap<uint64_t>(ctx, st, w81, 0xf0f0, 0xff00, peer, &o8));
    f8(atomic_compare_swap<uint64_t>(ctx, st, w81, 1, 2, peer, &o8));
    ok(atomic_and<uint64_t>(ctx, st, w81, 0x0ff0, peer));
    ok(atomic_or<uint64_t>(ctx, st, w81, 0x000f, peer));
    ok(atomic_xor<uint64_t>(ctx, st, w81, 0x0101, peer));
    f8(atomic_fetch_and<uint64_t>(ctx, st, w81, 0x00ff, peer, &o8));
    f8(atomic_fetch_or<uint64_t>(ctx, st, w81, 0x1000, peer, &o8));
    f8(atomic_fetch_xor<uint64_t>(ctx, st, w81, 0x000e, peer, &o8));
    f8(atomic_fetch<uint64_t>(ctx, st, w81, peer, &o8));
    ok(atomic_set<uint32_t>(ctx, st, w40, 7, peer));
    ok(atomic_add<uint32_t>(ctx, st, w40, 3, peer));
    f4(atomic_fetch_add<uint32_t>(ctx, st, w40, 5, peer, &o4));
    ok(atomic_inc<uint32_t>(ctx, st, w40, peer));
    f4(atomic_fetch_inc<uint32_t>(ctx, st, w40, peer, &o4));
    f4(atomic_swap<uint32_t>(ctx, st, w41, 0xabcd, peer, &o4));
    f4(atomic_compare_swap<uint32_t>(ctx, st, w41, 0xabcd, 0x1234, peer, &o4));
    ok(atomic_and<uint32_t>(ctx, st, w41, 0x0ff0, peer));
    ok(atomic_or<uint32_t>(ctx, st, w41, 0x0001, peer));
    ok(atomic_xor<uint32_t>(ctx, st, w41, 0x0030, peer));
    f4(atomic_fetch_and<uint32_t>(ctx, st, w41, 0x0f01, peer, &o4));
    f4(atomic_fetch_or<uint32_t>(ctx, st, w41, 0x8000, peer, &o4));
    f4(atomic_fetch_xor<uint32_t>(ctx, st, w41, 0x0001, peer, &o4));
    f4(atomic_fetch<uint32_t>(ctx, st, w41, peer, &o4));
    ok(signal_op(ctx, st, s0, 9, SignalOp::kSet, peer));
    ok(signal_op(ctx, st, s1, 4, SignalOp::kAdd, peer));
    ok(signal_op(ctx, st, s1, 6, SignalOp::kAdd, peer));
    ok(quiet_all(ctx, st));
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  EXPECT_EQ(olds, std::vector<unsigned long long>(std::begin(na::kAmoOlds), std::end(na::kAmoOlds)));
  const Amo& m = *at<Amo>(1, a);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(m.w8[k], na::kAmoW8[k]) << k;
    EXPECT_EQ(m.w4[k], na::kAmoW4[k]) << k;
    EXPECT_EQ(m.sig[k], na::kAmoSig[k]) << k;
  }
}

// The put-with-signal ping-pong: PE 0 sends vals[7] with signal i, PE 1 answers the same.
TEST_P(NvshmemApiPrograms, PutWithSignalPingPong) {
  const uint64_t data = *world->malloc(8), sig = *world->malloc(8), vals = *world->malloc(8 * 8);
  for (uint32_t pe = 0; pe < 2; ++pe) {
    *at<uint64_t>(pe, data) = *at<uint64_t>(pe, sig) = 0;
    for (uint64_t i = 0; i < 8; ++i) at<uint64_t>(pe, vals)[i] = i;
  }
  gpu_sim::Scheduler s(so(4));
  const auto r = run_on_all(*world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    const uint32_t me = st.my_pe, peer = 1 - me;
    for (uint64_t i = 1; i <= 20; ++i) {
      if (me == 0) {  // NVSHMEM's putmem_signal is blocking: then quiet
        EXPECT_EQ(put_signal_nbi(ctx, st, data, vals + 8 * na::kPingPongValue, 8, sig, i, SignalOp::kSet, peer), OpResult::kOk);
        EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
      }
      uint64_t seen = 0;
      EXPECT_EQ(signal_wait_until(ctx, st, sig, Cmp::kGe, i, &seen), OpResult::kOk);
      if (me == 1) {
        EXPECT_EQ(put_signal_nbi(ctx, st, data, vals + 8 * na::kPingPongValue, 8, sig, i, SignalOp::kSet, peer), OpResult::kOk);
        EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
      }
    }
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  for (uint32_t pe = 0; pe < 2; ++pe) EXPECT_EQ(*at<uint64_t>(pe, data), na::kPingPongValue) << "pe " << pe;
}

// fence (then quiet): PE 0 puts x = i, fences, puts flag = i and waits for PE 1's
// acknowledgement; PE 1 sees flag = i, then x must be i. (The programs' data only: the model's
// NIC runs a PE's QPs in the order they were rung, so with the fence taken out this still
// passes here; Ibgda.PutWithSignalLandsAfterItsData and the family properties are the
// ordering checks.)
TEST_P(NvshmemApiPrograms, FenceAndQuietProgramsLeaveTheirData) {
  for (const bool use_quiet : {false, true}) {
    const uint64_t x = *world->malloc(8), flag = *world->malloc(8), vals = *world->malloc(64 * 8);
    for (uint32_t pe = 0; pe < 2; ++pe) {
      *at<uint64_t>(pe, x) = *at<uint64_t>(pe, flag) = 0;
      for (uint64_t i = 0; i < 64; ++i) at<uint64_t>(pe, vals)[i] = i;
    }
    uint64_t bad = 0;
    gpu_sim::Scheduler s(so(use_quiet ? 6 : 5));
    const auto r = run_on_all(*world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
      const auto* mine = at<uint64_t>(st.my_pe, flag);
      for (uint64_t i = 1; i < 50; ++i) {
        if (st.my_pe == 0) {
          EXPECT_EQ(put_nbi(ctx, st, x, vals + 8 * i, 8, 1), OpResult::kOk);
          EXPECT_EQ(use_quiet ? quiet_all(ctx, st) : fence_all(ctx, st), OpResult::kOk);
          EXPECT_EQ(put_nbi(ctx, st, flag, vals + 8 * i, 8, 1), OpResult::kOk);
          EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);  // rings the doorbell
        }
        EXPECT_EQ(exec::wait_until(ctx, exec::system_scope, "flag", mine, [i](uint64_t v) { return v >= i; }), exec::WaitResult::kOk);
        if (st.my_pe == 1) {
          uint64_t seen = 0;
          ctx.read_bytes(&seen, at<uint64_t>(1, x), 8);
          bad += seen != i;
          EXPECT_EQ(atomic_set<uint64_t>(ctx, st, flag, i, 0), OpResult::kOk);
          EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
        }
      }
    });
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    EXPECT_EQ(bad, 0u) << (use_quiet ? "quiet" : "fence");
  }
}

INSTANTIATE_TEST_SUITE_P(Memory, NvshmemApiPrograms, ::testing::Values(MemoryModel::kSc, MemoryModel::kWeak),
                         [](const auto& info) { return info.param == MemoryModel::kSc ? "sc" : "weak"; });

}  // namespace
}  // namespace doorbell::ibgda
