// The weak memory mode: the litmus suite agrees with the PTX memory model (every forbidden
// outcome absent, every allowed one but LB produced; the SC mode produces none), store
// buffers hide stores from devices until a system fence, loads never go back in coherence
// order, runs are deterministic, and the ticket lock and publish ring of core/sync stay
// correct with their orderings and break without them (a planted bug each, found).
#include "hw/gpu_sim/weak_memory.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/sync/publish_ring.h"
#include "core/sync/ticket_lock.h"
#include "hw/gpu_sim/litmus.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "tests/seeds.h"

namespace doorbell::gpu_sim {
namespace {

using exec::gpu_scope;
using exec::relaxed;
using testing::sweep_seeds;

SchedOptions weak(uint64_t seed, MemoryModel m = MemoryModel::kWeak) {
  SchedOptions o;
  o.seed = seed;
  o.memory = m;
  return o;
}

TEST(WeakMemory, LitmusSuiteAgreesWithPtx) {
  constexpr uint64_t kRuns = 2000;
  for (exec::Litmus t : exec::kLitmusTests)
    for (LitmusPlace p : kLitmusPlaces) {
      if (!litmus_applies(t, p)) continue;
      const uint64_t w = run_litmus(t, p, kRuns, 1, MemoryModel::kWeak);
      const std::string cell = std::string(exec::litmus_name(t)) + " / " + litmus_place_name(p);
      if (!ptx_allows(t, p)) {
        EXPECT_EQ(w, 0u) << cell << ": forbidden by PTX, seen " << w << " times";
      }
      if (model_should_show(t, p)) {
        EXPECT_GT(w, 0u) << cell << ": allowed by PTX, never produced";
      }
      EXPECT_EQ(run_litmus(t, p, 200, 1, MemoryModel::kSc), 0u) << cell << ": the SC mode is not weak";
    }
  std::printf("%s", litmus_table(kRuns, 1, MemoryModel::kWeak).c_str());
}

TEST(WeakMemory, StoresReachDevicesOnlyThroughASystemFence) {
  WeakMemory m(1);
  const uint32_t a = m.add_thread(0, 0, "a"), b = m.add_thread(1, 0, "b");
  alignas(64) uint64_t word = 0;
  const uint64_t one = 1;
  m.store(a, &word, &one, 8);
  EXPECT_EQ(word, 0u) << "a buffered store is not in memory";
  uint64_t got = 0;
  m.load(a, &word, &got, 8);
  EXPECT_EQ(got, 1u) << "a thread reads its own store";
  m.device_read(&word, 8, "nic0", "WQE", 3);
  m.fence(a, exec::Scope::kGpu);
  EXPECT_EQ(word, 0u) << "a GPU fence does not reach system scope";
  m.synced(b);
  m.load(b, &word, &got, 8);
  EXPECT_EQ(got, 1u) << "after a GPU fence, another CTA that synchronised sees it";
  m.fence(a, exec::Scope::kSystem);
  EXPECT_EQ(word, 1u);
  EXPECT_EQ(m.buffered(), 0u);
  const std::string r = m.report();
  EXPECT_NE(r.find("nic0 read WQE 3"), std::string::npos) << r;
  EXPECT_NE(r.find("still buffered, visible to its thread only"), std::string::npos) << r;
}

TEST(WeakMemory, ACtaFenceIsCumulativeThroughAGpuFence) {
  // a (CTA 0) publishes to b (CTA 0) with a CTA fence; b's GPU fence then carries a's store
  // to c in another CTA, as PTX's cumulativity requires.
  WeakMemory m(2);
  const uint32_t a = m.add_thread(0, 0, "a"), b = m.add_thread(0, 0, "b"), c = m.add_thread(1, 0, "c");
  alignas(64) uint64_t word = 0;
  const uint64_t one = 1;
  m.store(a, &word, &one, 8);
  m.fence(a, exec::Scope::kCta);
  m.fence(b, exec::Scope::kGpu);
  m.synced(c);
  for (int i = 0; i < 50; ++i) {
    uint64_t got = 0;
    m.load(c, &word, &got, 8);
    EXPECT_EQ(got, 1u);
  }
}

TEST(WeakMemory, LoadsNeverGoBackInCoherenceOrder) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    WeakMemory m(seed);
    const uint32_t w = m.add_thread(0, 0, "writer"), r = m.add_thread(1, 0, "reader");
    alignas(64) uint64_t word = 0;
    uint64_t last = 0;
    for (uint64_t v = 1; v <= 40; ++v) {
      m.store(w, &word, &v, 8);
      (void)m.step();
      if (v % 3 == 0) m.fence(w, exec::Scope::kSystem);
      for (int k = 0; k < 3; ++k) {
        uint64_t got = 0;
        m.load(r, &word, &got, 8);
        ASSERT_GE(got, last) << "seed " << seed << ": read " << got << " after " << last;
        last = got;
      }
    }
  }
}

