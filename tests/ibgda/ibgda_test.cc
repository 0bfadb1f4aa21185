// IBGDA on the software NIC, run by the CPU GPU model: PEs' warps execute the device
// protocol (core/ibgda) against NIC engines that consume the WQEs they write.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "sim/ibgda/model_world.h"
#include "sim/ibgda/workload.h"
#include "core/ibgda/api.h"
#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "tests/ibgda/world_rig.h"
#include "tests/seeds.h"

namespace doorbell::ibgda {
namespace {

using gpu_sim::LaunchConfig;
using gpu_sim::Outcome;
using gpu_sim::Policy;
using gpu_sim::RunResult;
using gpu_sim::Scheduler;
using gpu_sim::SimCtx;


// A workload placed in a world's heap for the one runner (sim/ibgda/workload.h): sources of
// `src_bytes`, destination slots of `slot` bytes, 8 counter words.
Workload placed(ModelWorld& world, gpu_sim::LaunchConfig shape, std::vector<Op> ops, uint64_t src_bytes = 4096,
                uint64_t slot = 4096) {
  Workload wl;
  wl.shape = shape;
  wl.ops = std::move(ops);
  wl.src = *world.malloc(src_bytes), wl.src_bytes = src_bytes;
  wl.words = *world.malloc(64);
  wl.slot = slot;
  wl.dst = *world.malloc(wl.dst_bytes());
  return wl;
}

TEST(Ibgda, PutGetAndAtomicsBetweenTwoPes) {
  // Each lane of each PE puts 1 KiB of its quarter to the peer, gets the peer's back and adds
  // 3 to the peer's word 0; the runner checks every byte and every fetch-add's value.
  const uint64_t bad = testing::sweep_seeds(1, 30, [](uint64_t seed) {
    auto w = ModelWorld::create(world_cfg());
    EXPECT_TRUE(w.is_ok()) << w.status().to_string();
    ModelWorld& world = **w;
    std::vector<Op> ops;
    for (uint32_t pe = 0; pe < 2; ++pe)
      for (OpKind k : {OpKind::kPut, OpKind::kGet, OpKind::kFetchAdd}) {
        Op o;
        o.kind = k, o.pe = pe, o.target = 1 - pe, o.bytes = 1024, o.value = 3;
        ops.push_back(o);
      }
    Workload wl = placed(world, {1, 1, 4}, ops);
    wl.seed = seed;
    const std::string why = run_workload(world, wl, sched(seed));
    EXPECT_EQ(why, "");
    for (uint32_t pe = 0; pe < 2; ++pe) EXPECT_EQ(*reinterpret_cast<uint64_t*>(world.at(pe, wl.words)), 4u * 3);
    EXPECT_EQ(world.first_error(), "");
    return why.empty() && !::testing::Test::HasFailure();
  });
  EXPECT_EQ(bad, 0u);
}

TEST(Ibgda, TransfersSplitAtHeapChunkBoundaries) {
  auto w = ModelWorld::create(world_cfg());
  ASSERT_TRUE(w.is_ok());
  ModelWorld& world = **w;
  const uint64_t pad = *world.malloc(30000);  // misalign the buffers against the 64 KiB chunks
  (void)pad;
  const uint64_t a = *world.malloc(200 << 10, 8), b = *world.malloc(200 << 10, 8);
  for (int i = 0; i < (200 << 10); ++i) world.at(0, a)[i] = uint8_t(i * 7);
  EXPECT_GT(count_pieces(world.state(0), a + 3, b + 11, (200 << 10) - 16, 1), 3u);
  Scheduler s(sched(3));
  RunResult r = run_on_all(world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    if (st.my_pe == 0) {
      EXPECT_EQ(put_nbi(ctx, st, b + 11, a + 3, (200 << 10) - 16, 1), OpResult::kOk);
      EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
    }
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  EXPECT_EQ(0, std::memcmp(world.at(1, b + 11), world.at(0, a + 3), (200 << 10) - 16));
  EXPECT_EQ(world.at(1, b + 10)[0], 0);
}

TEST(Ibgda, FetchAddFromManyAgentsGivesDistinctOldValues) {
  // Few ibuf slots make slot reuse frequent: a result read after its slot was handed on
  // would show up as a repeated previous value, which the runner's atomics check refuses.
  for (Policy p : {Policy::kRandom, Policy::kPct})
    for (uint32_t slots : {1u, 8u}) {
      const uint64_t bad = testing::sweep_seeds(1, 60, [&](uint64_t seed) {
        WorldConfig c = world_cfg(3);
        c.ibuf_slots = slots;
        auto w = ModelWorld::create(c);
        ModelWorld& world = **w;
        std::vector<Op> ops;
        for (uint32_t pe = 0; pe < 3; ++pe) {
          Op o;
          o.kind = OpKind::kFetchAdd, o.pe = pe, o.target = 0, o.count = 3;
          ops.push_back(o);
        }
        const Workload wl = placed(world, {1, 2, 2}, ops, 8, 8);
        gpu_sim::SchedOptions o = sched(seed, p);
        o.pct_steps = 2000;
        const std::string why = run_workload(world, wl, o);
        EXPECT_EQ(why, "");
        return why.empty() && *reinterpret_cast<uint64_t*>(world.at(0, wl.words)) == 3 * 2 * 2 * 3;
      });
      EXPECT_EQ(bad, 0u) << gpu_sim::policy_name(p) << " ibuf slots " << slots;
    }
}

// Every AMO NVSHMEM has (fetch and non-fetch: add, set / swap, and, or, xor, compare-swap; 4
// and 8 bytes), each as the WQE NVSHMEM 3.4.5 posts for it (core/ibgda/post_on_qp.h Amo),
// against a host reference: random sequences from PE 0 on PE 1's words, on a four-WQEBB ring
// so that the two-WQEBB masked compare-swaps (and their NOPs) wrap it; odd seeds in the weak
// memory mode.
TEST(Ibgda, EveryAmoAgainstAReference) {
  enum Kind { kFetchAdd, kCas, kSwap, kFetchAnd, kFetchOr, kFetchXor, kAdd, kSet, kAnd, kOr, kXor, kKinds };
  const uint64_t bad = testing::sweep_seeds(1, 60, [&](uint64_t seed) {
    auto w = ModelWorld::create(world_cfg(2, 2));
    if (!w.is_ok()) return false;
    ModelWorld& world = **w;
    const uint64_t words = *world.malloc(64);  // the 8-byte word at +0, the 4-byte one at +8
    uint64_t ref8 = seed * 0x9e3779b97f4a7c15ull, x = seed;
    uint32_t ref4 = uint32_t(ref8 >> 17);
    *reinterpret_cast<uint64_t*>(world.at(1, words)) = ref8;
    *reinterpret_cast<uint32_t*>(world.at(1, words + 8)) = ref4;
    auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
    struct Step {
      Kind kind;
      bool four;
      uint64_t v, cmp, want;  // want: the value a fetching one returns
    };
    std::vector<Step> steps(24);
    for (Step& st : steps) {
      st.kind = Kind(next() % kKinds), st.four = next() % 2 == 0;
      const uint64_t mask = st.four ? 0xffff'ffffull : ~uint64_t{0};
      const uint64_t cur = st.four ? ref4 : ref8;
      st.v = next() & mask;
      st.cmp = next() % 2 == 0 ? cur : next() & mask;  // a compare-swap that swaps, or likely not
      st.want = cur;
      uint64_t nv = cur;
      switch (st.kind) {
        case kFetchAdd: case kAdd: nv = cur + st.v; break;
        case kCas: nv = cur == st.cmp ? st.v : cur; break;
        case kSwap: case kSet: nv = st.v; break;
        case kFetchAnd: case kAnd: nv = cur & st.v; break;
        case kFetchOr: case kOr: nv = cur | st.v; break;
        case kFetchXor: case kXor: nv = cur ^ st.v; break;
        case kKinds: break;
      }
      if (st.four) ref4 = uint32_t(nv);
      else ref8 = nv;
    }
    std::vector<uint64_t> got(steps.size(), ~uint64_t{0});
    gpu_sim::SchedOptions so = sched(seed);
    so.memory = seed % 2 != 0 ? gpu_sim::MemoryModel::kWeak : gpu_sim::MemoryModel::kSc;
    Scheduler s(so);
    RunResult r = run_on_all(world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
      if (st.my_pe != 0) return;
      for (size_t k = 0; k < steps.size(); ++k) {
        const Step& t = steps[k];
        const uint64_t off = words + (t.four ? 8 : 0);
        OpResult res = OpResult::kOk;
        if (t.four) {
          uint32_t old = 0;
          switch (t.kind) {
            case kFetchAdd: res = atomic_fetch_add<uint32_t>(ctx, st, off, uint32_t(t.v), 1, &old); break;
            case kCas: res = atomic_compare_swap<uint32_t>(ctx, st, off, uint32_t(t.cmp), uint32_t(t.v), 1, &old); break;
            case kSwap: res = atomic_swap<uint32_t>(ctx, st, off, uint32_t(t.v), 1, &old); break;
            case kFetchAnd: res = atomic_fetch_and<uint32_t>(ctx, st, off, uint32_t(t.v), 1, &old); break;
            case kFetchOr: res = atomic_fetch_or<uint32_t>(ctx, st, off, uint32_t(t.v), 1, &old); break;
            case kFetchXor: res = atomic_fetch_xor<uint32_t>(ctx, st, off, uint32_t(t.v), 1, &old); break;
            case kAdd: res = atomic_add<uint32_t>(ctx, st, off, uint32_t(t.v), 1); break;
            case kSet: res = atomic_set<uint32_t>(ctx, st, off, uint32_t(t.v), 1); break;
            case kAnd: res = atomic_and<uint32_t>(ctx, st, off, uint32_t(t.v), 1); break;
            case kOr: res = atomic_or<uint32_t>(ctx, st, off, uint32_t(t.v), 1); break;
            case kXor: res = atomic_xor<uint32_t>(ctx, st, off, uint32_t(t.v), 1); break;
            case kKinds: break;
          }
          got[k] = old;
        } else {
          uint64_t old = 0;
          switch (t.kind) {
            case kFetchAdd: res = atomic_fetch_add(ctx, st, off, t.v, 1, &old); break;
            case kCas: res = atomic_compare_swap(ctx, st, off, t.cmp, t.v, 1, &old); break;
            case kSwap: res = atomic_swap(ctx, st, off, t.v, 1, &old); break;
            case kFetchAnd: res = atomic_fetch_and(ctx, st, off, t.v, 1, &old); break;
            case kFetchOr: res = atomic_fetch_or(ctx, st, off, t.v, 1, &old); break;
            case kFetchXor: res = atomic_fetch_xor(ctx, st, off, t.v, 1, &old); break;
            case kAdd: res = atomic_add(ctx, st, off, t.v, 1); break;
            case kSet: res = atomic_set(ctx, st, off, t.v, 1); break;
            case kAnd: res = atomic_and(ctx, st, off, t.v, 1); break;
            case kOr: res = atomic_or(ctx, st, off, t.v, 1); break;
            case kXor: res = atomic_xor(ctx, st, off, t.v, 1); break;
            case kKinds: break;
          }
          got[k] = old;
        }
        EXPECT_EQ(res, OpResult::kOk) << "step " << k;
      }
      EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
    });
    bool ok = r.outcome == Outcome::kCompleted;
    EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    for (size_t k = 0; k < steps.size() && ok; ++k)
      if (steps[k].kind < kAdd && got[k] != steps[k].want) {
        ADD_FAILURE() << "seed " << seed << " step " << k << " (kind " << steps[k].kind << (steps[k].four ? ", 4 B" : ", 8 B") << "): fetched "
                      << got[k] << ", want " << steps[k].want;
        ok = false;
      }
    const uint64_t end8 = *reinterpret_cast<uint64_t*>(world.at(1, words));
    const uint32_t end4 = *reinterpret_cast<uint32_t*>(world.at(1, words + 8));
    EXPECT_EQ(end8, ref8) << "seed " << seed;
    EXPECT_EQ(end4, ref4) << "seed " << seed;
    return ok && end8 == ref8 && end4 == ref4;
  });
  EXPECT_EQ(bad, 0u);
}

// put-with-signal: PE 0 puts round r's 256 bytes with signal r (set, or add 1) to PE 1; PE 1
// waits for the signal, reads the data (it must be round r's: the signal lands after it), and
// answers with a signal of its own that PE 0 waits for. Random schedules; odd seeds in the
// weak memory mode.
TEST(Ibgda, PutWithSignalLandsAfterItsData) {
  const uint64_t bad = testing::sweep_seeds(1, 40, [&](uint64_t seed) {
    auto w = ModelWorld::create(world_cfg(2, 3));
    if (!w.is_ok()) return false;
    ModelWorld& world = **w;
    constexpr uint64_t kBytes = 256;
    constexpr uint32_t kRounds = 6;
    const uint64_t src = *world.malloc(kBytes), dst = *world.malloc(kBytes), sig = *world.malloc(64);
    const SignalOp op = seed % 4 < 2 ? SignalOp::kSet : SignalOp::kAdd;
    uint64_t stale = 0;
    gpu_sim::SchedOptions so = sched(seed);
    so.memory = seed % 2 != 0 ? gpu_sim::MemoryModel::kWeak : gpu_sim::MemoryModel::kSc;
    Scheduler s(so);
    RunResult r = run_on_all(world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
      const uint32_t me = st.my_pe, peer = 1 - me;
      auto* mine = reinterpret_cast<uint64_t*>(st.heap_bases[me] + src);
      auto* got = reinterpret_cast<const uint64_t*>(st.heap_bases[me] + dst);
      uint64_t seen = 0;
      for (uint64_t round = 1; round <= kRounds; ++round) {
        if (me == 0) {
          for (uint64_t k = 0; k < kBytes / 8; ++k) ctx.store(exec::gpu_scope, exec::relaxed, &mine[k], round * 1000 + k);
          EXPECT_EQ(put_signal_nbi(ctx, st, dst, src, kBytes, sig, op == SignalOp::kSet ? round : 1, op, peer), OpResult::kOk);
          EXPECT_EQ(signal_wait_until(ctx, st, sig + 8, Cmp::kGe, round, &seen), OpResult::kOk);
        } else {
          EXPECT_EQ(signal_wait_until(ctx, st, sig, Cmp::kGe, round, &seen), OpResult::kOk);
          for (uint64_t k = 0; k < kBytes / 8; ++k)
            if (ctx.load(exec::system_scope, exec::relaxed, &got[k]) != round * 1000 + k) ++stale;
          EXPECT_EQ(put_signal_nbi(ctx, st, dst + 8, src, 0, sig + 8, round, SignalOp::kSet, peer), OpResult::kOk);
        }
      }
      EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
    });
    EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    EXPECT_EQ(stale, 0u) << "seed " << seed << ": PE 1 read data older than the signal it saw";
    return r.outcome == Outcome::kCompleted && stale == 0;
  });
  EXPECT_EQ(bad, 0u);
}

// put-with-signal on rings too small for its one reservation (NVSHMEM's rings are 64 deep at
// least): data in 1 or 4 pieces (64 KiB heap chunks) with a set signal (3 WQEBBs) on rings of
// 4, 8 and 16, at thread, warp and block scope (warps of 8 lanes, so 4 pieces are few enough
// for one warp's reservation), must fall back to two reservations and land;
// taking the one reservation anyway waits for room that never comes (CI's property run found
// it: WorldPool.ARewoundWorldRunsAProgramAsAFreshOneDoes, seed 9289401301451113137).
TEST(Ibgda, PutWithSignalFitsAnyRing) {
  for (uint32_t log_depth : {2u, 3u, 4u})
    for (uint64_t bytes : {uint64_t{96}, uint64_t{100} << 10})
      for (int scope : {0, 1, 2}) {
        auto w = ModelWorld::create(world_cfg(2, log_depth, 1));
        ASSERT_TRUE(w.is_ok());
        ModelWorld& world = **w;
        const uint64_t src = *world.malloc(bytes), dst = *world.malloc(bytes), sig = *world.malloc(64);
        for (uint64_t i = 0; i < bytes; ++i) world.at(0, src)[i] = uint8_t(i * 7 + 1);
        Scheduler s(sched(log_depth * 10 + uint64_t(scope)));
        const gpu_sim::LaunchConfig shape{1, scope == 2 ? 2u : 1u, scope == 0 ? 1u : 8u};
        s.launch("pe0", shape, [&](SimCtx& ctx) {
          const DevState& st = world.state(0);
          const OpResult r = scope == 0   ? put_signal_nbi(ctx, st, dst, src, bytes, sig, 5, SignalOp::kSet, 1)
                             : scope == 1 ? put_signal_nbi_warp(ctx, st, dst, src, bytes, sig, 5, SignalOp::kSet, 1)
                                          : put_signal_nbi_block(ctx, st, dst, src, bytes, sig, 5, SignalOp::kSet, 1);
          EXPECT_EQ(r, OpResult::kOk);
          if (ctx.lane() == 0 && ctx.warp() == 0) {
            EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
          }
        });
        world.attach(s);
        const RunResult r = s.run();
        ASSERT_EQ(r.outcome, Outcome::kCompleted) << "depth " << (1u << log_depth) << ", " << bytes << " B, scope " << scope << "\n" << r.report;
        EXPECT_EQ(0, std::memcmp(world.at(1, dst), world.at(0, src), bytes));
        EXPECT_EQ(*reinterpret_cast<const uint64_t*>(world.at(1, sig)), 5u);
      }
}

TEST(Ibgda, MaskedAtomics) {
  auto w = ModelWorld::create(world_cfg());
  ASSERT_TRUE(w.is_ok());
  ModelWorld& world = **w;
  const uint64_t word = *world.malloc(64);
  *reinterpret_cast<uint64_t*>(world.at(1, word)) = 0xf0;
  Scheduler s(sched(5));
  uint64_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;
  RunResult r = run_on_all(world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    if (st.my_pe != 0) return;
    EXPECT_EQ(atomic_fetch_or(ctx, st, word, 0x0f, 1, &o1), OpResult::kOk);
    EXPECT_EQ(atomic_fetch_and(ctx, st, word, 0x3c, 1, &o2), OpResult::kOk);
    EXPECT_EQ(atomic_fetch_xor(ctx, st, word, 0xff, 1, &o3), OpResult::kOk);
    EXPECT_EQ(atomic_swap(ctx, st, word, 77, 1, &o4), OpResult::kOk);
    EXPECT_EQ(atomic_add(ctx, st, word, 3, 1), OpResult::kOk);
    EXPECT_EQ(quiet_all(ctx, st), OpResult::kOk);
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  EXPECT_EQ(o1, 0xf0u);
  EXPECT_EQ(o2, 0xffu);
  EXPECT_EQ(o3, 0x3cu);
  EXPECT_EQ(o4, 0xc3u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(world.at(1, word)), 80u);
}


TEST(IbgdaApi, TypedSymmetricPointers) {
  auto w = ModelWorld::create(world_cfg());
  ASSERT_TRUE(w.is_ok());
  ModelWorld& world = **w;
  const uint64_t off = *world.malloc(64 * 8), ctr = *world.malloc(8);
  auto mine = [&](uint32_t pe) { return reinterpret_cast<uint64_t*>(world.at(pe, off)); };
  for (uint32_t i = 0; i < 64; ++i) mine(0)[i] = 1000 + i;
  uint64_t old = 0;
  Scheduler s(sched(21));
  RunResult r = run_on_all(world, s, {1, 1, 1}, [&](SimCtx& ctx, const DevState& st) {
    if (st.my_pe != 0) return;
    auto* a = reinterpret_cast<uint64_t*>(world.at(0, off));  // symmetric address on PE 0
    auto* c = reinterpret_cast<uint64_t*>(world.at(0, ctr));
    EXPECT_EQ(doorbell::put(ctx, st, a + 32, a, 32, 1), OpResult::kOk);
    EXPECT_EQ(doorbell::get(ctx, st, a + 32, a + 32, 32, 1), OpResult::kOk);
    EXPECT_EQ(doorbell::atomic_fetch_add(ctx, st, c, 5, 1, &old), OpResult::kOk);
    EXPECT_EQ(doorbell::atomic_compare_swap(ctx, st, c, 5, 9, 1, &old), OpResult::kOk);
    EXPECT_EQ(doorbell::fence(ctx, st), OpResult::kOk);
    EXPECT_EQ(doorbell::quiet(ctx, st), OpResult::kOk);
  });
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(mine(1)[32 + i], 1000u + i);
  EXPECT_EQ(old, 5u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(world.at(1, ctr)), 9u);
}


TEST(Ibgda, BlockScopePutIsIssuedByOneWarp) {
  auto w = ModelWorld::create(world_cfg());
  ASSERT_TRUE(w.is_ok());
  ModelWorld& world = **w;
  const uint64_t buf = *world.malloc(200 << 10);
  for (int i = 0; i < (200 << 10); ++i) world.at(0, buf)[i] = uint8_t(i * 5);
  Scheduler s(sched(17));
  DevState* st = &world.state(0);
  s.launch("pe0", {1, 3, 4}, [&](SimCtx& ctx) {
    EXPECT_EQ(put_nbi_block(ctx, *st, buf, buf, 200 << 10, 1), OpResult::kOk);
    if (ctx.warp() == 0) {
      EXPECT_EQ(quiet_all(ctx, *st), OpResult::kOk);
    }
  });
  world.attach(s);
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  EXPECT_EQ(0, std::memcmp(world.at(1, buf), world.at(0, buf), 200 << 10));
  EXPECT_EQ(st->qps[1].mv->resv_head, count_pieces(*st, buf, buf, 200 << 10, 1));  // one warp's WQEs only
}

// put_nbi_lanes: each lane its own transfer (none, one piece, or two across a heap chunk end), one
// reservation per warp; the data lands whole and the ring holds exactly every lane's pieces.
// On a ring of 8 the warp's pieces outnumber what one reservation may take: each lane posts
// its own then.
TEST(Ibgda, LanesPutTheirOwnTransfersInOneReservation) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    auto w = ModelWorld::create(world_cfg(2, seed <= 8 ? 7 : 3));
    ASSERT_TRUE(w.is_ok());
    ModelWorld& world = **w;
    constexpr uint64_t kChunk = 64 << 10, kSlot = 3000, kDst = 16 * kChunk;
    const uint64_t buf = *world.malloc(2 * kDst + kChunk, kChunk);
    for (uint64_t i = 0; i < kDst; ++i) world.at(0, buf)[i] = uint8_t(i * 7 + seed);
    // Lane l of warp w: its own chunk, starting 500 bytes before the chunk's end, so a
    // transfer of more than 500 bytes is two pieces (two WQEs); every third lane sends none.
    auto slot_of = [&](uint32_t warp, uint32_t lane) { return buf + (warp * 8 + lane) * kChunk + kChunk - 500; };
    auto bytes_of = [&](uint32_t warp, uint32_t lane) -> uint64_t {
      return (lane + warp) % 3 == 0 ? 0 : 1 + (lane * 997 + warp * 131 + seed * 61) % kSlot;
    };
    Scheduler s(sched(seed));
    DevState* st = &world.state(0);
    s.launch("pe0", {1, 2, 8}, [&](SimCtx& ctx) {
      const uint64_t off = slot_of(ctx.warp(), ctx.lane());
      EXPECT_EQ(put_nbi_lanes(ctx, *st, off + kDst, off, bytes_of(ctx.warp(), ctx.lane()), 1), OpResult::kOk);
      EXPECT_EQ(quiet_all(ctx, *st), OpResult::kOk);
    });
    world.attach(s);
    const auto r = s.run();
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    uint64_t pieces = 0;
    for (uint32_t wp = 0; wp < 2; ++wp)
      for (uint32_t l = 0; l < 8; ++l) {
        const uint64_t off = slot_of(wp, l), n = bytes_of(wp, l);
        EXPECT_EQ(0, std::memcmp(world.at(1, off + kDst), world.at(0, off), n)) << "warp " << wp << " lane " << l;
        if (n != 0) pieces += count_pieces(*st, off, off + kDst, n, 1);
      }
    uint64_t reserved = 0;
    for (uint32_t q = 0; q < st->npes * st->num_rc_per_pe; ++q) reserved += st->qps[q].mv->resv_head;
    EXPECT_EQ(reserved, pieces) << "seed " << seed;
  }
}

}  // namespace
}  // namespace doorbell::ibgda
