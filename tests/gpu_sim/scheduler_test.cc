// The deterministic scheduler with the protocols of core/sync: correct programs pass under
// random and PCT schedules; planted bugs are found (a lost update, a missing doorbell
// reported as a hang with the stalled indices); the same seed gives the same trace hash.
#include "hw/gpu_sim/scheduler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "core/sync/publish_order.h"
#include "core/sync/publish_ring.h"
#include "core/sync/ticket_lock.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "tests/seeds.h"

namespace doorbell::gpu_sim {
namespace {

using exec::gpu_scope;
using exec::relaxed;
using testing::sweep_seeds;

SchedOptions opts(uint64_t seed, Policy p = Policy::kRandom) {
  SchedOptions o;
  o.seed = seed;
  o.policy = p;
  return o;
}

// Every lane adds 1 to a counter `iters` times: under the ticket lock, or (planted bug)
// with a bare load + store.
struct CounterRun {
  RunResult r;
  uint64_t counter = 0, want = 0;
};
CounterRun count_up(SchedOptions o, LaunchConfig cfg, int iters, bool locked) {
  Scheduler s(o);
  sync::TicketLock lock;
  CounterRun out;
  s.watch("counter", &out.counter);
  s.launch("count", cfg, [&](SimCtx& ctx) {
    for (int i = 0; i < iters; ++i) {
      uint64_t t = 0;
      if (locked && sync::ticket_acquire(ctx, &lock, &t) != exec::WaitResult::kOk) return;
      const uint64_t v = ctx.load(gpu_scope, relaxed, &out.counter);
      ctx.store(gpu_scope, relaxed, &out.counter, v + 1);
      if (locked) sync::ticket_release(ctx, &lock, t);
    }
  });
  out.r = s.run();
  out.want = uint64_t(cfg.ctas) * cfg.warps_per_cta * cfg.lanes * iters;
  return out;
}

TEST(Scheduler, TicketLockCounterIsExactUnderRandomAndPct) {
  for (Policy p : {Policy::kRandom, Policy::kPct, Policy::kRunToCompletion}) {
    const uint64_t bad = sweep_seeds(1, p == Policy::kRunToCompletion ? 1 : 200, [&](uint64_t seed) {
      CounterRun c = count_up(opts(seed, p), {2, 2, 4}, 3, true);
      EXPECT_EQ(c.r.outcome, Outcome::kCompleted) << c.r.report;
      return c.r.outcome == Outcome::kCompleted && c.counter == c.want;
    });
    EXPECT_EQ(bad, 0u) << policy_name(p);
  }
}

TEST(Scheduler, FindsNonAtomicIncrementRaceWithin1000Seeds) {
  const uint64_t found = sweep_seeds(1, 1000, [&](uint64_t seed) {
    CounterRun c = count_up(opts(seed), {1, 2, 2}, 2, false);
    return c.counter == c.want;  // a lost update fails the seed
  });
  EXPECT_NE(found, 0u) << "no seed in 1..1000 exposed the lost update";
  std::printf("[doorbell] lost update first exposed by seed %llu\n", (unsigned long long)found);
}

// kScripted (the fuzzers' schedule): the script alone decides the interleaving — a script
// that switches warps between a load and its store loses an update; one that never does
// not; the same script gives the same trace.
// Byte ranges are scheduling points at every 64-byte line (SchedOptions::byte_points): a
// reader running beside a 256-byte write_bytes sees it half done in some schedules, the first
// line new and the last old. Without the points a copy is one step and no schedule shows it.
uint64_t torn_reads(bool byte_points) {
  uint64_t torn = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SchedOptions o = opts(seed);
    o.byte_points = byte_points;
    Scheduler s(o);
    alignas(64) uint8_t buf[256] = {};
    bool seen = false;
    s.launch("copy", {2, 1, 1}, [&](SimCtx& ctx) {
      if (ctx.cta() == 0) {
        uint8_t ones[256];
        std::memset(ones, 1, sizeof ones);
        ctx.write_bytes(buf, ones, sizeof ones);
        return;
      }
      for (int i = 0; i < 8; ++i) {
        uint8_t first = 0, last = 0;
        ctx.read_bytes(&first, buf, 1);
        ctx.read_bytes(&last, buf + 255, 1);
        seen |= first == 1 && last == 0;
        (void)ctx.load(gpu_scope, relaxed, reinterpret_cast<const uint64_t*>(buf));  // a scheduling point
      }
    });
    (void)s.run();
    torn += seen;
  }
  return torn;
}
TEST(Scheduler, ExploreInterleavesInsideAByteRange) {
  EXPECT_GT(torn_reads(true), 0u);
  EXPECT_EQ(torn_reads(false), 0u);
}

TEST(Scheduler, ScriptedPolicyFollowsItsScript) {
  auto run = [](std::vector<uint8_t> script) {
    SchedOptions o = opts(1, Policy::kScripted);
    size_t pos = 0;
    o.choose = [script, pos](size_t n) mutable { return pos < script.size() ? script[pos++] % n : 0; };
    return count_up(o, {1, 2, 1}, 1, false);
  };
  const CounterRun serial = run({0, 0, 0, 0, 0, 0});
  EXPECT_EQ(serial.r.outcome, Outcome::kCompleted);
  EXPECT_EQ(serial.counter, serial.want);
  const CounterRun racy = run({0, 1, 0, 1, 0, 0});  // load(w0) load(w1) store store
  EXPECT_EQ(racy.counter, racy.want - 1);
  EXPECT_EQ(run({0, 1, 0, 1, 0, 0}).r.trace_hash, racy.r.trace_hash);
  EXPECT_NE(serial.r.trace_hash, racy.r.trace_hash);
}

// A script given as bytes (SchedOptions::script, queue_fuzz's) is the choice of each byte,
// then round-robin: the same runs as that rule written as `choose`.
TEST(Scheduler, AScriptIsItsBytesThenRoundRobin) {
  const std::vector<uint8_t> racy = {0, 1, 0, 1};  // load(w0) load(w1) store store
  auto by_bytes = [&](const std::vector<uint8_t>& script) {
    SchedOptions o = opts(1, Policy::kScripted);
    o.script = script;
    return count_up(o, {1, 2, 1}, 3, false);
  };
  auto by_choose = [&](const std::vector<uint8_t>& script) {
    SchedOptions o = opts(1, Policy::kScripted);
    o.choose = [script, pos = size_t(0), rr = size_t(0)](size_t n) mutable { return pos < script.size() ? script[pos++] % n : rr++ % n; };
    return count_up(o, {1, 2, 1}, 3, false);
  };
  for (const std::vector<uint8_t>& script : {std::vector<uint8_t>{}, racy, std::vector<uint8_t>{7, 3, 250, 1, 0, 9}}) {
    const CounterRun a = by_bytes(script), b = by_choose(script);
    EXPECT_EQ(a.r.outcome, Outcome::kCompleted);
    EXPECT_EQ(a.r.trace_hash, b.r.trace_hash);
    EXPECT_EQ(a.counter, b.counter);
  }
  EXPECT_LT(by_bytes(racy).counter, by_bytes(racy).want);  // the script's race happened
}

TEST(Scheduler, PctAlsoFindsTheRace) {
  const uint64_t found = sweep_seeds(1, 1000, [&](uint64_t seed) {
    SchedOptions o = opts(seed, Policy::kPct);
    o.pct_steps = 200;
    CounterRun c = count_up(o, {1, 2, 2}, 2, false);
    return c.counter == c.want;
  });
  EXPECT_NE(found, 0u);
}

TEST(Scheduler, SameSeedSameTraceHash) {
  for (Policy p : {Policy::kRandom, Policy::kPct}) {
    const CounterRun a = count_up(opts(42, p), {2, 2, 8}, 2, true);
    const CounterRun b = count_up(opts(42, p), {2, 2, 8}, 2, true);
    const CounterRun c = count_up(opts(43, p), {2, 2, 8}, 2, true);
    EXPECT_EQ(a.r.trace_hash, b.r.trace_hash);
    EXPECT_EQ(a.r.steps, b.r.steps);
    EXPECT_NE(a.r.trace_hash, c.r.trace_hash) << "different seeds should give different interleavings";
  }
}

TEST(Scheduler, WarpCollectivesUnderDivergence) {
  Scheduler s(opts(7));
  uint64_t flag = 0;
  std::vector<uint64_t> got(8), bal(8);
  s.launch("coll", {1, 1, 8}, [&](SimCtx& ctx) {
    uint64_t v = 0;
    if (ctx.lane() == 3) {  // lane 3 alone waits for a flag another warp sets, then broadcasts
      exec::wait_until(ctx, "flag", &flag, [](uint64_t f) { return f != 0; });
      v = ctx.load(gpu_scope, relaxed, &flag) + 100;
    }
    got[ctx.lane()] = ctx.shfl(v, 3);
    bal[ctx.lane()] = ctx.ballot(ctx.lane() % 2 == 1);
    EXPECT_TRUE(ctx.any(ctx.lane() == 5));
    EXPECT_FALSE(ctx.all(ctx.lane() == 5));
    EXPECT_TRUE(ctx.all(true));
  });
  s.launch("setter", {1, 1, 1}, [&](SimCtx& ctx) { ctx.store(gpu_scope, exec::release, &flag, 7); });
  const RunResult r = s.run();
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[size_t(i)], 107u);
    EXPECT_EQ(bal[size_t(i)], 0xaau);
  }
}

