// The copy-engine P2P transport on the CPU model: send / recv and alltoall deliver every byte
// once under random and PCT schedules, in the SC and the weak memory mode; the legacy default
// stream hang and the shared-hardware-queue hang are replayed and explained by the report
// alone; the FIFO property finds planted bugs (a sender that ignores head, a proxy that
// publishes the tail before its copy completed).
#include "sim/p2p/ce_run.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "tests/heap_shift.h"
#include "tests/seeds.h"
#include "tests/rc_find.h"
#include "tests/sim_opts.h"

namespace doorbell::p2p {
namespace {

using gpu_sim::MemoryModel;
using gpu_sim::Policy;
using gpu_sim::StreamKind;
using testing::sweep_seeds;

gpu_sim::SchedOptions opts(uint64_t seed, Policy p = Policy::kRandom, MemoryModel m = MemoryModel::kSc) {
  return testing::sim_opts(seed, p, m);
}

TEST(CeTransport, SendRecvAndAlltoallDeliverEveryByte) {
  for (MemoryModel m : {MemoryModel::kSc, MemoryModel::kWeak})
    for (bool all : {false, true}) {
      std::string why;
      const uint64_t bad = sweep_seeds(1, 40, [&](uint64_t seed) {
        CeRunConfig c;
        c.gpus = all ? 4 : 2;
        c.alltoall = all;
        c.bytes = 1000 + seed * 37;  // not a multiple of the step
        c.step_bytes = 128;
        c.copy_bytes_per_step = 64;
        c.seed = seed;
        const CeRunResult r = run_ce(c, opts(seed, seed % 2 ? Policy::kRandom : Policy::kPct, m));
        why = r.failure;
        return why.empty();
      });
      EXPECT_EQ(bad, 0u) << gpu_sim::memory_model_name(m) << (all ? " alltoall: " : " send/recv: ") << why;
    }
}

// Seed 004's hang 2: the proxy's copies on the legacy default stream wait for the kernel on a
// blocking stream, which waits for those copies. The report names both.
TEST(CeTransport, LegacyDefaultStreamProxyHangsAndTheReportSaysWhy) {
  CeRunConfig c;
  c.bytes = 16 * 512;  // more steps than FIFO slots: the sender kernel must wait for the receiver
  c.proxy_stream = StreamKind::kLegacyDefault;
  const CeRunResult r = run_ce(c, opts(3));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  std::printf("%s\n", r.run.report.c_str());
  const std::string& rep = r.run.report;
  EXPECT_NE(rep.find("p2p recv: tail > step"), std::string::npos);
  EXPECT_NE(rep.find("copy of 512 B on gpu0 stream 0 (legacy default stream, hardware queue 0) has not started; it waits for:\n"
                     "    - kernel 'p2p kernel gpu0' on gpu0 stream 1 (blocking stream, hardware queue 1) (running)"),
            std::string::npos);
  EXPECT_EQ(r.bytes_copied, 0u);
  // The fix: a non-blocking proxy stream.
  c.proxy_stream = StreamKind::kNonBlocking;
  EXPECT_EQ(run_ce(c, opts(3)).failure, "");
  // And the rule itself: a kernel on a non-blocking stream does not block the legacy stream.
  c.proxy_stream = StreamKind::kLegacyDefault;
  c.kernel_stream = StreamKind::kNonBlocking;
  EXPECT_EQ(run_ce(c, opts(3)).failure, "");
}

// More streams than hardware queues: a proxy stream shares the kernel's queue. A queue issues
// in order, so sharing alone is harmless; but the next operation's kernel, queued behind the
// running one (it waits for it), blocks the proxy's copies queued behind it (H2's mechanism).
TEST(CeTransport, ProxyCopiesBehindABlockedKernelInASharedHardwareQueueHang) {
  CeRunConfig c;
  c.bytes = 16 * 512;
  c.max_connections = 1;
  EXPECT_EQ(run_ce(c, opts(4)).failure, "") << "a shared queue alone does not block";
  c.next_kernel_queued = true;
  const CeRunResult r = run_ce(c, opts(4));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  EXPECT_NE(r.run.report.find("(non-blocking stream, hardware queue 0) has not started; it waits for:\n"
                              "    - kernel 'next op's kernel gpu0' on gpu0 stream 1 (blocking stream, hardware queue 0), ahead of it "
                              "in hardware queue 0 (not started)"),
            std::string::npos)
      << r.run.report;
  EXPECT_NE(r.run.report.find("kernel 'p2p kernel gpu0' on gpu0 stream 1 (blocking stream, hardware queue 0) is running\n"
                              "    (1 more queued behind it on this stream)"),
            std::string::npos)
      << r.run.report;
  c.max_connections = 2;  // kernel and proxy streams on queues of their own
  EXPECT_EQ(run_ce(c, opts(4)).failure, "");
}

// The send proxy maps the receiver's buffer through CUDA IPC before its first copy; in the
// timed schedule that open (ipc_open_ns, ~90 us) shows in the transfer's time, once.
TEST(CeTransport, FirstCopyWaitsForTheIpcOpen) {
  CeRunConfig c;
  c.bytes = 1 << 20;
  c.step_bytes = 128 << 10;
  gpu_sim::SchedOptions o = opts(1, Policy::kTimed);
  const CeRunResult with_open = run_ce(c, o);
  o.costs.ipc_open_ns = 0;
  const CeRunResult free_open = run_ce(c, o);
  ASSERT_EQ(with_open.failure, "");
  ASSERT_EQ(free_open.failure, "");
  EXPECT_NEAR(with_open.run.sim_time_ns - free_open.run.sim_time_ns, 90000, 1000);
}

// An alltoall in the weak model replays whatever the process allocated before it: the links'
// FIFOs, buffers and control words sit on line boundaries (mem::LineBytes).
TEST(CeTransport, AWeakRunReplaysWhereverTheHeapPutsItsBuffers) {
  CeRunConfig c;
  c.gpus = 3, c.alltoall = true, c.bytes = 1000, c.step_bytes = 128, c.copy_bytes_per_step = 64;
  testing::expect_replays_wherever_the_heap_puts_buffers([&] {
    const CeRunResult r = run_ce(c, opts(1, Policy::kRandom, MemoryModel::kWeak));
    EXPECT_EQ(r.failure, "");
    return testing::fingerprint(r.run);
  });
}

// A scenario asking for more device memory than a GPU's address space is an error, not a crash.
TEST(CeTransport, MoreMemoryThanAGpuHasIsAnError) {
  CeRunConfig c;
  c.gpus = 8;
  c.alltoall = true;
  c.phantom = true;
  c.direct = true;
  c.bytes = 1ull << 40;  // 7 incoming buffers of 1 TiB on each GPU
  c.step_bytes = 64 << 20;
  EXPECT_EQ(run_ce(c, opts(1)).failure.rfind("device memory: ", 0), 0u);
}

// The scale of seed 004's stalled call, without its bytes: 8 GPUs, 4.5 GiB sent per GPU
// (7 peers x 658 MiB, 1,316 steps of 512 KiB per connection), NCCL's sizes.
TEST(CeTransport, EightGpuAlltoallBeyond4GiBPerGpuCompletes) {
  CeRunConfig c;
  c.gpus = 8;
  c.alltoall = true;
  c.phantom = true;
  c.step_bytes = 512 << 10;
  c.bytes = 658ull << 20;
  const CeRunResult r = run_ce(c, opts(1));
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(r.bytes_copied, 56 * c.bytes);
  std::printf("[doorbell] 8-GPU alltoall, %.2f GiB per GPU: %s in %llu scheduler steps, %.1f GiB copied\n",
              7.0 * double(c.bytes) / double(1ull << 30), gpu_sim::outcome_name(r.run.outcome), (unsigned long long)r.run.steps,
              double(r.bytes_copied) / double(1ull << 30));
}

// Seed 004's stall, hypothesis by hypothesis, at its scale (8 GPUs, 512 steps of 512 KiB per
// connection, sizes only). Each stalls in its own way; the report gives every connection's
// step and counters as both ends see them.
CeRunConfig stall_case() {
  CeRunConfig c;
  c.gpus = 8;
  c.alltoall = true;
  c.phantom = true;
  c.step_bytes = 512 << 10;
  c.bytes = 512 * c.step_bytes;
  return c;
}

// H1: the kernel moves 800 KiB chunks, the proxy counts 512 KiB steps: the kernels finish after
// 328 of their steps, the proxies wait for steps 329.. of 512 that never come.
TEST(CeStall, H1KernelAndProxyDisagreeOnTheStepCount) {
  CeRunConfig c = stall_case();
  c.direct = true;  // the premise: registered buffers
  c.kernel_chunk_bytes = 800 << 10;
  const CeRunResult r = run_ce(c, opts(1));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  std::printf("%s\n", r.run.report.c_str());
  EXPECT_NE(r.run.report.find("p2p gpu0->gpu1: send proxy at step 328 of 512 (328 posted); staged by the kernel (recvTail) 328, "
                              "landed (tail) 328, consumed by the receiver (sendHead) 328"),
            std::string::npos);
}

// H2: receiver-proxy streams created first push the send proxies' streams onto the kernel's
// hardware queue; with the next operation's kernel queued there too, their first copies wait
// behind it, at step 0.
TEST(CeStall, H2ProxyStreamsOutnumberHardwareQueues) {
  CeRunConfig c = stall_case();
  c.extra_streams = 7;  // 1 kernel + 7 receiver + 7 sender streams on 8 queues
  c.next_kernel_queued = true;
  const CeRunResult r = run_ce(c, opts(1));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  EXPECT_NE(r.run.report.find("send proxy at step 0 of 512 (8 posted); staged by the kernel (recvTail) 8, landed (tail) 0, "
                              "consumed by the receiver (sendHead) 0"),
            std::string::npos)
      << r.run.report;
  c.extra_streams = 0;  // kernel + 7 proxy streams fit the 8 queues
  EXPECT_EQ(run_ce(c, opts(1)).failure, "");
  c.extra_streams = 7;  // shared queues, but nothing blocked ahead of the copies
  c.next_kernel_queued = false;
  EXPECT_EQ(run_ce(c, opts(1)).failure, "");
}

// H3: each send proxy keeps the call's completed bytes in an int. With 1 MiB steps (4 GiB
// per GPU, 3.5 GiB through its proxy) the count turns negative once 2 GiB completed — after
// 2048 steps over 7 connections, ~293 each — and the call retires there: every connection
// stalls mid-call, recvTail ahead of sendHead. An unsigned counter passes at this size (3.5 GiB
// < 4 GiB) and at 8 GiB per GPU wraps and never retires: it hangs after the last step.
TEST(CeStall, H3ThirtyTwoBitCallByteCounter) {
  CeRunConfig c = stall_case();
  c.step_bytes = 1 << 20;
  c.bytes = 512 * c.step_bytes;
  c.proxy_counter_bits = 31;
  CeRunResult r = run_ce(c, opts(1));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  EXPECT_NE(r.run.report.find("gpu0 send proxy: call retired; completed 21"), std::string::npos) << r.run.report;
  int stalled = 0;
  for (size_t at = r.run.report.find("send proxy at step "); at != std::string::npos; at = r.run.report.find("send proxy at step ", at + 1)) {
    const uint64_t step = std::strtoull(r.run.report.c_str() + at + 19, nullptr, 10);
    EXPECT_GE(step, 285u);  // 2048 steps over 7 connections, unevenly (288..298 at this seed)
    EXPECT_LE(step, 300u);
    ++stalled;
  }
  EXPECT_EQ(stalled, 56);  // every connection, mid-call
  c.proxy_counter_bits = 32;
  EXPECT_EQ(run_ce(c, opts(1)).failure, "");
  c.bytes = 1024 * c.step_bytes;
  r = run_ce(c, opts(1));
  ASSERT_EQ(r.run.outcome, gpu_sim::Outcome::kHang) << r.failure;
  EXPECT_NE(r.run.report.find("gpu0 send proxy: call not retired; completed 7516192768 of 7516192768 B, its uint32_t counter reads 3221225472"),
            std::string::npos)
      << r.run.report;
  c.proxy_counter_bits = 0;  // the fix: 64 bits
  EXPECT_EQ(run_ce(c, opts(1)).failure, "");
}

struct Case {
  CeRunConfig c;
  bool pct = false;
  bool weak = false;
};

void showValue(const Case& k, std::ostream& os) {
  os << "gpus=" << k.c.gpus << " alltoall=" << k.c.alltoall << " direct=" << k.c.direct << " bytes=" << k.c.bytes << " step=" << k.c.step_bytes
     << " copy_step=" << k.c.copy_bytes_per_step << " seed=" << k.c.seed << " pct=" << k.pct << " weak=" << k.weak;
}

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case k;
    k.c.gpus = *rc::gen::inRange(2u, 5u);
    k.c.alltoall = *rc::gen::arbitrary<bool>();
    k.c.step_bytes = *rc::gen::element<uint64_t>(8, 64, 96, 512);
    k.c.bytes = *rc::gen::inRange<uint64_t>(1, 20 * k.c.step_bytes);
    k.c.copy_bytes_per_step = *rc::gen::element<uint64_t>(8, 64, 1 << 20);
    k.c.direct = *rc::gen::arbitrary<bool>();
    k.c.seed = *rc::gen::arbitrary<uint64_t>();
    k.pct = *rc::gen::arbitrary<bool>();
    k.weak = *rc::gen::arbitrary<bool>();
    return k;
  });
}

