// Failover (failover.h, recovery.cc): IBGDA programs under faults — a QP forced to ERR, the
// link down for longer or shorter than the retry timeout, a stalled engine, lost or late
// doorbells, late CQEs — end with memory equal to the fault-free reference: nothing lost,
// no atomic applied twice. Directed cases first, then a property over random programs and
// fault schedules, and the same property with a planted replay bug it must find.
#include <iostream>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sim/ibgda/program.h"
#include "tests/ibgda/program_gen.h"
#include "tests/sim_opts.h"

namespace doorbell::ibgda {
namespace {

Program base(uint32_t npes, uint32_t warps, uint32_t lanes) {
  Program p;
  p.npes = npes, p.warps = warps, p.lanes = lanes;
  p.stack.log_qp_depth = 4, p.stack.num_requests_in_batch = 4;
  p.stack.failover = true;
  p.stack.ack_timeout = 8;  // 1 ms per try: the retry timeout is 7 ms
  return p;
}

// Every thread of PE 0 and PE 1: puts, gets, fetch-adds and adds to the other PE.
void mixed_ops(Program& p, uint32_t per_thread) {
  for (uint32_t pe = 0; pe < 2; ++pe)
    for (uint32_t w = 0; w < p.warps; ++w)
      for (uint32_t l = 0; l < p.lanes; ++l)
        for (uint32_t i = 0; i < per_thread; ++i) {
          ProgramOp o;
          o.pe = pe, o.warp = w, o.lane = l, o.target = 1 - pe;
          o.kind = ProgramOpKind(i % 4);
          o.bytes = 64 + 200 * i, o.src = 8 * i, o.counter = i % kProgramCounters, o.add = 1 + i;
          p.ops.push_back(o);
        }
}

std::string run(const Program& p, uint64_t seed, RecoveryStats* st) {
  return run_program(p, testing::sim_opts(seed), st);
}

TEST(Failover, QpErrorMidRunIsRecoveredWithNothingLostOrRepeated) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Program p = base(2, 2, 2);
    mixed_ops(p, 8);
    p.faults.push_back({WorldFault::kQpError, 0, 1, 2000});  // PE 0's QP to PE 1, after 20 NIC actions
    RecoveryStats st;
    const std::string why = run(p, seed, &st);
    ASSERT_EQ(why, "") << "seed " << seed;
    EXPECT_GE(st.recovered, 1u) << "seed " << seed;
  }
}

// A full ring: a thread waiting in reserve for room sees the error CQE itself (nothing of its
// call was posted, so it must be issued again on the backup, not fail).
TEST(Failover, QpErrorWhileWaitingForRingRoomIsRetriedOnTheBackup) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Program p = base(2, 2, 4);
    p.stack.log_qp_depth = 3;
    mixed_ops(p, 12);
    p.faults.push_back({WorldFault::kQpError, 0, 1, 100.0 * double(seed % 20 + 5)});
    ASSERT_EQ(run(p, seed, nullptr), "") << "seed " << seed;
  }
}

TEST(Failover, WithoutFailoverTheSameErrorFailsTheRun) {
  Program p = base(2, 2, 2);
  p.stack.failover = false;
  mixed_ops(p, 8);
  p.faults.push_back({WorldFault::kQpError, 0, 1, 2000});
  EXPECT_NE(run(p, 1, nullptr), "");
}

// The same full ring without failover: the run fails with the error, and no thread hangs. A
// thread whose poll met the error gave up its reservation unwritten, so what the others wait
// for (ring room, their turn to publish, their WQEs posted) never comes; they see the error
// in the CQ (ring_failed) instead. With that check planted away, seed 1 already hangs.
TEST(Failover, WithoutFailoverAFailedQpFailsTheRunInsteadOfHangingIt) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Program p = base(2, 2, 4);
    p.stack.failover = false;
    p.stack.log_qp_depth = 3;
    mixed_ops(p, 12);
    p.faults.push_back({WorldFault::kQpError, 0, 1, 100.0 * double(seed % 20 + 5)});
    const std::string why = run(p, seed, nullptr);
    EXPECT_EQ(why.rfind("error: ", 0), 0u) << "seed " << seed << ": " << why.substr(0, 2000);
  }
}

TEST(Failover, LinkDownLongerThanTheRetryTimeoutFailsOverAndRecovers) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Program p = base(2, 1, 2);
    mixed_ops(p, 8);
    p.faults.push_back({WorldFault::kLinkDown, 1, 0, 1000, 20e6});  // 20 ms > 7 ms of retries
    RecoveryStats st;
    ASSERT_EQ(run(p, seed, &st), "") << "seed " << seed;
    EXPECT_GE(st.failed, 1u);
  }
}

