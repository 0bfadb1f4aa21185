// Publishing by counted windows (core/sync/publish_windows.h) in the model: producers write
// spans, count them and wait; a consumer (the NIC's view) reads `ready` with acquire and
// checks that every entry below it is written. Indices begin a few laps in: windows of 4
// entries, where spans straddle windows, and windows of 1 over more spans than the counters
// cover (their lap arithmetic).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/sync/publish_windows.h"
#include "hw/gpu_sim/scheduler.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "tests/seeds.h"

namespace doorbell::gpu_sim {
namespace {

using exec::acquire;
using exec::gpu_scope;
using exec::relaxed;
using testing::sweep_seeds;

constexpr uint32_t kProducers = 5, kMaxSpans = 12;
constexpr uint64_t kSeeds = 500;

struct Run {
  uint64_t ready = 0, resv = 0;
  uint64_t count[sync::kPublishWindows] = {};
  uint64_t entry[kProducers * kMaxSpans * 3] = {};  // entry i - start holds i + 1 once written
  uint64_t moved_to_end = 0, published = 0, bad_entry = 0;
};

// Producer warp 0 publishes as IBGDA's submit_alone does when it can (ready at its base:
// it moves ready itself and counts afterwards, so others learn its count late); the others
// count and wait. Span sizes come from the seed.
std::string run_windows(uint64_t seed, MemoryModel m, uint32_t shift, uint32_t spans) {
  const uint64_t kStart = (uint64_t{sync::kPublishWindows} << shift) * 3 + 5;
  SchedOptions o;
  o.seed = seed;
  o.memory = m;
  o.hang_spins = 256;
  // Odd seeds random, even ones PCT (a stale claim needs one producer to run a whole span
  // between two of another's steps).
  if (seed % 2 == 0) o.policy = Policy::kPct, o.pct_steps = 4000;
  Scheduler s(o);
  Run run;
  run.ready = run.resv = kStart;
  const sync::Windows win{run.count, shift};
  sync::windows_start_at(win, kStart);
  uint64_t total = 0;
  uint32_t sizes[kProducers][kMaxSpans];
  for (uint32_t p = 0; p < kProducers; ++p)
    for (uint32_t k = 0; k < spans; ++k) total += sizes[p][k] = 1 + uint32_t((seed * 7 + p * 5 + k * 3) % 3);
  s.launch("producer", {1, kProducers, 1}, [&](SimCtx& ctx) {
    const uint32_t p = ctx.warp();
    for (uint32_t k = 0; k < spans; ++k) {
      const uint64_t n = sizes[p][k], base = ctx.atomic_add(gpu_scope, &run.resv, n), next = base + n;
      for (uint64_t i = base; i < next; ++i) ctx.store(gpu_scope, relaxed, &run.entry[i - kStart], i + 1);
      ctx.fence(gpu_scope);
      if (p == 0 && ctx.atomic_cas(gpu_scope, &run.ready, base, next) == base) {
        sync::count_published(ctx, win, base, next);
        ++run.published;
        if (next == kStart + total) ++run.moved_to_end;
        continue;
      }
      uint64_t moved = 0;
      if (sync::publish_counted(ctx, &run.ready, &run.resv, win, base, next, "windows: ready >= next",
                                [](uint64_t) { return false; }, &moved) != sync::Publish::kOk)
        return;
      run.published += ctx.load(gpu_scope, relaxed, &run.ready) >= next;
      // The mover's own look, right after it moved ready (an acquire first: what others
      // published below its claim it saw only through ready): everything below is written.
      if (moved != 0) ctx.fence(gpu_scope);
      for (uint64_t i = kStart; i < moved; ++i)
        if (ctx.load(gpu_scope, relaxed, &run.entry[i - kStart]) != i + 1 && run.bad_entry == 0) run.bad_entry = i;
      if (moved == kStart + total) ++run.moved_to_end;
    }
  });
  s.launch("consumer", {1, 1, 1}, [&](SimCtx& ctx) {
    for (uint64_t seen = kStart; seen < kStart + total;) {
      const uint64_t r = ctx.load(gpu_scope, acquire, &run.ready);
      for (uint64_t i = seen; i < r; ++i)
        if (ctx.load(gpu_scope, relaxed, &run.entry[i - kStart]) != i + 1 && run.bad_entry == 0) run.bad_entry = i;
      if (r == seen && !ctx.spin("consumer: ready moves", &run.ready, r)) return;
      seen = r;
    }
  });
  const RunResult rr = s.run();
  if (rr.outcome != Outcome::kCompleted) return rr.report;
  if (run.bad_entry != 0) return "entry " + std::to_string(run.bad_entry) + " below ready was read unwritten";
  if (run.ready != kStart + total) return "ready ended at " + std::to_string(run.ready);
  if (run.published != kProducers * spans) return "a span returned unpublished";
  // Whoever moved ready to the end rings for the last entries (the submit rule's idle case).
  if (run.moved_to_end == 0) return "nobody says it moved ready to the end";
  return "";
}

TEST(PublishWindows, EveryEntryBelowReadyIsWrittenAndEverySpanPublished) {
  for (const MemoryModel m : {MemoryModel::kSc, MemoryModel::kWeak})
    for (const uint32_t shift : {2u, 0u}) {  // 4 entries a window, 3 spans each; 1 entry, 12 spans (> 2 laps)
      std::string why;
      const uint64_t bad = sweep_seeds(1, kSeeds, [&](uint64_t seed) {
        why = run_windows(seed, m, shift, shift == 0 ? kMaxSpans : 3);
        return why.empty();
      });
      EXPECT_EQ(bad, 0u) << (m == MemoryModel::kWeak ? "weak" : "sc") << ", windows of " << (1u << shift) << ": " << why;
    }
}

// written_prefix reads the reservation head after the count: a span reserved between the
// two reads and counted before the count's read would otherwise stand in for an earlier
// entry still unwritten. A context whose first read of the head lets another producer
// reserve and count entry 2 right after it (entry 0 unwritten, entry 1 counted).
struct InterleavingCtx {
  uint64_t* resv;
  uint64_t* count;
  bool done = false;
  template <class S, class O>
  uint64_t load(S, O, const uint64_t* p) {
    const uint64_t v = *p;
    if (p == resv && !done) done = true, *resv += 1, *count += 1;
    return v;
  }
};
TEST(PublishWindows, WrittenPrefixReadsTheReservationsAfterTheCount) {
  uint64_t count[sync::kPublishWindows] = {}, resv = 2;
  const sync::Windows win{count, 2};
  count[0] = 1;  // entry 1 counted; entry 0 reserved, unwritten
  InterleavingCtx ctx{&resv, count};
  const sync::Claim c = sync::written_prefix(ctx, win, &resv, 1);
  EXPECT_EQ(c.to, 0u) << "claimed [" << c.from << ", " << c.to << ") with entry 0 unwritten";
}

// A waiter told that an earlier span was abandoned gives its own up only if `ready` does not
// cover it by then: another thread's claim may have published it since the waiter's last
// poll, and the caller issues a given-up span again (an atomic must not run twice).
TEST(PublishWindows, AnAbandonedWaiterWhoseSpanWasPublishedReturnsOk) {
  sync::Publish got[2];
  for (const bool published : {true, false}) {
    Scheduler s(SchedOptions{});
    uint64_t count[sync::kPublishWindows] = {}, ready = 0, resv = 8;
    const sync::Windows win{count, 2};
    s.launch("waiter", {1, 1, 1}, [&](SimCtx& ctx) {
      uint64_t moved = 0;
      // [4, 6) waits behind [0, 4), never written; when asked, a claim has just carried
      // ready past the span (or has not).
      got[published] = sync::publish_counted(ctx, &ready, &resv, win, 4, 6, "test: ready >= 6", [&](uint64_t) {
        if (published) ctx.store(gpu_scope, relaxed, &ready, uint64_t{8});
        return true;
      }, &moved);
    });
    ASSERT_EQ(s.run().outcome, Outcome::kCompleted);
  }
  EXPECT_TRUE(got[1] == sync::Publish::kOk) << "gave up a span a claim had published: failover issues it twice";
  EXPECT_TRUE(got[0] == sync::Publish::kAbandoned) << "did not give up a span behind an abandoned one";
}

TEST(PublishWindows, CountersStartConsistentAnywhere) {
  uint64_t count[sync::kPublishWindows];
  const sync::Windows win{count, 3};
  sync::windows_start_at(win, 1000003);  // window 125000, 3 entries in
  EXPECT_EQ(*win.at(125000), win.value(125000, 3));
  EXPECT_EQ(*win.at(125001), win.value(125001, 0));
  EXPECT_EQ(*win.at(125000 + sync::kPublishWindows - 1), win.value(125000 + sync::kPublishWindows - 1, 0));
  EXPECT_EQ(sync::window_shift(1024), 5u);
  EXPECT_EQ(sync::window_shift(32), 0u);
  EXPECT_EQ(sync::window_shift(64), 1u);
}

}  // namespace
}  // namespace doorbell::gpu_sim