// The publish ring: producers in one kernel, a consumer lane in another.
struct RingRun {
  RunResult r;
  uint64_t bad = 0, total = 0;
  sync::PublishRing ring;
};
RingRun run_ring(SchedOptions o, uint64_t batch, uint32_t warps, int iters, bool planted, uint64_t nslots = 16) {
  RingRun out;
  std::vector<uint64_t> slots(nslots);
  sync::PublishRing& ring = out.ring;
  ring.slots = slots.data();
  ring.nslots = nslots;
  ring.batch = batch;
  ring.plant_no_idle_doorbell = planted;
  auto size_of = [](uint32_t warp, int i) { return uint64_t(1 + (warp * 3 + uint32_t(i)) % 3); };
  for (uint32_t w = 0; w < warps; ++w)
    for (int i = 0; i < iters; ++i) out.total += size_of(w, i);
  Scheduler s(o);
  s.watch("resv", &ring.resv);
  s.watch("ready", &ring.ready);
  s.watch("prod", &ring.prod);
  s.watch("cons", &ring.cons);
  s.watch("doorbell", &ring.doorbell);
  s.launch("producer", {1, warps, 4}, [&](SimCtx& ctx) {
    uint64_t end = 0;
    for (int i = 0; i < iters; ++i)
      if (sync::ring_produce(ctx, &ring, size_of(ctx.warp(), i), &end) != exec::WaitResult::kOk) return;
    (void)sync::ring_quiet(ctx, &ring, end);
  });
  s.launch("consumer", {1, 1, 1}, [&](SimCtx& ctx) {
    exec::WaitResult res;
    out.bad = sync::ring_consume(ctx, &ring, out.total, &res);
  });
  out.r = s.run();
  return out;
}