// Coherence with several writers: t's private store and u's GPU-visible store to one word
// land in store order, so a thread that read u's (newer) value never reads t's afterwards.
TEST(WeakMemory, StoresToOneWordLandInStoreOrder) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    WeakMemory m(seed);
    const uint32_t t = m.add_thread(0, 0, "t"), u = m.add_thread(1, 0, "u");
    alignas(64) uint64_t word = 0;
    const uint64_t one = 1, two = 2;
    m.store(t, &word, &one, 8);
    m.store(u, &word, &two, 8);
    m.fence(u, exec::Scope::kGpu);
    uint64_t first = 0, later = 0;
    m.load(t, &word, &first, 8);
    for (int i = 0; i < 4; ++i) (void)m.step();
    (void)m.settle();
    m.load(t, &word, &later, 8);
    EXPECT_EQ(word, 2u) << "seed " << seed;
    EXPECT_EQ(later, 2u) << "seed " << seed << ": read " << first << " then " << later;
  }
}

// A store a reader saw through a CTA fence stays seen after another CTA's atomic on the word
// and after it lands: the reader never goes back to the value before it.
TEST(WeakMemory, ASeenStoreStaysSeenAfterItLands) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    WeakMemory m(seed);
    const uint32_t t = m.add_thread(0, 0, "t"), u = m.add_thread(0, 0, "u"), v = m.add_thread(1, 0, "v");
    alignas(64) uint64_t word = 0;
    const uint64_t five = 5;
    m.store(t, &word, &five, 8);
    m.fence(t, exec::Scope::kCta);
    m.synced(u);
    uint64_t got = 0;
    m.load(u, &word, &got, 8);
    ASSERT_EQ(got, 5u);
    m.rmw_begin(v, &word, 8);  // v's add does not see t's store (not visible to CTA 1)
    m.rmw(v, &word, 8, true);
    word += 1;
    (void)m.drain_thread(t);
    for (int i = 0; i < 20; ++i) {
      m.load(u, &word, &got, 8);
      EXPECT_NE(got, 0u) << "seed " << seed << ": u went back to the value before t's store";
    }
  }
}

// The counter of the ticket-lock test, on the weak model: exact with the lock's release and
// acquire, lost updates without them.
uint64_t lost_updates(uint64_t seed, bool planted) {
  Scheduler s(weak(seed));
  sync::TicketLock lock;
  lock.plant_relaxed = planted;
  uint64_t counter = 0;
  s.launch("count", {2, 1, 2}, [&](SimCtx& ctx) {
    for (int i = 0; i < 3; ++i) {
      uint64_t t = 0;
      if (sync::ticket_acquire(ctx, &lock, &t) != exec::WaitResult::kOk) return;
      const uint64_t v = ctx.load(gpu_scope, relaxed, &counter);
      ctx.store(gpu_scope, relaxed, &counter, v + 1);
      sync::ticket_release(ctx, &lock, t);
    }
  });
  const RunResult r = s.run();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.report;
  return 12 - counter;
}