std::string run_case(const Case& k, const Plants& pl = {}) {
  CeRunConfig c = k.c;
  c.plants = pl;
  return run_ce(c, opts(k.c.seed, k.pct ? Policy::kPct : Policy::kRandom, k.weak ? MemoryModel::kWeak : MemoryModel::kSc)).failure;
}

// No slot is overwritten before it was consumed, every byte arrives once, in order.
RC_GTEST_PROP(CeTransportProperty, FifoDeliversEveryByteOnce, ()) {
  const Case k = *gen_case();
  const std::string why = run_case(k);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

// The property has teeth: each planted bug is found within a few hundred cases.
TEST(CeTransportProperty, FindsPlantedBugs) {
  for (int plant = 0; plant < 2; ++plant) {
    Plants pl;
    (plant == 0 ? pl.sender_ignores_head : pl.tail_before_copy_done) = true;
    const auto r = rc::check(plant == 0 ? "sender ignores head" : "tail before copy done", [&pl] {
      const Case k = *gen_case();
      RC_ASSERT(run_case(k, pl).empty());
    });
    EXPECT_FALSE(r) << (plant == 0 ? "sender ignores head" : "tail before copy done") << " was not found";
  }
}

// The race detector's plants: the receiver hands its slot back (head) and then copies it out,
// or hands it back with a relaxed store. Its reads finish in the same step as the hand-back, and
// the model (as hardware may) never performs a load after a later store, so no schedule and
// no stale value shows a wrong byte; the detector names the race and the flag.
TEST(CeTransportProperty, RaceDetectorFindsASlotReadAfterItWasHandedBack) {
  const std::pair<const char*, bool Plants::*> plants[] = {
      {"receiver reads after head", &Plants::reads_after_head},
      {"receiver hands the slot back relaxed", &Plants::head_relaxed},
  };
  for (const auto& [name, plant] : plants) {
    Plants pl;
    pl.*plant = true;
    const std::string seen = testing::first_failure(name, [&pl] { return run_case(*gen_case(), pl); });
    EXPECT_FALSE(seen.empty()) << name << " was not found";
    EXPECT_NE(seen.find("data race"), std::string::npos) << name << ": " << seen;
    EXPECT_NE(seen.find("->gpu"), std::string::npos) << name << ": " << seen;  // a connection word named
  }
}

// Protocol positions, named when broken: the tail passes a step only once its copy completed
// (a proxy waiting on the step before's event: wrong bytes in 281 of 300 cases before, now the
// rule); a slot is handed back only with its size freed (a receiver that leaves it set: no
// wrong byte ever, it only hides a later missing stage; now the rule, in SC runs).
TEST(CeTransportProperty, PositionRulesNameWhatBrokeThem) {
  const std::tuple<const char*, bool Plants::*, const char*> plants[] = {
      {"tail on the step before's event", &Plants::tail_on_previous_event, "had not completed (a step lands, then its tail)"},
      {"slot handed back with its size set", &Plants::size_not_freed, "size still set (a slot is freed, then handed back)"},
  };
  for (const auto& [name, plant, rule] : plants) {
    Plants pl;
    pl.*plant = true;
    const std::string seen = testing::first_failure(name, [&pl] {
      Case k = *gen_case();
      k.weak = false;
      return run_case(k, pl);
    });
    EXPECT_FALSE(seen.empty()) << name << " was not found";
    EXPECT_NE(seen.find(rule), std::string::npos) << name << ": " << seen;
  }
}

}  // namespace
}  // namespace doorbell::p2p