TEST(Scheduler, PublishRingDeliversEverySlotInOrder) {
  for (Policy p : {Policy::kRandom, Policy::kPct})
    for (uint64_t batch : {1u, 2u, 4u, 8u}) {
      const uint64_t bad = sweep_seeds(1, 60, [&](uint64_t seed) {
        RingRun rr = run_ring(opts(seed, p), batch, 3, 4, false);
        EXPECT_EQ(rr.r.outcome, Outcome::kCompleted) << rr.r.report;
        return rr.r.outcome == Outcome::kCompleted && rr.bad == 0 && rr.ring.cons == rr.total;
      });
      EXPECT_EQ(bad, 0u) << policy_name(p) << " batch " << batch;
    }
}

// A scheduler reuses the agents and lanes (with their fibers) of the schedulers before it on
// its thread: after runs that completed, hung (lanes unwound mid-body) and stopped a parked
// daemon, the same run gives the same trace as on fresh ones.
TEST(Scheduler, ARunOnReusedAgentsAndLanesIsTheRunOnFreshOnes) {
  for (Policy p : {Policy::kRandom, Policy::kPct}) {
    const CounterRun first = count_up(opts(7, p), {1, 3, 5}, 2, true);
    ASSERT_EQ(first.r.outcome, Outcome::kCompleted);
    ASSERT_EQ(run_ring(opts(5), 8, 3, 4, true).r.outcome, Outcome::kHang);
    {
      Scheduler s(opts(3));
      s.add_agent("parked", [](AgentCtx& a) {
        while (a.park("idle")) {
        }
      });
      uint64_t x = 0;
      s.launch("k", {2, 2, 3}, [&](SimCtx& ctx) { ctx.store(gpu_scope, relaxed, &x, uint64_t(ctx.lane()) + 1); });
      ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
    }
    const CounterRun again = count_up(opts(7, p), {1, 3, 5}, 2, true);
    EXPECT_EQ(again.r.outcome, Outcome::kCompleted) << again.r.report;
    EXPECT_EQ(again.counter, first.counter);
    EXPECT_EQ(again.r.steps, first.r.steps) << policy_name(p);
    EXPECT_EQ(again.r.accesses, first.r.accesses) << policy_name(p);
    EXPECT_EQ(again.r.trace_hash, first.r.trace_hash) << policy_name(p);
  }
}

