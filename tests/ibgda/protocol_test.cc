// The IBGDA queue protocol under stress: the 16-bit CQ counter across 2^20 WQEs, every
// batch size against every queue depth, queue-index invariants checked while random
// schedules run, planted bugs (missing idle doorbell, missing 0x10000 carry) caught, the
// CPU-handler variant, and both QP layouts.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <optional>

#include <cstring>

#include "sim/ibgda/model_world.h"
#include "core/ibgda/queue.h"
#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "tests/ibgda/world_rig.h"
#include "tests/seeds.h"

namespace doorbell::ibgda {
namespace {

using gpu_sim::AgentCtx;
using gpu_sim::LaunchConfig;
using gpu_sim::Outcome;
using gpu_sim::Policy;
using gpu_sim::RunResult;
using gpu_sim::Scheduler;
using gpu_sim::SimCtx;

void watch_queues(Scheduler& s, ModelWorld& w, uint32_t pe, uint32_t qp) {
  const Mvars* m = w.state(pe).qps[qp].mv;
  s.watch("resv_head", &m->resv_head);
  s.watch("ready_head", &m->ready_head);
  s.watch("prod_idx", &m->prod_idx);
  s.watch("cons_idx", &m->cons_idx);
}

// PE 0's warps each put `ops` 8-byte messages to PE 1 (one QP), then quiet.
RunResult put_storm(ModelWorld& w, Scheduler& s, LaunchConfig cfg, int ops, std::string* invariant_violation = nullptr) {
  const uint64_t buf = *w.malloc(64 << 10);
  DevState* st = &w.state(0);
  s.launch("pe0", cfg, [st, buf, ops](SimCtx& ctx) {
    const uint64_t me = (ctx.cta() * ctx.warps_per_cta() + ctx.warp()) * ctx.warp_size() + ctx.lane();
    for (int i = 0; i < ops; ++i) {
      const uint64_t off = buf + ((me * 131 + uint64_t(i)) % 8192) * 8;
      if (put_nbi(ctx, *st, off, off, 8, 1, QpSelector{QpSelector::kIndex, 0}) != OpResult::kOk) return;
    }
    (void)quiet_all(ctx, *st);
  });
  if (invariant_violation != nullptr)
    s.add_agent("invariants", [&w, invariant_violation](AgentCtx& a) {
      for (;;) {
        a.point();
        if (invariant_violation->empty()) *invariant_violation = w.check_invariants();
        if (!a.spin("invariant checker")) return;
      }
    });
  watch_queues(s, w, 0, 1);
  w.attach(s);
  return s.run();
}

TEST(IbgdaProtocol, NoHangForEveryBatchSizeAndQueueDepth) {
  for (uint32_t batch : {1u, 2u, 4u, 8u, 16u, 32u, 64u})
    for (uint32_t log_depth = 3; log_depth <= 10; ++log_depth) {
      auto w = ModelWorld::create(world_cfg(2, log_depth, batch));
      ASSERT_TRUE(w.is_ok());
      Scheduler s(sched(batch * 100 + log_depth));
      const RunResult r = put_storm(**w, s, {1, 3, 4}, 6);
      ASSERT_EQ(r.outcome, Outcome::kCompleted) << "batch " << batch << " depth " << (1u << log_depth) << "\n" << r.report;
      const Mvars& m = *(*w)->state(0).qps[1].mv;
      EXPECT_EQ(m.cons_idx, 72u);
      EXPECT_EQ(m.resv_head, 72u);
    }
}

TEST(IbgdaProtocol, InvariantsHoldUnderRandomAndPctSchedules) {
  for (Policy p : {Policy::kRandom, Policy::kPct}) {
    const uint64_t bad = testing::sweep_seeds(1, 40, [&](uint64_t seed) {
      auto w = ModelWorld::create(world_cfg(2, 3, 4));
      std::string violation;
      Scheduler s(sched(seed, p));
      const RunResult r = put_storm(**w, s, {2, 2, 4}, 5, &violation);
      EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
      EXPECT_EQ(violation, "");
      return r.outcome == Outcome::kCompleted && violation.empty();
    });
    EXPECT_EQ(bad, 0u) << gpu_sim::policy_name(p);
  }
}

TEST(IbgdaProtocol, InvariantCheckerCatchesAPlantedViolation) {
  auto w = ModelWorld::create(world_cfg(2, 3, 4));
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ((*w)->check_invariants(), "");
  (*w)->state(0).qps[1].mv->cons_idx = 5;  // completed more than was ever posted
  EXPECT_NE((*w)->check_invariants().find("cons > prod"), std::string::npos);
}

TEST(IbgdaProtocol, MissingIdleDoorbellIsReportedAsAHang) {
  WorldConfig c = world_cfg(2, 6, 8);
  c.opt.plant.no_idle_doorbell = true;
  auto w = ModelWorld::create(c);
  ASSERT_TRUE(w.is_ok());
  Scheduler s(sched(1));
  const RunResult r = put_storm(**w, s, {1, 1, 1}, 3);  // 3 puts < batch 8: only rule (a) would ring
  ASSERT_EQ(r.outcome, Outcome::kHang) << r.report;
  std::printf("%s", r.report.c_str());
  EXPECT_NE(r.report.find("poll_cq: prod_idx >= idx"), std::string::npos);
  EXPECT_NE(r.report.find("watched: resv_head=3 ready_head=3 prod_idx=0 cons_idx=0"), std::string::npos);
  EXPECT_NE(r.report.find("nic engine: idle"), std::string::npos);
}

// 2^20 WQEs through one QP of depth 64 with a collapsed CQ. Each round posts 1..60 puts and
// polls with a lag, so the CQE is often ahead of the polled index, across 16-bit blocks; after
// every poll the rebuilt 64-bit cons_idx must cover the polled index and not exceed what the
// NIC has fetched, and after every quiet it must equal what was submitted.
uint64_t wrap_soak(bool plant_no_carry, uint64_t total, std::string* why) {
  WorldConfig c = world_cfg(2, 6, 16);
  c.opt.plant.no_carry = plant_no_carry;
  auto w = ModelWorld::create(c);
  const uint64_t buf = *(*w)->malloc(4096);
  DevState* st = &(*w)->state(0);
  mock_nic::Nic* nic = &(*w)->nic(0);
  uint64_t checked = 0;
  Scheduler s(sched(1, Policy::kRunToCompletion));
  s.launch("soak", {1, 1, 1}, [&](SimCtx& ctx) {
    const DevQp& qp = st->qps[1];
    auto fail = [&](const std::string& m) { *why = m + " (cons_idx " + std::to_string(qp.mv->cons_idx) + ")"; };
    for (uint64_t done = 0, round = 0; done < total; ++round) {
      const uint64_t k = 1 + (round * 7) % 60;
      for (uint64_t i = 0; i < k; ++i, ++done)
        if (put_nbi(ctx, *st, buf, buf + 8, 8, 1, QpSelector{QpSelector::kIndex, 0}) != OpResult::kOk) return fail("put failed");
      const uint64_t target = done - round % k;
      if (poll_cq(ctx, *st, qp, target) != OpResult::kOk) return fail("poll failed");
      const uint64_t fetched = nic->qp(qp.qpn)->head;
      if (qp.mv->cons_idx < target || qp.mv->cons_idx > fetched)
        return fail("after poll_cq(" + std::to_string(target) + ") with the NIC at " + std::to_string(fetched));
      if (round % 10 == 0) {
        if (quiet(ctx, *st, qp) != OpResult::kOk) return fail("quiet failed");
        if (qp.mv->cons_idx != done) return fail("after quiet, submitted " + std::to_string(done));
      }
      ++checked;
    }
  });
  (*w)->attach(s);
  const RunResult r = s.run();
  if (r.outcome != Outcome::kCompleted && why->empty()) *why = r.report;
  return checked;
}

TEST(IbgdaProtocol, CqWraparoundOverAMillionWqesKeepsConsIdxExact) {
  std::string why;
  const uint64_t total = 1ull << 20;
  const uint64_t checks = wrap_soak(false, total, &why);
  EXPECT_EQ(why, "");
  EXPECT_GT(checks, total / 60);
}

TEST(IbgdaProtocol, DroppingTheCarryIsCaught) {
  std::string why;
  wrap_soak(true, 1ull << 18, &why);
  EXPECT_NE(why, "") << "a poll_cq without the 0x10000 carry went unnoticed";
  std::printf("[doorbell] planted no-carry bug caught: %s\n", why.substr(0, 200).c_str());
}

TEST(IbgdaProtocol, CpuProxyVariantDeliversTheSameData) {
  const uint64_t bad = testing::sweep_seeds(1, 20, [](uint64_t seed) {
    WorldConfig c = world_cfg(2, 4, 4);
    c.opt.cpu_proxy = true;
    auto w = ModelWorld::create(c);
    const uint64_t src = *(*w)->malloc(8192), dst = *(*w)->malloc(8192);
    for (int i = 0; i < 8192; ++i) (*w)->at(0, src)[i] = uint8_t(i * 3 + 1);
    Scheduler s(sched(seed));
    DevState* st = &(*w)->state(0);
    s.launch("pe0", {1, 2, 4}, [&](SimCtx& ctx) {
      const uint64_t me = ctx.warp() * 4 + ctx.lane();
      EXPECT_EQ(put_nbi(ctx, *st, dst + me * 1024, src + me * 1024, 1024, 1), OpResult::kOk);
      EXPECT_EQ(quiet_all(ctx, *st), OpResult::kOk);
    });
    (*w)->attach(s);
    const RunResult r = s.run();
    EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    EXPECT_EQ((*w)->state(0).qps[1].mv->proxy_prod, (*w)->state(0).qps[1].mv->prod_idx);
    return r.outcome == Outcome::kCompleted && std::memcmp((*w)->at(1, dst), (*w)->at(0, src), 8192) == 0;
  });
  EXPECT_EQ(bad, 0u);
}

// The QP pools (seed 002): DEFAULT round-robins over each peer's first default_rc_per_pe
// QPs on its own counter, ANY over all of them on another, in both layouts.
TEST(IbgdaProtocol, DefaultAndAnyPoolsKeepTheirOwnCounters) {
  for (QpLayout layout : {QpLayout::kQpMajor, QpLayout::kPeMajor}) {
    WorldConfig c = world_cfg(2, 4, 4);
    c.layout = layout;
    c.num_rc_per_pe = 4;
    c.opt.num_default_rc_per_pe = 2;
    c.opt.num_requests_in_batch = 1;
    auto w = ModelWorld::create(c);
    ASSERT_TRUE(w.is_ok());
    const uint64_t buf = *(*w)->malloc(4096);
    DevState* s0 = &(*w)->state(0);
    auto puts = [&](QpSelector::Kind k, int n) {
      Scheduler s(sched(3));
      s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
        for (int i = 0; i < n; ++i) EXPECT_EQ(put_nbi(ctx, *s0, buf, buf, 8, 1, QpSelector{k, 0}), OpResult::kOk);
        EXPECT_EQ(quiet_all(ctx, *s0), OpResult::kOk);
      });
      (*w)->attach(s);
      ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
    };
    auto posted = [&] {  // WQEs reserved on each of PE 0's QPs to PE 1, member by member
      std::vector<uint64_t> v;
      for (uint32_t m = 0; m < 4; ++m) v.push_back(s0->qps[qp_slot(*s0, m, 1)].mv->resv_head);
      return v;
    };
    puts(QpSelector::kDefault, 6);
    EXPECT_EQ(posted(), (std::vector<uint64_t>{3, 3, 0, 0})) << "DEFAULT: the first two QPs only";
    puts(QpSelector::kAny, 8);
    EXPECT_EQ(posted(), (std::vector<uint64_t>{5, 5, 2, 2})) << "ANY: all four, from its own counter's start";
    EXPECT_EQ(s0->group_switches[kPoolDefault], 6u);
    EXPECT_EQ(s0->group_switches[kPoolAny], 8u);
  }
}