TEST(WeakMemory, TicketLockIsExactWithItsOrderings) {
  EXPECT_EQ(sweep_seeds(1, 300, [](uint64_t seed) { return lost_updates(seed, false) == 0; }), 0u);
}

TEST(WeakMemory, TicketLockWithoutReleaseAcquireLosesUpdates) {
  const uint64_t found = sweep_seeds(1, 300, [](uint64_t seed) { return lost_updates(seed, true) == 0; });
  EXPECT_NE(found, 0u) << "the planted relaxed lock was not caught in 300 seeds";
}

// Producers and a consumer on the publish ring in the given memory model; a planted missing
// fence shows as a slot read with a stale payload (or a hang). The consumer is a GPU lane, or
// a host agent (a system-scope observer, as the NIC is to IBGDA's rings).
bool ring_ok(uint64_t seed, MemoryModel mm, bool no_publish_fence, bool no_doorbell_fence, bool host_consumer, std::string* why) {
  std::vector<uint64_t> slots(8);
  sync::PublishRing ring;
  ring.slots = slots.data();
  ring.nslots = 8;
  ring.batch = 4;
  ring.plant_no_publish_fence = no_publish_fence;
  ring.plant_no_doorbell_fence = no_doorbell_fence;
  uint64_t bad = 0;
  const uint64_t total = 2 * 2 * 3 * 2;  // 2 CTAs x 2 warps x 3 rounds x 2 slots
  Scheduler s(weak(seed, mm));
  s.launch("producer", {2, 2, 2}, [&](SimCtx& ctx) {
    uint64_t end = 0;
    for (int i = 0; i < 3; ++i)
      if (sync::ring_produce(ctx, &ring, 2, &end) != exec::WaitResult::kOk) return;
    (void)sync::ring_quiet(ctx, &ring, end);
  });
  if (host_consumer) {
    s.add_agent("consumer (host)", [&](AgentCtx& a) {
      uint64_t cons = 0;
      while (cons < total) {
        a.point();
        const uint64_t db = a.load64(&ring.doorbell, "host consumer", "the doorbell", 0);
        if (db <= cons) {
          if (!a.spin("host consumer: doorbell > cons", &ring.doorbell, db)) return;
          continue;
        }
        for (; cons < db; ++cons) bad += a.load64(&slots[cons & 7], "host consumer", "ring slot", cons) != sync::ring_payload(cons);
        a.store64(&ring.cons, cons);
        a.changed();
      }
    }, false);
  } else {
    s.launch("consumer", {1, 1, 1}, [&](SimCtx& ctx) {
      exec::WaitResult res;
      bad = sync::ring_consume(ctx, &ring, total, &res);
    });
  }
  const RunResult r = s.run();
  if (r.outcome == Outcome::kCompleted && bad == 0) return true;
  *why = std::to_string(bad) + " stale slots; " + r.report + s.memory_report();
  return false;
}

TEST(WeakMemory, PublishRingIsCorrectWithItsFences) {
  std::string why;
  for (bool host : {false, true})
    EXPECT_EQ(sweep_seeds(1, 200, [&](uint64_t seed) { return ring_ok(seed, MemoryModel::kWeak, false, false, host, &why); }), 0u)
        << why;
}

TEST(WeakMemory, PublishRingMissingFencesAreFoundOnlyInTheWeakMode) {
  // The publish fence guards the other producers' doorbell (GPU scope); the doorbell fence
  // guards a consumer outside the GPU (system scope).
  for (int plant = 0; plant < 2; ++plant) {
    std::string why;
    const bool host = plant == 1;
    const uint64_t found =
        sweep_seeds(1, 300, [&](uint64_t seed) { return ring_ok(seed, MemoryModel::kWeak, plant == 0, plant == 1, host, &why); });
    EXPECT_NE(found, 0u) << (plant == 0 ? "missing publish fence" : "missing doorbell fence") << " not found";
    std::printf("[doorbell] %s: %s\n", plant == 0 ? "no publish fence" : "no doorbell fence", why.c_str());
    EXPECT_EQ(sweep_seeds(1, 100, [&](uint64_t seed) { return ring_ok(seed, MemoryModel::kSc, plant == 0, plant == 1, host, &why); }), 0u)
        << "the SC mode cannot see a missing fence";
  }
}