TEST(Scheduler, MissingIdleDoorbellIsReportedAsAHangWithTheIndices) {
  // batch 8 > every request and the total (21) is not a multiple of 8: without rule (a) the
  // tail after the last batch boundary is never posted.
  RingRun rr = run_ring(opts(5), 8, 3, 4, true);
  ASSERT_NE(rr.total % 8, 0u);
  ASSERT_EQ(rr.r.outcome, Outcome::kHang) << rr.r.report;
  std::printf("%s", rr.r.report.c_str());
  EXPECT_NE(rr.r.report.find("ring_consume: doorbell > cons"), std::string::npos);
  EXPECT_NE(rr.r.report.find("ring_quiet: cons >= my end"), std::string::npos);
  const uint64_t p = rr.ring.prod;
  EXPECT_LT(p, rr.total);
  const std::string idx = "watched: resv=" + std::to_string(rr.total) + " ready=" + std::to_string(rr.total) +
                          " prod=" + std::to_string(p) + " cons=" + std::to_string(p) + " doorbell=" + std::to_string(p);
  EXPECT_NE(rr.r.report.find(idx), std::string::npos) << "want: " << idx;
  // And the correct rule on the same seed completes.
  EXPECT_EQ(run_ring(opts(5), 8, 3, 4, false).r.outcome, Outcome::kCompleted);
}

TEST(Scheduler, HangFoundUnderEverySeedAndPolicy) {
  for (Policy p : {Policy::kRandom, Policy::kPct, Policy::kRunToCompletion}) {
    const uint64_t bad = sweep_seeds(100, p == Policy::kRunToCompletion ? 1 : 50, [&](uint64_t seed) {
      return run_ring(opts(seed, p), 8, 3, 4, true).r.outcome == Outcome::kHang;
    });
    EXPECT_EQ(bad, 0u) << policy_name(p);
  }
}