TEST(Failover, LinkDownShorterThanTheRetryTimeoutNeedsNoFailover) {
  Program p = base(2, 1, 2);
  mixed_ops(p, 8);
  p.faults.push_back({WorldFault::kLinkDown, 1, 0, 1000, 2e6});  // 2 ms < 7 ms
  RecoveryStats st;
  ASSERT_EQ(run(p, 3, &st), "") << st.failed << " " << st.suspected << " " << st.recovered;
  EXPECT_EQ(st.failed, 0u);
}

// The link is down before the first WQE is issued: the QP's position (QUERY_QP) stays put
// behind posted work for the whole outage, as a lost doorbell's would. The watchdog, which sees
// only QUERY_QP, waits at least the QP's retransmission window before acting, so the QP rides
// the outage out on its own timers. (With the watchdog's window planted back to watchdog_ns
// alone, the timed run fails the pair over.)
TEST(Failover, WqesWaitingOutAnOutageAreNotTakenForAStall) {
  for (const gpu_sim::Policy pol : {gpu_sim::Policy::kTimed, gpu_sim::Policy::kRandom, gpu_sim::Policy::kPct})
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      Program p = base(2, 1, 2);
      mixed_ops(p, 2);
      p.faults.push_back({WorldFault::kLinkDown, 1, 0, 0, 2e6});  // 2 ms < 7 ms, from the start
      RecoveryStats st;
      ASSERT_EQ(run_program(p, testing::sim_opts(seed, pol), &st), "") << "seed " << seed;
      EXPECT_EQ(st.suspected + st.failed, 0u) << "policy " << int(pol) << " seed " << seed;
    }
}

// The only doorbell of a put is lost: without a watchdog that is a hang (the library
// scenario dropped-doorbell-hang); the host sees posted work the NIC never took and rings
// again for the GPU.
TEST(Failover, LostDoorbellIsRungAgainByTheWatchdog) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Program p = base(2, 1, 1);
    ProgramOp o;
    o.pe = 0, o.target = 1, o.kind = ProgramOpKind::kPut, o.bytes = 256;
    p.ops.push_back(o);
    p.faults.push_back({WorldFault::kLostDoorbells, 0, 0, 0, 0, 1});
    RecoveryStats st;
    ASSERT_EQ(run(p, seed, &st), "") << "seed " << seed;
    EXPECT_EQ(st.rerung, 1u);
    EXPECT_EQ(st.failed, 0u);
  }
}

// ---- property ----

struct Case {
  Program p;
  uint64_t seed = 1;
};

void showValue(const Case& c, std::ostream& os) {
  const Program& p = c.p;
  os << "npes=" << p.npes << " warps=" << p.warps << " lanes=" << p.lanes << " depth=" << (1u << p.stack.log_qp_depth)
     << " nics=" << p.stack.nics_per_pe << " delay=" << p.stack.response_delay << " seed=" << c.seed << " start_index=" << p.stack.start_index << "\n";
  for (const WorldFault& f : p.faults) os << "  fault " << describe(f) << "\n";
  for (const ProgramOp& o : p.ops)
    os << "  pe" << o.pe << "/w" << o.warp << "/l" << o.lane << " kind=" << int(o.kind) << " -> pe" << o.target
       << " bytes=" << o.bytes << "\n";
}

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case c;
    Program& p = c.p;
    p = base(*rc::gen::inRange(2u, 4u), *rc::gen::inRange(1u, 3u), *rc::gen::inRange(1u, 3u));
    p.stack.log_qp_depth = *rc::gen::inRange(3u, 5u);  // small rings: waits for room meet the failure too
    p.stack.num_requests_in_batch = 1u << *rc::gen::inRange(0u, 4u);
    p.stack.response_delay = *rc::gen::element(0u, 0u, 10u);
    p.stack.nics_per_pe = *rc::gen::element(1u, 1u, 2u);  // a node fault hits each NIC; a QP error one QP
    c.seed = p.seed = *rc::gen::arbitrary<uint64_t>();
    p.stack.start_index = gen_start_index();  // the verdict's 24-bit PSN window, away from 0
    // Every family: the logs replay puts, gets and p, and non-fetching AMOs (signals among
    // them) that never reached the responder; a fetching AMO is applied once or reported
    // lost; a g is read again (docs/failover.md).
    gen_ops(p, *rc::gen::inRange(8u, 64u), kAllFamilies);
    const uint32_t nf = *rc::gen::inRange(1u, 4u);
    for (uint32_t i = 0; i < nf; ++i) {
      WorldFault f;
      f.kind = WorldFault::Kind(*rc::gen::inRange(0, 6));
      f.pe = *rc::gen::inRange(0u, p.npes);
      f.target = *rc::gen::inRange(0u, p.npes);
      f.at_ns = 100.0 * *rc::gen::inRange(0, 80);  // within the first 80 NIC actions: while work is in flight
      f.for_ns = *rc::gen::element(5e5, 2e6, 2e7);
      // Lost doorbells: a few (a watchdog's ring can be lost too; a NIC losing every one is broken).
      f.count = f.kind == WorldFault::kLostDoorbells ? *rc::gen::inRange(1u, 4u) : *rc::gen::inRange(1u, 30u);
      p.faults.push_back(f);
    }
    return c;
  });
}