TEST(IbgdaProtocol, QpMajorAndPeMajorLayouts) {
  DevState st;
  st.npes = 4;
  st.num_rc_per_pe = 3;
  st.layout = QpLayout::kQpMajor;
  EXPECT_EQ(qp_slot(st, 0, 0), 0u);
  EXPECT_EQ(qp_slot(st, 0, 1), 1u);   // QP0 -> PE1 next to QP0 -> PE0
  EXPECT_EQ(qp_slot(st, 1, 0), 4u);   // QP1 -> PE0 after all PEs' QP0
  EXPECT_EQ(qp_slot(st, 4, 2), 6u);   // ids wrap modulo num_rc
  st.layout = QpLayout::kPeMajor;
  EXPECT_EQ(qp_slot(st, 1, 0), 1u);   // QP1 -> PE0 next to QP0 -> PE0
  EXPECT_EQ(qp_slot(st, 0, 1), 3u);
  // Every (id, pe) pair gets its own slot in both layouts.
  for (QpLayout l : {QpLayout::kQpMajor, QpLayout::kPeMajor}) {
    st.layout = l;
    std::set<uint32_t> slots;
    for (uint32_t id = 0; id < 3; ++id)
      for (uint32_t pe = 0; pe < 4; ++pe) slots.insert(qp_slot(st, id, pe));
    EXPECT_EQ(slots.size(), 12u);
  }
  // Live: a PE-major world with two RC QPs per peer still delivers.
  WorldConfig c = world_cfg(3, 4, 4);
  c.layout = QpLayout::kPeMajor;
  c.num_rc_per_pe = 2;
  auto w = ModelWorld::create(c);
  ASSERT_TRUE(w.is_ok());
  for (uint32_t slot = 0; slot < 6; ++slot) EXPECT_EQ((*w)->state(0).qps[slot].pe, slot / 2);
  const uint64_t buf = *(*w)->malloc(4096);
  std::memset((*w)->at(0, buf), 0x6b, 4096);
  Scheduler s(sched(9));
  DevState* s0 = &(*w)->state(0);
  s.launch("pe0", {1, 2, 2}, [&](SimCtx& ctx) {
    for (uint32_t pe = 1; pe < 3; ++pe) EXPECT_EQ(put_nbi(ctx, *s0, buf, buf, 4096, pe), OpResult::kOk);  // round robin
    EXPECT_EQ(quiet_all(ctx, *s0), OpResult::kOk);
  });
  (*w)->attach(s);
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  EXPECT_EQ((*w)->at(2, buf)[4095], 0x6b);
  EXPECT_EQ(s0->group_switches[kPoolAny], 8u);
}