TEST(Scheduler, DeviceAgentJoinsAndDaemonStops) {
  Scheduler s(opts(3));
  uint64_t mailbox = 0, seen = 0;
  s.add_agent("echo", [&](AgentCtx& a) {
    while (!a.stopping()) {
      a.point();
      if (mailbox != 0 && seen == 0) {
        seen = mailbox;
        a.changed(seen);
      } else if (!a.spin("echo idle")) {
        break;
      }
    }
  });
  s.launch("k", {1, 1, 1}, [&](SimCtx& ctx) {
    ctx.mmio_store64(&mailbox, 9);
    exec::wait_until(ctx, "echo", &seen, [](uint64_t v) { return v == 9; });
  });
  const RunResult r = s.run();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  EXPECT_EQ(seen, 9u);
}

// A parked daemon takes no steps until another agent wakes it (here through an MMIO store,
// as a doorbell wakes a NIC engine), is woken to return when the run stops, and does not
// keep a real hang from being reported.
TEST(Scheduler, AParkedDaemonTakesNoStepsUntilWoken) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Scheduler s(opts(seed));
    uint64_t reg = 0, rung = 0, seen = 0, turns = 0;
    uint32_t id = 0;
    s.map_mmio(reinterpret_cast<uint64_t>(&reg), sizeof reg, [&](uint64_t, uint64_t v) {
      rung = v;
      s.wake(id);
    });
    id = s.add_agent("engine", [&](AgentCtx& a) {
      for (;;) {
        a.point();
        ++turns;
        if (seen != rung) {
          seen = rung;
          a.changed(seen);
        } else if (!a.park("engine idle")) {
          return;
        }
      }
    });
    s.launch("k", {1, 1, 1}, [&](SimCtx& ctx) {
      for (uint64_t i = 1; i <= 3; ++i) {
        for (int j = 0; j < 20; ++j) (void)ctx.load(gpu_scope, relaxed, &reg);  // turns the engine could take
        ctx.mmio_store64(&reg, i);
        exec::wait_until(ctx, "engine", &seen, [i](uint64_t v) { return v == i; });
      }
    });
    const RunResult r = s.run();
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << "seed " << seed << "\n" << r.report;
    EXPECT_EQ(seen, 3u);
    EXPECT_LE(turns, 3u * 2 + 2) << "seed " << seed;  // per doorbell: one that acts, one that parks; then the stop
  }
  // A kernel that waits for what nobody does hangs, parked engine or not.
  Scheduler s(opts(1));
  uint64_t never = 0;
  s.add_agent("engine", [&](AgentCtx& a) {
    while (a.park("engine idle")) {
    }
  });
  s.launch("k", {1, 1, 1}, [&](SimCtx& ctx) { exec::wait_until(ctx, "never", &never, [](uint64_t v) { return v != 0; }); });
  const RunResult r = s.run();
  EXPECT_EQ(r.outcome, Outcome::kHang);
  EXPECT_NE(r.report.find("engine idle"), std::string::npos) << r.report;
}

// wake_on_store: a change of a registered word wakes the parked agent (as a GPU thread's
// store of a proxy word wakes the CPU proxy); a store elsewhere, or of the same value, does not.
TEST(Scheduler, AStoreToARegisteredWordWakesAParkedAgent) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Scheduler s(opts(seed));
    uint64_t words[2] = {};  // the registered word, and the one right after it
    uint64_t &word = words[0], &other = words[1];
    uint64_t seen = 0, turns = 0;
    const uint32_t id = s.add_agent("proxy", [&](AgentCtx& a) {
      for (;;) {
        a.point();
        ++turns;
        if (__atomic_load_n(&word, __ATOMIC_ACQUIRE) != seen) {
          seen = word;
          a.changed(seen);
        } else if (!a.park("proxy idle")) {
          return;
        }
      }
    });
    s.wake_on_store(&word, sizeof word, id);
    s.launch("k", {1, 1, 1}, [&](SimCtx& ctx) {
      for (uint64_t i = 1; i <= 3; ++i) {
        ctx.store(gpu_scope, relaxed, &word, i);  // a change: wakes
        exec::wait_until(ctx, "proxy", &seen, [i](uint64_t v) { return v == i; });
        ctx.store(gpu_scope, relaxed, &word, i);  // the same value: no change, no wake
        for (int j = 0; j < 8; ++j) ctx.store(gpu_scope, relaxed, &other, i * 8 + j);  // the next word: no wake
      }
    });
    const RunResult r = s.run();
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << r.report;
    EXPECT_EQ(seen, 3u);
    EXPECT_LE(turns, 1u + 3 * 2) << "seed " << seed;  // an idle turn first at most; per change: one acts, one parks
  }
}

