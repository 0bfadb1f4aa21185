// The race detector on its own: the orders that hand bytes over (release / acquire, poll and
// fence, barriers, chains through relaxed stores for a later write) and the ones that do not.
#include "hw/gpu_sim/race_detector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/exec/context.h"
#include "hw/gpu_sim/scheduler.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::gpu_sim {
namespace {

struct Mem {
  alignas(64) uint8_t data[64] = {};
  uint64_t flag = 0, other = 0;
};

TEST(RaceDetector, ReleaseThenAcquireHandsTheBytesOver) {
  RaceDetector r;
  Mem m;
  const auto a = r.add_thread("producer"), b = r.add_thread("consumer");
  r.write(a, m.data, 16, "produce");
  r.release_store(a, &m.flag);
  r.acquire_load(b, &m.flag);
  r.read(b, m.data, 16, "consume");
  EXPECT_FALSE(r.found()) << r.report();
}

TEST(RaceDetector, ARelaxedFlagWithoutAFenceHandsNothingOver) {
  RaceDetector r;
  Mem m;
  const auto a = r.add_thread("producer"), b = r.add_thread("consumer");
  r.write(a, m.data, 16, "produce");
  r.relaxed_store(a, &m.flag);
  r.acquire_load(b, &m.flag);
  r.read(b, m.data, 16, "consume");
  ASSERT_TRUE(r.found());
  EXPECT_NE(r.report().find("write by producer at produce"), std::string::npos) << r.report();
  EXPECT_NE(r.report().find("read by consumer at consume"), std::string::npos) << r.report();
}

TEST(RaceDetector, FenceThenRelaxedStoreAndPollThenFence) {
  RaceDetector r;
  Mem m;
  const auto a = r.add_thread("producer"), b = r.add_thread("consumer");
  r.write(a, m.data, 16, "produce");
  r.fence(a);
  r.relaxed_store(a, &m.flag);
  r.relaxed_load(b, &m.flag);  // a poll
  r.fence(b);                  // poll; fence: an acquire
  r.read(b, m.data, 16, "consume");
  EXPECT_FALSE(r.found()) << r.report();
  // Without the consumer's fence the poll acquires nothing.
  RaceDetector q;
  const auto c = q.add_thread("producer"), d = q.add_thread("consumer");
  q.write(c, m.data, 16, "produce");
  q.fence(c);
  q.relaxed_store(c, &m.flag);
  q.relaxed_load(d, &m.flag);
  q.read(d, m.data, 16, "consume");
  EXPECT_TRUE(q.found());
}

TEST(RaceDetector, AWriteAfterAReadNeedsTheReadersReleaseNotItsRelaxedStore) {
  Mem m;
  {  // the reader's release store orders its read before the writer's write
    RaceDetector r;
    const auto rd = r.add_thread("reader"), wr = r.add_thread("writer");
    r.read(rd, m.data, 8, "read");
    r.release_store(rd, &m.flag);
    r.acquire_load(wr, &m.flag);
    r.write(wr, m.data, 8, "rewrite");
    EXPECT_FALSE(r.found()) << r.report();
  }
  {  // a relaxed store after the read, no fence: a load may still be in flight
    RaceDetector r;
    const auto rd = r.add_thread("reader"), wr = r.add_thread("writer");
    r.read(rd, m.data, 8, "read");
    r.relaxed_store(rd, &m.flag);
    r.acquire_load(wr, &m.flag);
    r.write(wr, m.data, 8, "rewrite");
    EXPECT_TRUE(r.found());
  }
  {  // a third thread that took the reader's release relays it with a relaxed atomic
    RaceDetector r;
    const auto rd = r.add_thread("reader"), relay = r.add_thread("relay"), wr = r.add_thread("writer");
    r.read(rd, m.data, 8, "read");
    r.release_store(rd, &m.flag);
    r.acquire_load(relay, &m.flag);
    r.rmw(relay, &m.other);
    r.acquire_load(wr, &m.other);
    r.write(wr, m.data, 8, "rewrite");
    EXPECT_FALSE(r.found()) << r.report();
    // ... which orders nothing before a read: the relay released nothing.
    r.write(rd, m.data + 8, 8, "produce");
    r.release_store(rd, &m.flag);
    r.acquire_load(relay, &m.flag);
    r.rmw(relay, &m.other);
    r.acquire_load(wr, &m.other);
    r.read(wr, m.data + 8, 8, "consume");
    EXPECT_TRUE(r.found());
  }
}

TEST(RaceDetector, BarriersOrderAndShufflesOrderOnlyLaterWrites) {
  Mem m;
  RaceDetector r;
  const auto a = r.add_thread("lane 0"), b = r.add_thread("lane 1");
  const RaceDetector::Tid both[] = {a, b};
  r.write(a, m.data, 8, "write");
  r.barrier(both);
  r.read(b, m.data, 8, "read");
  EXPECT_FALSE(r.found()) << r.report();
  r.write(a, m.data + 8, 8, "write");
  r.barrier(both, true);  // a shuffle
  r.write(b, m.data + 16, 8, "other bytes");
  EXPECT_FALSE(r.found()) << r.report();
  r.read(b, m.data + 8, 8, "read");
  EXPECT_TRUE(r.found());
}

TEST(RaceDetector, BytesOfAWordAreTheirOwn) {
  Mem m;
  RaceDetector r;
  const auto a = r.add_thread("lane 0"), b = r.add_thread("lane 1");
  r.write(a, m.data, 2, "low");
  r.write(b, m.data + 2, 2, "high");
  EXPECT_FALSE(r.found()) << r.report();
  r.write(b, m.data + 1, 2, "across");
  EXPECT_TRUE(r.found());
}

TEST(RaceDetector, DevicesAcquireWhatTheyReadAndReleaseSmallWrites) {
  Mem m;
  RaceDetector r;
  const auto gpu = r.add_thread("gpu"), nic = r.add_thread("nic");
  r.write(gpu, m.data, 32, "wqe");
  r.release_store(gpu, &m.flag);              // the doorbell record
  r.device_read(nic, &m.flag, 8, "dbr", 0);  // acquires it
  r.device_read(nic, m.data, 32, "WQE", 0);
  r.device_write(nic, m.data + 32, 8, "result", 0);  // 8 bytes: released
  r.acquire_load(gpu, m.data + 32);
  r.read(gpu, m.data + 32, 8, "result");
  EXPECT_FALSE(r.found()) << r.report();
  r.ignore(m.data + 40, 8);
  r.device_write(nic, m.data + 40, 8, "scratch", 0);
  r.write(gpu, m.data + 40, 8, "scratch");
  EXPECT_FALSE(r.found()) << r.report();
}

TEST(RaceDetector, TheReportNamesTheFlagOfTheHandOver) {
  Mem m;
  RaceDetector r;
  r.set_namer([&m](const void* p) { return p == &m.flag ? std::string("conn.head") : std::string(); });
  const auto rd = r.add_thread("receiver"), wr = r.add_thread("sender");
  r.release_store(rd, &m.flag);  // the slot handed back...
  r.read(rd, m.data, 8, "recv copy");  // ...then read
  r.acquire_load(wr, &m.flag);
  r.write(wr, m.data, 8, "send stage");
  ASSERT_TRUE(r.found());
  EXPECT_NE(r.report().find("it released conn.head before it"), std::string::npos) << r.report();
  EXPECT_NE(r.report().find("sender last took the releases of conn.head"), std::string::npos) << r.report();
}

// Through the scheduler: lanes of a kernel, the context's accesses and a CTA barrier.
TEST(RaceDetector, SchedulerRunsReportRacesAndOnlyThem) {
  for (const bool barrier : {true, false}) {
    SchedOptions o;
    o.races = true;
    o.policy = Policy::kRunToCompletion;
    Scheduler s(o);
    Mem m;
    s.launch("k", {1, 1, 2}, [&](SimCtx& c) {
      uint64_t v = c.lane() + 1;
      if (c.lane() == 0) c.write_bytes(m.data, &v, 8);
      if (barrier) c.sync_cta();
      if (c.lane() == 1) c.read_bytes(&v, m.data, 8);
    });
    const RunResult r = s.run();
    EXPECT_EQ(r.outcome, Outcome::kCompleted);
    EXPECT_EQ(r.races.empty(), barrier) << r.races;
    if (!barrier) {
      EXPECT_NE(r.races.find("race_detector_test.cc"), std::string::npos) << r.races;
    }
  }
}

}  // namespace
}  // namespace doorbell::gpu_sim