RC_GTEST_PROP(FailoverProperty, MemoryEqualsTheFaultFreeReferenceUnderRandomFaults, ()) {
  const Case c = *gen_case();
  RecoveryStats st;
  const std::string why = run_program(c.p, testing::sim_opts(c.seed), &st);
  RC_CLASSIFY(st.recovered > 0, "recovered a QP pair");
  RC_CLASSIFY(st.rerung > 0, "rang a stalled QP again");
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

// A stalled NIC flushes nothing, so the recovery of a QP the watchdog failed meanwhile waits
// for the stall's end before it resets the pair. Without that wait each reset came at once,
// the retried fetch-add met the same stall, and after kFailoverAttempts tries it failed
// (the property's case, shrunk: a fetch-add on PE 0's loopback QP behind a 20 ms stall).
TEST(Failover, AStalledNicIsRecoveredOnlyOnceItRunsAgain) {
  Program p = base(2, 1, 1);
  p.stack.log_qp_depth = 3, p.stack.num_requests_in_batch = 1, p.stack.response_delay = 10;
  p.seed = 1312475;
  p.faults.push_back({WorldFault::kStall, 0, 0, 2200, 2e7});
  p.faults.push_back({WorldFault::kLinkDown, 0, 0, 2000, 5e5});
  // (pe, kind: 0 put / 1 get / 2 fetch-add, target, bytes, src, warp scope)
  const struct {
    uint32_t pe, kind, target, bytes, src;
    bool warp;
  } ops[] = {{0, 0, 0, 1, 0, 0},    {1, 2, 0, 1, 0, 0}, {0, 1, 0, 387, 0, 0}, {1, 1, 0, 1, 0, 0},    {0, 2, 0, 1, 0, 0},
             {0, 0, 0, 1, 0, 0},    {1, 0, 0, 1, 0, 0}, {0, 0, 0, 838, 3259, 0}, {0, 1, 0, 1, 0, 1}, {1, 0, 0, 462, 3635, 0},
             {0, 2, 1, 1, 0, 0},    {0, 0, 0, 1, 0, 0}, {1, 0, 0, 1, 0, 0},   {1, 0, 0, 1, 0, 0},    {0, 0, 0, 1, 0, 0},
             {0, 2, 0, 1, 0, 0},    {0, 0, 0, 1, 0, 0}, {0, 2, 0, 1, 0, 0},   {0, 2, 0, 1, 0, 0},    {0, 2, 0, 1601, 0, 0},
             {0, 0, 0, 1, 0, 0},    {0, 2, 0, 1, 0, 0}, {0, 0, 0, 1, 0, 0},   {0, 0, 0, 1, 0, 0},    {0, 2, 0, 1, 0, 0}};
  for (const auto& o : ops) {
    ProgramOp po;
    po.pe = o.pe, po.kind = ProgramOpKind(o.kind), po.target = o.target, po.bytes = o.bytes, po.src = o.src;
    po.scope = o.warp ? ProgramScope::kWarp : ProgramScope::kThread;
    p.ops.push_back(po);
  }
  RecoveryStats st;
  EXPECT_EQ(run(p, 1312475, &st), "");
  EXPECT_GE(st.recovered, 1u);
  // The pair failed mid-stall (~7 ms) and was reset after its end (20 ms): a recovery that
  // spans the rest of the stall, where resets at once took ~10 us each.
  EXPECT_GT(st.max_recovery_ns, 5e6);
}

// Seeds 1..n each pass and recover a pair.
template <class Make>
void expect_recovered(uint64_t n, Make make) {
  for (uint64_t seed = 1; seed <= n; ++seed) {
    RecoveryStats st;
    ASSERT_EQ(run(make(seed), seed, &st), "") << "seed " << seed;
    EXPECT_GE(st.recovered, 1u) << "seed " << seed;
  }
}

// Whether some seed of 1..n fails with `plant` switched on (the first one's reason printed).
template <class Make>
bool plant_found(uint64_t n, Make make, bool Plants::*plant) {
  for (uint64_t seed = 1; seed <= n; ++seed) {
    Program p = make(seed);
    p.stack.plant.*plant = true;
    if (const std::string why = run(p, seed, nullptr); !why.empty())
      return std::cout << "seed " << seed << ": " << why.substr(0, why.find('\n')) << "\n", true;
  }
  return false;
}

// The checker has teeth: replaying adds the recovery says were applied, or dropping the
// replay of puts and gets, is found.
Program mixed_program(uint64_t seed) {
  Program p = base(2, 2, 2);
  mixed_ops(p, 8);
  p.faults.push_back({WorldFault::kQpError, 0, 1, 1000.0 * double(seed % 8 + 1)});
  p.faults.push_back({WorldFault::kQpError, 1, 0, 1500.0 * double(seed % 8 + 1)});
  return p;
}

TEST(FailoverProperty, FindsPlantedReplayBugs) {
  EXPECT_TRUE(plant_found(40, mixed_program, &Plants::replay_applied)) << "replay of applied adds not found";
  EXPECT_TRUE(plant_found(40, mixed_program, &Plants::no_replay)) << "no replay not found";
}

// Every lane of both PEs runs 6 ops to the other PE (`op(i, lane, o)` fills in the rest);
// each main QP fails once, at a time the seed spreads over the run (period `every`).
Program lanes_to_each_other(uint64_t seed, uint32_t every, double at0, double at1, void (*op)(uint32_t, uint32_t, ProgramOp&)) {
  Program p = base(2, 1, 2);
  for (uint32_t pe = 0; pe < 2; ++pe)
    for (uint32_t l = 0; l < p.lanes; ++l)
      for (uint32_t i = 0; i < 6; ++i) {
        ProgramOp o;
        o.pe = pe, o.lane = l, o.target = 1 - pe;
        op(i, l, o);
        p.ops.push_back(o);
      }
  p.faults.push_back({WorldFault::kQpError, 0, 1, at0 * double(seed % every + 1)});
  p.faults.push_back({WorldFault::kQpError, 1, 0, at1 * double(seed % every + 1)});
  return p;
}

// Put-with-signal across a failover: the data went on the main QP, which then failed; the
// signal must not land (on the backup) before the data's replay. Each thread of both PEs
// sends put-with-signals to the other, whose same thread waits for each signal and then
// checks its data. With the signal sent on whichever path is up (planted), some seed shows a
// signal before its data.
Program signal_program(uint64_t seed) {
  return lanes_to_each_other(seed, 12, 300, 450, [](uint32_t i, uint32_t, ProgramOp& o) {
    o.kind = ProgramOpKind::kPutSignal;
    o.bytes = 256 + 512 * i, o.src = 64 * i, o.add = 1 + i, o.signal_add = i % 2 == 1;
  });
}

TEST(Failover, PutWithSignalKeepsItsSignalBehindItsDataAcrossAFailover) { expect_recovered(24, signal_program); }

TEST(FailoverProperty, FindsAPlantedSignalSentAheadOfItsData) {
  EXPECT_TRUE(plant_found(24, signal_program, &Plants::signal_unordered))
      << "a signal sent on the backup ahead of its data's replay was not found";
}

// A put or get of more heap pieces than one reservation takes goes out in parts
// (post_rma_pieces). When the ring fails between parts, the parts posted may still land and
// the rest never will: the transfer is replayed whole once the recovery has drained its QP,
// and a signal behind it waits for that. Here rings of 8 WQEBBs (4 pieces a part) and
// transfers of 12-15 KiB over 4 KiB heap chunks (5-8 pieces: both ends split) make every
// transfer one of 2 parts, beyond what the generated programs move; some failures fall
// between a transfer's parts. Taken for landed (planted), such a transfer loses its tail.
Program parts_program(uint64_t seed) {
  Program p = lanes_to_each_other(seed, 16, 150, 230, [](uint32_t i, uint32_t l, ProgramOp& o) {
    o.kind = i % 3 == 0 ? ProgramOpKind::kPutSignal : i % 3 == 1 ? ProgramOpKind::kPut : ProgramOpKind::kGet;
    o.bytes = 12288 + 512 * i + 8 * l, o.src = 1000 + 40 * i, o.add = 1 + i;  // within kProgramRo
  });
  p.stack.log_qp_depth = 3, p.stack.num_requests_in_batch = 2;
  return p;
}

TEST(Failover, ATransferInPartsIsReplayedWholeAfterItsRingFailedBetweenThem) { expect_recovered(32, parts_program); }

TEST(FailoverProperty, FindsAPlantedTransferInPartsTakenForLanded) {
  EXPECT_TRUE(plant_found(32, parts_program, &Plants::partial_landed)) << "a transfer in parts taken for landed was not found";
}

}  // namespace
}  // namespace doorbell::ibgda