// Without PCIe write ordering (may_skip_cst = false) quiet after non-blocking gets appends
// one CST — a fenced DUMP on ibuf slot 0 — and advances get_tail; with ordering, none.
TEST(IbgdaProtocol, QuietIssuesACstAfterGetsOnlyWithoutWriteOrdering) {
  for (bool ordering : {false, true}) {
    WorldConfig c = world_cfg(2, 5, 4);
    c.opt.may_skip_cst = ordering;
    c.response_delay_max = 20;  // READ data lands late; the CST's fence waits for it
    auto w = ModelWorld::create(c);
    ASSERT_TRUE(w.is_ok());
    const uint64_t src = *(*w)->malloc(4096), dst = *(*w)->malloc(4096);
    for (int i = 0; i < 4096; ++i) (*w)->at(1, src)[i] = uint8_t(i ^ 0x5a);
    DevState* st = &(*w)->state(0);
    Scheduler s(sched(4));
    s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(get_nbi(ctx, *st, dst + i * 1024, src + i * 1024, 1024, 1, QpSelector{QpSelector::kIndex, 0}), OpResult::kOk);
      EXPECT_EQ(quiet(ctx, *st, st->qps[1]), OpResult::kOk);
    });
    (*w)->attach(s);
    ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
    const Mvars& m = *st->qps[1].mv;
    EXPECT_EQ(m.get_head, 3u);
    EXPECT_EQ(m.ready_head, ordering ? 3u : 4u) << "one CST WQE after the gets";
    EXPECT_EQ(m.get_tail, ordering ? 0u : 3u);
    EXPECT_EQ(m.cons_idx, m.ready_head);
    EXPECT_EQ(0, std::memcmp((*w)->at(0, dst), (*w)->at(1, src), 3072));
  }
}