TEST(Scheduler, MmioStoresRouteToTheDevice) {
  Scheduler s(opts(1));
  uint64_t reg[4] = {};
  std::vector<std::pair<uint64_t, uint64_t>> got;
  s.map_mmio(reinterpret_cast<uint64_t>(reg), sizeof reg, [&](uint64_t a, uint64_t v) { got.push_back({a, v}); });
  s.launch("k", {1, 1, 1}, [&](SimCtx& ctx) { ctx.mmio_store64(&reg[2], 0xabc); });
  ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, reinterpret_cast<uint64_t>(&reg[2]));
  EXPECT_EQ(got[0].second, 0xabcu);
  EXPECT_EQ(reg[2], 0u);  // the device saw it; memory did not
}


TEST(Scheduler, CtaBarrierHoldsEveryWarpOfTheCta) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Scheduler s(opts(seed));
    uint64_t before = 0;
    std::vector<uint64_t> seen;
    s.launch("bar", {2, 3, 2}, [&](SimCtx& ctx) {
      ctx.atomic_add(exec::gpu_scope, &before, 1);
      ctx.sync_cta();
      // Every lane of this CTA has arrived: at least its 6 increments are in.
      seen.push_back(ctx.load(exec::gpu_scope, exec::relaxed, &before));
    });
    ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
    ASSERT_EQ(seen.size(), 12u);
    for (uint64_t v : seen) EXPECT_GE(v, 6u) << "seed " << seed;
  }
}

// A hang while one warp waits at a CTA barrier: the abort resumes the waiting lane, which
// finishes still listed at the barrier; the hung warp's abort then completes the barrier, whose
// release must leave the finished lane finished (it was resumed again and the run aborted
// the process).
TEST(Scheduler, AHangWithAWarpAtACtaBarrierEndsAsAHang) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SchedOptions o = opts(seed);
    o.hang_spins = 64;
    Scheduler s(o);
    uint64_t flag = 0;
    s.launch("bar", {1, 2, 1}, [&](SimCtx& ctx) {
      if (ctx.warp() == 0) return ctx.sync_cta();
      while (ctx.load(exec::gpu_scope, exec::relaxed, &flag) == 0)  // never set
        if (!ctx.spin("flag", &flag, 0)) return;
    });
    EXPECT_EQ(s.run().outcome, Outcome::kHang) << "seed " << seed;
  }
}

// publish_in_order through the model's context, counting its CASes, spins and pauses; the
// contexts below opt into CUDA's tuning of the chain.
struct ChainCounts {
  uint64_t cas = 0, spins = 0, pauses = 0;
};
struct CountingCtx {
  SimCtx& c;
  ChainCounts& n;  // (the caller's: a hang unwinds the lane mid-wait)
  template <class S>
  uint64_t atomic_cas(S s, uint64_t* p, uint64_t expected, uint64_t desired) {
    ++n.cas;
    return c.atomic_cas(s, p, expected, desired);
  }
  template <class S, class O>
  uint64_t load(S s, O o, const uint64_t* p) {
    return c.load(s, o, p);
  }
  bool spin(const char* what, const uint64_t* addr, uint64_t seen) {
    ++n.spins;
    return c.spin(what, addr, seen);
  }
  void pause() { ++n.pauses; }
};
// Retries back to back, 8 between two spins (exec::retries_per_spin, as CUDA's does).
struct BurstCtx : CountingCtx {
  static constexpr uint64_t kRetriesPerSpin = 8;
};
static_assert(exec::retries_per_spin<BurstCtx> == 8 && exec::retries_per_spin<SimCtx> == 1);