TEST(WeakMemory, PublishRingDoorbellFenceIsUnneededForAGpuConsumer) {
  // Shown, not assumed: with the consumer on the GPU, the GPU-scope publish fence already
  // orders the slots before the doorbell, so dropping the system fence changes nothing.
  std::string why;
  EXPECT_EQ(sweep_seeds(1, 200, [&](uint64_t seed) { return ring_ok(seed, MemoryModel::kWeak, false, true, false, &why); }), 0u)
      << why;
}

TEST(WeakMemory, SameSeedSameTrace) {
  auto hash = [](uint64_t seed) {
    Scheduler s(weak(seed));
    sync::TicketLock lock;
    uint64_t counter = 0;
    s.launch("count", {2, 2, 2}, [&](SimCtx& ctx) {
      uint64_t t = 0;
      if (sync::ticket_acquire(ctx, &lock, &t) != exec::WaitResult::kOk) return;
      ctx.store(gpu_scope, relaxed, &counter, ctx.load(gpu_scope, relaxed, &counter) + 1);
      sync::ticket_release(ctx, &lock, t);
    });
    return s.run().trace_hash;
  };
  EXPECT_EQ(hash(9), hash(9));
  EXPECT_NE(hash(9), hash(10));
}

}  // namespace
}  // namespace doorbell::gpu_sim

namespace doorbell::gpu_sim {
namespace {

// Scoped acquires: a's store drained to memory long ago, a's later release of a flag; b in
// another CTA reads the flag. Acquiring at .cta (a is outside b's CTA) synchronises with
// nothing: b may still read the data's old value. Acquiring at .gpu, it never does.
uint64_t stale_after_acquire(exec::Scope acquire_scope, uint32_t b_cta, uint32_t b_gpu) {
  uint64_t stale = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    WeakMemory m(seed);
    const uint32_t a = m.add_thread(0, 0, "a"), b = m.add_thread(b_cta, b_gpu, "b");
    alignas(64) uint64_t data = 0, flag[8] = {};
    const uint64_t one = 1;
    m.store(a, &data, &one, 8);
    m.fence(a, exec::Scope::kSystem);  // data in memory; the fence releases it for the flag
    m.store(a, flag, &one, 8);
    m.fence(a, exec::Scope::kSystem);
    uint64_t f = 0, d = 0;
    m.load(b, flag, &f, 8);
    if (f != 1) continue;
    m.acquired(b, acquire_scope);
    m.load(b, &data, &d, 8);
    stale += d == 0;
  }
  return stale;
}

TEST(WeakMemory, AnAcquireSynchronisesOnlyWithWritersItsScopeIncludes) {
  EXPECT_GT(stale_after_acquire(exec::Scope::kCta, 1, 0), 0u) << ".cta acquire of another CTA's release";
  EXPECT_EQ(stale_after_acquire(exec::Scope::kGpu, 1, 0), 0u) << ".gpu acquire, same GPU";
  EXPECT_GT(stale_after_acquire(exec::Scope::kGpu, 1, 1), 0u) << ".gpu acquire of another GPU's release";
  EXPECT_EQ(stale_after_acquire(exec::Scope::kSystem, 1, 1), 0u) << ".sys acquire, another GPU";
}

TEST(WeakMemory, AGpuFenceReachesOnlyItsOwnGpu) {
  WeakMemory m(1);
  const uint32_t a = m.add_thread(0, 0, "a"), same = m.add_thread(1, 0, "same GPU"), other = m.add_thread(2, 1, "other GPU");
  alignas(64) uint64_t word = 0;
  const uint64_t one = 1;
  m.store(a, &word, &one, 8);
  m.fence(a, exec::Scope::kGpu);
  uint64_t got = 0;
  m.load(same, &word, &got, 8);
  EXPECT_EQ(got, 1u) << "promoted to its GPU";
  m.load(other, &word, &got, 8);
  EXPECT_EQ(got, 0u) << "a .gpu fence does not reach another GPU";
  m.fence(a, exec::Scope::kSystem);
  m.synced(other);
  m.load(other, &word, &got, 8);
  EXPECT_EQ(got, 1u);
}

TEST(WeakMemory, UnorderedLandingsStayUnseenUntilTheNicsCstRead) {
  uint64_t hidden = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    WeakMemory m(seed);
    m.set_unordered_landings(true);
    const uint32_t t = m.add_thread(0, 0, "t");
    alignas(64) uint64_t data = 0;
    m.landing(&data, 8, "READ response", 7, /*by=*/3);
    data = 5;
    m.flush_landings(/*by=*/4);  // another NIC's CST flushes nothing of NIC 3's
    m.synced(t);               // synchronising does not help
    uint64_t got = 0;
    m.load(t, &data, &got, 8);
    const bool missed = got == 0;
    hidden += missed;
    m.flush_landings(3);
    m.load(t, &data, &got, 8);
    EXPECT_EQ(got, 5u) << "seed " << seed << ": after the CST the landing is seen";
    if (missed) {
      EXPECT_NE(m.report().find("no CST flushed them"), std::string::npos) << m.report();
    }
  }
  EXPECT_GT(hidden, 0u);
}