// Without write ordering a fetch's result may land after its CQE: NVSHMEM 3.4.5 ends every
// fetching atomic and g with a CST (a fenced DUMP) that carries the CQE, in the same
// reservation, the NOP after a two-WQEBB atomic becoming that CST. With ordering, none.
TEST(IbgdaProtocol, FetchesEndInACstWithoutWriteOrdering) {
  for (bool ordering : {false, true}) {
    WorldConfig c = world_cfg(2, 5, 4);
    c.opt.may_skip_cst = ordering;
    c.response_delay_max = 20;
    auto w = ModelWorld::create(c);
    ASSERT_TRUE(w.is_ok());
    const uint64_t word = *(*w)->malloc(64);
    (*w)->at(1, word)[0] = 40;
    DevState* st = &(*w)->state(0);
    uint64_t old = 0, swapped = 0, got = 0;
    Scheduler s(sched(4));
    s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
      EXPECT_EQ(atomic_fetch_add<uint64_t>(ctx, *st, word, 2, 1, &old), OpResult::kOk);   // FA: 1 WQEBB
      EXPECT_EQ(atomic_swap<uint64_t>(ctx, *st, word, 7, 1, &swapped), OpResult::kOk);    // masked CS: 2 WQEBBs
      EXPECT_EQ(g<uint64_t>(ctx, *st, word, 1, &got), OpResult::kOk);
    });
    (*w)->attach(s);
    ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
    EXPECT_EQ(old, 40u);
    EXPECT_EQ(swapped, 42u);
    EXPECT_EQ(got, 7u);
    const DevQp& qp = st->qps[1];
    // FA [+ CST], masked CS + (NOP | CST), READ [+ CST]
    EXPECT_EQ(qp.mv->ready_head, ordering ? 1u + 3u + 1u : 2u + 3u + 2u);
    auto opcode = [&](uint64_t i) { return mlx5::WqeOpcode(reinterpret_cast<const uint8_t*>(wqe_at(qp, i))[3]); };
    auto fm = [&](uint64_t i) { return reinterpret_cast<const uint8_t*>(wqe_at(qp, i))[11]; };
    if (ordering) {
      EXPECT_EQ(opcode(3), mlx5::WqeOpcode::kNop);
      continue;
    }
    for (uint64_t i : {1u, 4u, 6u}) {
      EXPECT_EQ(opcode(i), mlx5::WqeOpcode::kDump) << "WQEBB " << i;
      EXPECT_EQ(fm(i), mlx5::kCtrlCqUpdate | mlx5::kCtrlFmFence) << "WQEBB " << i;
    }
    for (uint64_t i : {0u, 2u, 5u}) EXPECT_EQ(fm(i), 0) << "the fetch itself asks for no CQE: WQEBB " << i;
  }
}

TEST(IbgdaWorld, ReachMapFollowsQpState) {
  auto w = ModelWorld::create(world_cfg(3, 4, 4));
  ASSERT_TRUE(w.is_ok());
  auto m = (*w)->reach_map();
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->name(m->rma(0, 2)), "ibgda");
  EXPECT_EQ(m->amo(2, 1), 0);
  // A QP to PE 2 in error: PE 0 can no longer reach PE 2 through IBGDA.
  ASSERT_TRUE((*w)->nic(0).force_qp_error((*w)->state(0).qps[2].qpn).is_ok());
  m = (*w)->reach_map();
  EXPECT_EQ(m->rma(0, 2), -1);
  EXPECT_EQ(m->rma(0, 1), 0);
}


TEST(IbgdaProtocol, ErrorCqeIsReportedNotSpunOn) {
  auto w = ModelWorld::create(world_cfg(2, 4, 4));
  ASSERT_TRUE(w.is_ok());
  const uint64_t buf = *(*w)->malloc(4096);
  DevState* st = &(*w)->state(0);
  st->keys.rkeys_const[0 * 2 + 1].key ^= 0x80;  // a stale rkey for PE 1's first chunk
  OpResult put = OpResult::kOk, q = OpResult::kOk;
  Scheduler s(sched(2));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    put = put_nbi(ctx, *st, buf, buf, 64, 1);
    q = quiet_all(ctx, *st);
  });
  (*w)->attach(s);
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  EXPECT_EQ(put, OpResult::kOk);  // submitting succeeds; the NIC rejects the WQE
  EXPECT_EQ(q, OpResult::kCqError);
  EXPECT_NE((*w)->first_error().find("REMOTE_ACCESS_ERR"), std::string::npos) << (*w)->first_error();
}

// PE 0 of a two-PE world (depth 16, batch 4), its QP to PE 1 and a 4 KiB heap buffer, for
// tests that drive the send path by hand.
class IbgdaOneQp : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = ModelWorld::create(world_cfg(2, 4, 4));
    ASSERT_TRUE(r.is_ok());
    world_ = std::move(*r);
    w = world_.get();
    buf = *w->malloc(4096);
    st = &w->state(0);
    qp = st->qps[1];
  }
  std::unique_ptr<ModelWorld> world_;
  ModelWorld* w = nullptr;
  uint64_t buf = 0;
  DevState* st = nullptr;
  DevQp qp;  // a copy, as the send path's callers take one
};