// Warp 1 publishes [1, 2) behind warp 0's [0, 1): it spins once per 8 failed CASes, and
// publishes in order. With warp 0's span never published the wait still ends as a hang.
TEST(Scheduler, APublisherRetryingBackToBackSpinsOncePerBurstAndStillHangs) {
  for (const bool published : {true, false})
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SchedOptions o = opts(seed);
      o.hang_spins = 64;
      Scheduler s(o);
      uint64_t ready = 0, seen_at_publish = ~0ull;
      ChainCounts first, second;
      s.launch("publish", {1, 2, 1}, [&](SimCtx& ctx) {
        if (ctx.warp() == 0) {
          BurstCtx b{{ctx, first}};
          if (published) (void)sync::publish_in_order(b, &ready, 0, 1, "first", [](uint64_t) { return false; });
          return;
        }
        BurstCtx b{{ctx, second}};
        const sync::Publish r = sync::publish_in_order(b, &ready, 1, 2, "second: ready == 1", [](uint64_t) { return false; });
        if (r == sync::Publish::kOk) seen_at_publish = ctx.load(gpu_scope, relaxed, &ready);
      });
      const RunResult rr = s.run();
      const uint64_t cas = second.cas, spins = second.spins;
      if (published) {
        ASSERT_EQ(rr.outcome, Outcome::kCompleted) << "seed " << seed << rr.report;
        EXPECT_EQ(seen_at_publish, 2u);
        EXPECT_EQ(spins, (cas - 1) / BurstCtx::kRetriesPerSpin) << "seed " << seed << ": " << cas << " CASes";
      } else {
        ASSERT_EQ(rr.outcome, Outcome::kHang) << "seed " << seed;
        EXPECT_NE(rr.report.find("second: ready == 1"), std::string::npos) << rr.report;
        EXPECT_GE(spins, 1u);
        EXPECT_LE(spins * BurstCtx::kRetriesPerSpin, cas);
      }
    }
}

// Opts into the far wait (exec::far_publish, as CUDA's does): a publisher more than 2
// entries behind polls with loads and pauses until 1 behind.
struct FarCtx : CountingCtx {
  static constexpr exec::FarPublish kFarPublish{1, 2, 1};
};

// Six warps publish [w, w + 1) in order, most of them far behind at first: every span is
// published exactly once (ready ends at 6, each CAS moved it from its own base), and some
// schedule took the far wait. With warp 0's span never published, every waiter ends in the
// abandoned check once the ring is marked failed, far or near, or in a hang when it is not.
TEST(Scheduler, FarPublishersWaitWithLoadsAndStillPublishInOrder) {
  constexpr uint32_t kWarps = 6;
  for (const int mode : {0, 1, 2}) {  // 0: all publish; 1: warp 0 fails its ring; 2: warp 0 stalls
    uint64_t paused_runs = 0;
    const uint64_t bad = sweep_seeds(1, 100, [&](uint64_t seed) {
      SchedOptions o = opts(seed);
      o.hang_spins = 64;
      Scheduler s(o);
      uint64_t ready = 0, failed = 0;
      ChainCounts counts;
      uint32_t ok = 0, abandoned = 0;
      s.launch("publish", {1, kWarps, 1}, [&](SimCtx& ctx) {
        if (ctx.lane() != 0) return;
        const uint64_t w = ctx.warp();
        if (w == 0 && mode != 0) {
          if (mode == 1) ctx.store(gpu_scope, relaxed, &failed, 1);
          return;
        }
        FarCtx f{{ctx, counts}};
        const auto gave_up = [&](uint64_t) { return ctx.load(gpu_scope, relaxed, &failed) != 0; };
        const sync::Publish r = sync::publish_in_order(f, &ready, w, w + 1, "far: ready == base", gave_up);
        (r == sync::Publish::kOk ? ok : abandoned) += 1;
      });
      const RunResult rr = s.run();
      paused_runs += counts.pauses != 0;
      if (mode == 2) return rr.outcome == Outcome::kHang && rr.report.find("far: ready == base") != std::string::npos;
      if (rr.outcome != Outcome::kCompleted) return false;
      return mode == 0 ? ok == kWarps && ready == kWarps : abandoned == kWarps - 1 && ready == 0;
    });
    EXPECT_EQ(bad, 0u) << "mode " << mode;
    EXPECT_NE(paused_runs, 0u) << "mode " << mode << ": no schedule took the far wait";
  }
}