// A landing a thread has seen stays seen (coherence), through any later synchronisation.
TEST(WeakMemory, ASeenLandingIsNeverHiddenAgain) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    WeakMemory m(seed);
    m.set_unordered_landings(true);
    const uint32_t t = m.add_thread(0, 0, "t");
    alignas(64) uint64_t data = 0;
    m.landing(&data, 8, "READ response", 1, 0);
    data = 7;
    uint64_t got = 0;
    bool seen = false;
    for (int i = 0; i < 20; ++i) {
      m.load(t, &data, &got, 8);
      if (seen) {
        ASSERT_EQ(got, 7u) << "seed " << seed << ": the landed value went back after load " << i;
      }
      seen |= got == 7;
      if (i % 3 == 0) m.synced(t);
    }
  }
}

// A release sequence through another GPU's atomic: W releases at .gpu and adds to a counter, X
// on another GPU adds after it, R on W's GPU acquires X's value at .gpu. PTX's release sequence
// makes R synchronise with W: R never reads W's data stale.
TEST(WeakMemory, AReleaseSequenceThroughAnotherGpusAtomicCarries) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    WeakMemory m(seed);
    const uint32_t w = m.add_thread(0, 0, "w"), x = m.add_thread(1, 1, "x"), r = m.add_thread(2, 0, "r");
    alignas(64) uint64_t data = 0, counter[8] = {};
    const uint64_t one = 1;
    m.store(w, &data, &one, 8);
    m.fence(w, exec::Scope::kGpu);
    m.fence(w, exec::Scope::kSystem);  // data in memory: only the views decide what r reads
    m.rmw_begin(w, counter, 8);
    m.rmw(w, counter, 8, true);
    counter[0] = 1;
    m.rmw_begin(x, counter, 8);
    m.rmw(x, counter, 8, true);
    counter[0] = 2;
    uint64_t c = 0, d = 0;
    m.load(r, counter, &c, 8);
    if (c != 2) continue;
    m.acquired(r, exec::Scope::kGpu);
    m.load(r, &data, &d, 8);
    EXPECT_EQ(d, 1u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace doorbell::gpu_sim