// The doorbell value is built from prod_idx and the QPN, as NVSHMEM does, not read back from
// the ring: the last WQEBB before prod_idx need not hold a control segment (the second half
// of a two-WQEBB WQE), and a doorbell whose QPN field is garbage is dropped by the NIC.
TEST_F(IbgdaOneQp, DoorbellValueDoesNotDependOnTheRing) {
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    uint64_t base;
    ASSERT_EQ(reserve(ctx, *st, qp, 2, &base), OpResult::kOk);
    // One RDMA WRITE of three 16-byte pieces: 5 octowords, two WQEBBs; the second begins
    // with a data segment.
    const heap::Piece p = heap::first_piece(st->keys, st->heap_bases[0], st->heap_bases[1], buf, buf, 48, 1, 0);
    alignas(16) uint8_t w[128] = {};
    mlx5::set_ctrl_seg(reinterpret_cast<mlx5::WqeCtrlSeg*>(w), uint16_t(base), mlx5::WqeOpcode::kRdmaWrite, 0, qp.qpn,
                       mlx5::kCtrlCqUpdate, 5);
    mlx5::set_raddr_seg(reinterpret_cast<mlx5::WqeRaddrSeg*>(w + 16), p.raddr, p.rkey);
    for (int k = 0; k < 3; ++k) mlx5::set_data_seg(reinterpret_cast<mlx5::WqeDataSeg*>(w + 32 + 16 * k), 16, p.lkey, p.laddr + 16 * k);
    ctx.write_bytes(wqe_at(qp, base), w, 64);
    ctx.write_bytes(wqe_at(qp, base + 1), w + 64, 64);
    ASSERT_EQ(submit(ctx, *st, qp, base, 2), OpResult::kOk);
    EXPECT_EQ(poll_cq(ctx, *st, qp, base + 1), OpResult::kOk);  // the CQE names the WQE's first WQEBB
  });
  w->attach(s);
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  EXPECT_EQ(w->nic(0).bad_doorbells(), 0u);
  EXPECT_EQ(w->nic(0).qp(qp.qpn)->stats.doorbells, 1u);
  const uint64_t v = mlx5::doorbell_value(1, qp.qpn);
  EXPECT_EQ(mlx5::bswap32(uint32_t(v >> 32)) >> 8, qp.qpn);
}

// A ringer posts everything submitted by then, not only its own WQEs: a ringer queued behind
// the lock finds its WQEs posted and leaves without ringing (what the shared-QP rows of
// gpu/run-post-bench rest on).
TEST_F(IbgdaOneQp, ARingerPostsEverythingSubmittedAndAQueuedRingerLeaves) {
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    uint64_t b0, b1;
    ASSERT_EQ(reserve(ctx, *st, qp, 1, &b0), OpResult::kOk);
    ASSERT_EQ(reserve(ctx, *st, qp, 1, &b1), OpResult::kOk);
    write_rma_wqes(ctx, *st, qp, mlx5::WqeOpcode::kRdmaWrite, b0, buf, buf, 8, 1);
    write_rma_wqes(ctx, *st, qp, mlx5::WqeOpcode::kRdmaWrite, b1, buf + 8, buf + 8, 8, 1);
    // Both submitted, neither rung: the first submitter rings for its own WQE only.
    ctx.fence(exec::gpu_scope);
    ctx.store(exec::gpu_scope, exec::relaxed, &qp.mv->ready_head, b1 + 1);
    ASSERT_EQ(post_send(ctx, *st, qp, b0 + 1, b0), OpResult::kOk);
    EXPECT_EQ(ctx.load(exec::gpu_scope, exec::relaxed, &qp.mv->prod_idx), b1 + 1);
    EXPECT_EQ(poll_cq(ctx, *st, qp, b1 + 1), OpResult::kOk);
    // Another thread holds the lock, having posted past b1: the second ringer leaves.
    ctx.store(exec::gpu_scope, exec::relaxed, &qp.mv->post_send_lock, uint64_t{1});
    EXPECT_EQ(post_send(ctx, *st, qp, b1 + 1, b1), OpResult::kOk);
    ctx.store(exec::gpu_scope, exec::relaxed, &qp.mv->post_send_lock, uint64_t{0});
  });
  w->attach(s);
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  EXPECT_EQ(w->nic(0).qp(qp.qpn)->stats.doorbells, 1u);
}

// Two PEs, rings of 16 (windows of one WQEBB), a backup QP per QP and health words.
Result<std::unique_ptr<ModelWorld>> failover_world() {
  WorldConfig c = world_cfg(2, 4, 4);
  c.failover = true;
  return ModelWorld::create(c);
}

// With failover, a submit that gives up on a failed ring after it counted its WQEs for
// publishing (core/sync/publish_windows.h) may still see them published and rung by another
// submitter's claim: it reports kMaybePosted, which failover settles by the recovery's
// verdict, not kQpFailed, which it issues again at once (an atomic applied twice).
TEST(IbgdaProtocol, ASubmitGivenUpAfterItsCountMayBePosted) {
  auto w = failover_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  const DevQp qp = st.qps[1];
  const uint64_t buf = *(*w)->malloc(4096);
  std::optional<OpResult> got;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    uint64_t b0, b1;
    ASSERT_TRUE(enter(ctx, qp));  // a user: the recovery waits for it to leave
    ASSERT_EQ(reserve(ctx, st, qp, 1, &b0), OpResult::kOk);  // never written: its caller gave up
    ASSERT_EQ(reserve(ctx, st, qp, 1, &b1), OpResult::kOk);
    write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, b1, buf, buf, 8, 1);
    ctx.store(exec::gpu_scope, exec::relaxed, &qp.hp->state, uint64_t(Health::kFailed));
    got = submit(ctx, st, qp, b1, 1);
    leave(ctx, qp);
  });
  (*w)->attach(s);
  (void)s.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == OpResult::kMaybePosted) << "result " << int(*got) << " (kQpFailed: issued again at once)";
}