// Timed schedule: a reader cannot see a write before it happened in simulated time, and the
// lanes of a warp are charged once per lockstep step.
TEST(TimedSchedule, ReadersWaitForTheWritesTheyObserve) {
  SchedOptions o = opts(1, Policy::kTimed);
  o.costs.gpu_access_ns = 100;
  o.costs.poll_ns = 10;
  Scheduler s(o);
  uint64_t x = 0, flag = 0;
  s.launch("writer", {1, 1, 1}, [&](SimCtx& ctx) {
    for (int i = 0; i < 10; ++i) ctx.store(exec::gpu_scope, exec::relaxed, &x, uint64_t(i));  // 1000 ns
    ctx.store(exec::gpu_scope, exec::release, &flag, 1);                                        // at 1100 ns
  });
  s.launch("reader", {1, 1, 1}, [&](SimCtx& ctx) {
    exec::wait_until(ctx, "flag", &flag, [](uint64_t f) { return f == 1; });
  });
  const RunResult r = s.run();
  ASSERT_EQ(r.outcome, Outcome::kCompleted);
  EXPECT_GE(r.sim_time_ns, 1100.0);   // the reader finished after the write it saw
  EXPECT_LT(r.sim_time_ns, 1400.0);   // and not much later (one access, a few polls)
}

TEST(TimedSchedule, LockstepLanesCostOneAccessPerStep) {
  for (uint32_t lanes : {1u, 32u}) {
    SchedOptions o = opts(1, Policy::kTimed);
    o.costs.gpu_access_ns = 100;
    Scheduler s(o);
    std::vector<uint64_t> words(32);
    s.launch("k", {1, 1, lanes}, [&](SimCtx& ctx) {
      for (int i = 0; i < 5; ++i) ctx.store(exec::gpu_scope, exec::relaxed, &words[ctx.lane()], uint64_t(i + 1));
    });
    const RunResult r = s.run();
    EXPECT_DOUBLE_EQ(r.sim_time_ns, 500.0) << lanes << " lanes";
  }
}

// The timed schedule's table of write times, against a std::map: every address set keeps its
// latest time through the table's growth and probe chains, and an address never set is
// absent. (Fibonacci hashing spreads words of one range without a collision, so the addresses
// are drawn anywhere, to make probe chains.)
TEST(WriteTimes, KeepsTheLatestTimeOfEveryAddressThroughGrowth) {
  WriteTimes t;
  std::map<uintptr_t, double> ref;
  std::mt19937_64 rng(7);  // fixed: a table test, not a randomized one
  std::vector<uintptr_t> pool(4096);
  for (uintptr_t& a : pool) a = rng() >> 1;  // never all ones (the table stores address + 1)
  for (int i = 0; i < 20000; ++i) {
    const uintptr_t a = pool[i < 2048 ? size_t(i) : rng() % 2048];  // half the pool, set again and again
    t.set(reinterpret_cast<const void*>(a), double(i));
    ref[a] = double(i);
  }
  EXPECT_EQ(t.size(), ref.size());
  for (uintptr_t a : pool) {
    const double* ns = t.find(reinterpret_cast<const void*>(a));
    auto it = ref.find(a);
    if (it == ref.end()) {
      EXPECT_EQ(ns, nullptr) << a;
    } else {
      ASSERT_NE(ns, nullptr) << a;
      EXPECT_EQ(*ns, it->second) << a;
    }
  }
  EXPECT_EQ(WriteTimes().find(&t), nullptr);
}
}  // namespace
}  // namespace doorbell::gpu_sim