// Failover takes a kMaybePosted add into the thread's log (settled at quiet by the recovery's
// verdict) instead of issuing it again on the backup at once: warp 0 reserves a WQE it never
// writes and marks the QP FAILED once warp 1's add is counted behind it.
TEST(IbgdaProtocol, FailoverLogsAMaybePostedAddInsteadOfIssuingItAgain) {
  auto w = failover_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  const uint64_t buf = *(*w)->malloc(4096);
  std::optional<OpResult> got;
  LogEntry logged;
  uint32_t log_n = 0;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 2, 1}, [&](SimCtx& ctx) {
    const uint32_t slot = select_slot(ctx, st, 1, QpSelector{QpSelector::kByWarp, 0});
    const DevQp& qp = st.qps[slot];
    if (ctx.warp() == 0) {
      uint64_t b0;
      ASSERT_EQ(reserve(ctx, st, qp, 1, &b0), OpResult::kOk);
      while (ctx.load(exec::gpu_scope, exec::relaxed, windows(qp).at(b0 + 1)) == 0)
        if (!ctx.spin("test: the add counted", windows(qp).at(b0 + 1), 0)) return;
      ctx.store(exec::gpu_scope, exec::relaxed, &qp.hp->state, uint64_t(Health::kFailed));
      return;
    }
    while (ctx.load(exec::gpu_scope, exec::relaxed, &qp.mv->resv_head) == 0)
      if (!ctx.spin("test: warp 0 reserved", &qp.mv->resv_head, 0)) return;
    LogEntry e;
    e.kind = LogEntry::kAmo, e.slot = slot, e.pe = 1, e.a = buf, e.amo = Amo{mlx5::WqeOpcode::kAtomicMaskedFa, 8, 1};
    got = nbi_failover(ctx, st, e);
    log_n = my_log(ctx, st).n;
    if (log_n != 0) logged = my_log(ctx, st).e[0];
  });
  (*w)->attach(s);
  (void)s.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == OpResult::kOk) << "result " << int(*got);
  ASSERT_EQ(log_n, 1u);
  EXPECT_FALSE(logged.backup) << "issued again on the backup while the main QP's claim could still ring it";
  EXPECT_EQ(logged.begin, 1u);
}

// Failover does not write again a put the recovery's verdict says landed: its peer may have
// seen a signal behind it and reused the buffer. The put lands on PE 1, the main QP is marked
// FAILED before the quiet polls it, PE 1's buffer takes a new value (the peer's reuse), and
// the quiet waits for the recovery's verdict (applied) and must leave that value be.
TEST(IbgdaProtocol, FailoverDoesNotWriteAgainAPutTheVerdictSaysLanded) {
  auto w = failover_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  const uint64_t buf = *(*w)->malloc(4096);
  auto* src = reinterpret_cast<uint64_t*>((*w)->at(0, buf));
  auto* dst = reinterpret_cast<uint64_t*>((*w)->at(1, buf + 64));
  *src = 0x1111, *dst = 0;
  std::optional<OpResult> got;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    const uint32_t slot = select_slot(ctx, st, 1, QpSelector{QpSelector::kByWarp, 0});
    ASSERT_EQ(put_nbi(ctx, st, buf + 64, buf, 8, 1), OpResult::kOk);
    while (ctx.load(exec::system_scope, exec::acquire, dst) != 0x1111)
      if (!ctx.spin("test: the put landed", dst, 0)) return;
    ctx.store(exec::gpu_scope, exec::relaxed, &st.qps[slot].hp->state, uint64_t(Health::kFailed));
    ctx.store(exec::system_scope, exec::relaxed, dst, uint64_t{0x2222});  // the peer reuses its buffer
    got = quiet_all(ctx, st);
  });
  (*w)->attach(s);
  (void)s.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == OpResult::kOk) << "result " << int(*got);
  EXPECT_EQ(*dst, 0x2222u) << "the put was written again over its peer's new value";
}

// A put in parts (more pieces than one reservation takes) whose first part's submit gave up
// on a failed ring after counting it (kMaybePosted): what a claim may still publish of it is
// unknown, and the later parts were never posted. Failover must replay the put whole once
// the recovery has drained the QP, not settle it by the verdict on the span it logged
// (plant.partial_landed: taken for landed). Warp 0 holds an unwritten WQE ahead of warp 1's
// first part, marks the QP FAILED once that part is counted behind it, and once warp 1's put
// has returned writes and submits its own WQE.
void put_in_parts_after_a_given_up_submit(bool plant) {
  auto w = failover_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  st.opt.plant.partial_landed = plant;
  constexpr uint64_t kBytes = 640 << 10;  // 64 KiB chunks: 10 or 11 pieces, 8 a part
  const uint64_t src = *(*w)->malloc(kBytes), dst = *(*w)->malloc(kBytes), flag = *(*w)->malloc(64);
  for (uint64_t i = 0; i < kBytes; ++i) (*w)->at(0, src)[i] = uint8_t(i * 7 + 1);
  std::optional<OpResult> put, quieted;
  std::optional<LogEntry> logged;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 2, 1}, [&](SimCtx& ctx) {
    const uint32_t slot = select_slot(ctx, st, 1, QpSelector{QpSelector::kByWarp, 0});
    const DevQp& qp = st.qps[slot];
    auto* returned = reinterpret_cast<uint64_t*>((*w)->at(0, flag));
    if (ctx.warp() == 0) {
      uint64_t b0;
      ASSERT_TRUE(enter(ctx, qp));  // a user: the recovery waits for it to leave
      ASSERT_EQ(reserve(ctx, st, qp, 1, &b0), OpResult::kOk);
      const sync::Windows win = windows(qp);
      uint64_t* last = win.at(win.of(b0 + max_transfer_wqes(qp)));  // the first part's last WQE's
      while (ctx.load(exec::gpu_scope, exec::relaxed, last) == 0)
        if (!ctx.spin("test: the first part counted", last, 0)) return;
      ctx.store(exec::gpu_scope, exec::relaxed, &qp.hp->state, uint64_t(Health::kFailed));
      while (ctx.load(exec::gpu_scope, exec::acquire, returned) == 0)
        if (!ctx.spin("test: the put returned", returned, 0)) return;
      write_rma_wqes(ctx, st, qp, mlx5::WqeOpcode::kRdmaWrite, b0, flag + 8, flag + 8, 8, 1);
      EXPECT_EQ(submit(ctx, st, qp, b0, 1), OpResult::kOk);
      leave(ctx, qp);
      return;
    }
    while (ctx.load(exec::gpu_scope, exec::relaxed, &qp.mv->resv_head) == 0)
      if (!ctx.spin("test: warp 0 reserved", &qp.mv->resv_head, 0)) return;
    put = put_nbi(ctx, st, dst, src, kBytes, 1);
    if (my_log(ctx, st).n == 1) logged = my_log(ctx, st).e[0];
    ctx.store(exec::gpu_scope, exec::release, returned, uint64_t{1});
    quieted = quiet_all(ctx, st);
  });
  (*w)->attach(s);
  (void)s.run();
  ASSERT_TRUE(put.has_value() && quieted.has_value());
  EXPECT_TRUE(*put == OpResult::kOk) << "put " << int(*put);
  ASSERT_TRUE(logged.has_value());
  EXPECT_TRUE(logged->partial && !logged->backup) << "partial " << logged->partial << " backup " << logged->backup;
  EXPECT_TRUE(*quieted == OpResult::kOk) << "quiet " << int(*quieted);
  EXPECT_GE((*w)->recovery_stats().recovered, 1u);
  const uint8_t* got = (*w)->at(1, dst);
  uint64_t first_bad = kBytes;
  for (uint64_t i = 0; i < kBytes && first_bad == kBytes; ++i)
    if (got[i] != uint8_t(i * 7 + 1)) first_bad = i;
  EXPECT_EQ(first_bad, kBytes) << "the put's bytes from " << first_bad << " on never landed";
}

TEST(IbgdaProtocol, FailoverReplaysWholeAPutInPartsWhoseFirstPartMayHavePosted) { put_in_parts_after_a_given_up_submit(false); }

TEST(IbgdaProtocol, FailoverTestFindsAPutInPartsTakenForLanded) {
  EXPECT_NONFATAL_FAILURE(put_in_parts_after_a_given_up_submit(true), "never landed");
}

// A put to a dead peer fails for good, and must not hold up the thread's work to healthy
// peers: a quiet settles every other entry, and an operation issued while the log is full
// goes out once that quiet has made room; the caller's next quiet reports the failure, once.
// PE 0's thread puts to PE 2, whose node is dead, then kLogEntries + 4 puts to PE 1 (the log
// fills with the dead entry at its head), then quiets twice.
Result<std::unique_ptr<ModelWorld>> pe2_dead_world() {
  WorldConfig c = world_cfg(3, 4, 4);
  c.failover = true;
  auto w = ModelWorld::create(c);
  if (w.is_ok()) (*w)->inject({{WorldFault::kNodeDeath, 2, 0, 0}});
  return w;
}

TEST(IbgdaProtocol, FailoverKeepsGoingPastAPutToADeadPeer) {
  auto w = pe2_dead_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  constexpr uint32_t kPuts = kLogEntries + 4;
  const uint64_t buf = *(*w)->malloc(4096);
  auto* src = reinterpret_cast<uint64_t*>((*w)->at(0, buf));
  for (uint32_t i = 0; i <= kPuts; ++i) src[i] = 0x5000 + i;
  std::optional<OpResult> dead, puts[kPuts], q1, q2;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    dead = put_nbi(ctx, st, buf, buf, 8, 2);
    for (uint32_t i = 0; i < kPuts; ++i) puts[i] = put_nbi(ctx, st, buf + 8 * (i + 1), buf + 8 * (i + 1), 8, 1);
    q1 = quiet_all(ctx, st);
    q2 = quiet_all(ctx, st);
  });
  (*w)->attach(s);
  (void)s.run();
  ASSERT_TRUE(dead.has_value() && q1.has_value() && q2.has_value());
  EXPECT_TRUE(*dead == OpResult::kOk) << int(*dead);  // posted: its failure shows at quiet
  const auto* got = reinterpret_cast<const uint64_t*>((*w)->at(1, buf));
  for (uint32_t i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(puts[i].has_value()) << i;
    EXPECT_TRUE(*puts[i] == OpResult::kOk) << "put " << i << " to the healthy peer: " << int(*puts[i]);
    EXPECT_EQ(got[i + 1], 0x5000u + i + 1) << "put " << i << " to the healthy peer never landed";
  }
  EXPECT_TRUE(*q1 == OpResult::kCqError) << int(*q1);
  EXPECT_TRUE(*q2 == OpResult::kOk) << "the dead peer's failure reported twice: " << int(*q2);
}

// Put-with-signal to a healthy peer whose signal had to wait (its data's QP failed between
// them) is sent by the call, whatever became of this thread's earlier put to a dead peer:
// the call fails only with its own slot.
TEST(IbgdaProtocol, FailoverSendsAWaitingSignalPastAFailureToAnotherPeer) {
  auto w = pe2_dead_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  const uint64_t buf = *(*w)->malloc(4096);
  *reinterpret_cast<uint64_t*>((*w)->at(0, buf + 64)) = 0xda7a;
  const auto* sig = reinterpret_cast<const uint64_t*>((*w)->at(1, buf + 128));
  std::optional<OpResult> data, signal, q;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    ASSERT_EQ(put_nbi(ctx, st, buf, buf, 8, 2), OpResult::kOk);
    data = put_nbi(ctx, st, buf + 64, buf + 64, 8, 1);
    const uint32_t slot = select_slot(ctx, st, 1, QpSelector{QpSelector::kByWarp, 0});
    ctx.store(exec::gpu_scope, exec::relaxed, &st.qps[slot].hp->state, uint64_t(Health::kFailed));
    signal = signal_op(ctx, st, buf + 128, 1, SignalOp::kSet, 1, true);  // put-with-signal's signal
    while (signal == OpResult::kOk && ctx.load(exec::system_scope, exec::acquire, sig) != 1)
      if (!ctx.spin("test: the signal landed", sig, 0)) return;
    q = quiet_all(ctx, st);
  });
  (*w)->attach(s);
  const RunResult r = s.run();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  ASSERT_TRUE(data.has_value() && signal.has_value() && q.has_value());
  EXPECT_TRUE(*signal == OpResult::kOk) << "the signal failed with another peer's put: " << int(*signal);
  EXPECT_EQ(*sig, 1u);
  EXPECT_EQ(*reinterpret_cast<const uint64_t*>((*w)->at(1, buf + 64)), 0xda7au);
  EXPECT_TRUE(*q == OpResult::kCqError) << int(*q);  // the dead peer's put
}

// Put-with-signal to the dead peer whose signal had to wait: its data failed for good, so the
// signal fails with it and is never sent, and the call ends (it does not wait for the data
// forever). PE 0's thread puts to PE 2, marks that QP FAILED so the signal would go on the
// backup, then sends the signal.
TEST(IbgdaProtocol, FailoverFailsAWaitingSignalWhoseDataFailed) {
  auto w = pe2_dead_world();
  ASSERT_TRUE(w.is_ok());
  DevState& st = (*w)->state(0);
  const uint64_t buf = *(*w)->malloc(4096);
  std::optional<OpResult> signal, q;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    ASSERT_EQ(put_nbi(ctx, st, buf, buf, 8, 2), OpResult::kOk);
    const uint32_t slot = select_slot(ctx, st, 2, QpSelector{QpSelector::kByWarp, 0});
    ctx.store(exec::gpu_scope, exec::relaxed, &st.qps[slot].hp->state, uint64_t(Health::kFailed));
    signal = signal_op(ctx, st, buf + 128, 1, SignalOp::kSet, 2, true);
    q = quiet_all(ctx, st);
  });
  (*w)->attach(s);
  const RunResult r = s.run();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  ASSERT_TRUE(signal.has_value() && q.has_value());
  EXPECT_TRUE(*signal == OpResult::kCqError) << int(*signal);
  EXPECT_TRUE(*q == OpResult::kOk) << "reported by the signal's call already: " << int(*q);
  EXPECT_EQ(*reinterpret_cast<const uint64_t*>((*w)->at(2, buf + 128)), 0u);
}

// A poll for an index that was never posted must not complete, even where the CQE's 16-bit
// wqe_counter matches it (2^16 past a completed WQE): poll_cq waits for the producer first.
TEST_F(IbgdaOneQp, PollForAnIndexNeverPostedDoesNotComplete) {
  OpResult done = OpResult::kTimeout;
  std::optional<OpResult> never;  // stays empty if the model ends the run inside the wait
  uint64_t base = 0, cons_before = 0;
  Scheduler s(sched(1));
  s.launch("pe0", {1, 1, 1}, [&](SimCtx& ctx) {
    uint32_t n = 0;
    ASSERT_EQ(post_rma(ctx, *st, qp, mlx5::WqeOpcode::kRdmaWrite, buf, buf, 16, 1, &base, &n), OpResult::kOk);
    ASSERT_EQ(n, 1u);
    done = poll_cq(ctx, *st, qp, base + 1);
    cons_before = ctx.load(exec::gpu_scope, exec::relaxed, &qp.mv->cons_idx);
    never = poll_cq(ctx, *st, qp, base + 1 + 0x10000);  // same low 16 bits as the completed one
  });
  w->attach(s);
  const RunResult r = s.run();
  EXPECT_EQ(done, OpResult::kOk);
  EXPECT_EQ(cons_before, base + 1);
  // Nothing else runs, so the model calls the endless wait a hang and names it.
  EXPECT_EQ(r.outcome, Outcome::kHang);
  EXPECT_NE(r.report.find("poll_cq: prod_idx >= idx"), std::string::npos) << r.report;
  EXPECT_TRUE(!never || *never == OpResult::kTimeout);
  EXPECT_EQ(qp.mv->cons_idx, base + 1);
}

}  // namespace
}  // namespace doorbell::ibgda
