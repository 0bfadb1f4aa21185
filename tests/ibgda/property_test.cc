// Property: random IBGDA programs (PEs x warps x lanes, each thread running its own list of
// put / get / fetch-add / add of random sizes to random PEs, transfers crossing 4 KiB heap
// chunks) leave memory equal to a sequential reference after quiet, under random and PCT
// schedules, with random queue depth, batch size, CPU-proxy choice and late NIC responses;
// the queue-index invariants are checked by an agent all along, and nothing may hang.
// Every op writes its own destination slot, so the reference does not depend on order.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

#include "core/ibgda/host/model_world.h"
#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::ibgda {
namespace {

using gpu_sim::Outcome;
using gpu_sim::Policy;
using gpu_sim::SimCtx;

constexpr uint64_t kRo = 16 << 10;   // read-only source region per PE
constexpr uint64_t kSlot = 3072;     // destination slot per op
constexpr uint32_t kCounters = 4;

enum class Kind : uint8_t { kPut, kGet, kFetchAdd, kAdd };

struct Op {
  uint32_t pe = 0, warp = 0, lane = 0;  // who runs it
  Kind kind = Kind::kPut;
  uint32_t target = 0;
  uint32_t bytes = 1;
  uint32_t src = 0;                     // offset in the read-only region
  uint32_t counter = 0, add = 1;
};

struct Program {
  uint32_t npes = 2, warps = 1, lanes = 1;
  uint32_t log_depth = 4, batch_log = 2, ibuf_slots = 8;
  bool cpu_proxy = false, pct = false;
  uint32_t delay = 0;
  uint64_t seed = 1;
  std::vector<Op> ops;
};

void showValue(const Program& p, std::ostream& os) {
  os << "npes=" << p.npes << " warps=" << p.warps << " lanes=" << p.lanes << " depth=" << (1u << p.log_depth)
     << " batch=" << (1u << p.batch_log) << " ibuf=" << p.ibuf_slots << " proxy=" << p.cpu_proxy << " pct=" << p.pct << " delay=" << p.delay
     << " seed=" << p.seed << "\n";
  for (const Op& o : p.ops)
    os << "  pe" << o.pe << "/w" << o.warp << "/l" << o.lane << " kind=" << int(o.kind) << " -> pe" << o.target
       << " bytes=" << o.bytes << " src=" << o.src << " ctr=" << o.counter << "\n";
}

rc::Gen<Program> gen_program() {
  return rc::gen::exec([] {
    Program p;
    p.npes = *rc::gen::inRange(2u, 4u);
    p.warps = *rc::gen::inRange(1u, 3u);
    p.lanes = *rc::gen::inRange(1u, 4u);
    p.log_depth = *rc::gen::inRange(3u, 7u);
    p.ibuf_slots = *rc::gen::element(1u, 2u, 8u);
    p.batch_log = *rc::gen::inRange(0u, 7u);
    p.cpu_proxy = *rc::gen::arbitrary<bool>();
    p.pct = *rc::gen::arbitrary<bool>();
    p.delay = *rc::gen::element(0u, 0u, 20u);
    p.seed = *rc::gen::arbitrary<uint64_t>();
    const uint32_t n = *rc::gen::inRange(1u, 60u);
    for (uint32_t i = 0; i < n; ++i) {
      Op o;
      o.pe = *rc::gen::inRange(0u, p.npes);
      o.warp = *rc::gen::inRange(0u, p.warps);
      o.lane = *rc::gen::inRange(0u, p.lanes);
      o.kind = Kind(*rc::gen::inRange(0, 4));
      o.target = *rc::gen::inRange(0u, p.npes);
      o.bytes = *rc::gen::inRange(1u, uint32_t(kSlot) + 1);
      o.src = *rc::gen::inRange(0u, uint32_t(kRo) - o.bytes + 1);
      o.counter = *rc::gen::inRange(0u, kCounters);
      o.add = *rc::gen::inRange(1u, 1000u);
      p.ops.push_back(o);
    }
    return p;
  });
}

struct Result {
  bool ok = true;
  std::string why;
};

Result run(const Program& p) {
  WorldConfig c;
  c.npes = p.npes;
  c.log_qp_depth = p.log_depth;
  c.opt.num_requests_in_batch = 1u << p.batch_log;
  c.opt.cpu_proxy = p.cpu_proxy;
  c.ibuf_slots = p.ibuf_slots;
  c.response_delay_max = p.delay;
  c.seed = p.seed;
  c.heap.heap_bytes = 8ull << 20;
  c.heap.granularity = 4096;  // many chunks: splits everywhere, keys beyond the constant table
  c.heap.max_handle_bytes = 64 << 10;
  auto w = ModelWorld::create(c);
  if (!w) return {false, w.status().to_string()};
  ModelWorld& world = **w;
  const uint64_t ro = *world.malloc(kRo), ctr = *world.malloc(kCounters * 8), dst = *world.malloc(p.ops.size() * kSlot);
  std::mt19937_64 rng(p.seed);
  for (uint32_t pe = 0; pe < p.npes; ++pe)
    for (uint64_t i = 0; i < kRo; ++i) world.at(pe, ro)[i] = uint8_t(rng());
  // Each thread's op list, in program order; op i writes slot i.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<size_t>> mine;
  for (size_t i = 0; i < p.ops.size(); ++i) mine[{p.ops[i].pe, p.ops[i].warp, p.ops[i].lane}].push_back(i);
  std::vector<uint64_t> fetched(p.ops.size(), ~0ull);
  gpu_sim::SchedOptions so;
  so.seed = p.seed;
  so.policy = p.pct ? Policy::kPct : Policy::kRandom;
  so.hang_spins = 512;
  gpu_sim::Scheduler s(so);
  for (uint32_t pe = 0; pe < p.npes; ++pe) {
    DevState* st = &world.state(pe);
    s.launch("pe" + std::to_string(pe), {1, p.warps, p.lanes}, [&, st, pe](SimCtx& ctx) {
      auto it = mine.find({pe, ctx.warp(), ctx.lane()});
      if (it != mine.end())
        for (size_t i : it->second) {
          const Op& o = p.ops[i];
          const uint64_t slot = dst + i * kSlot;
          OpResult r = OpResult::kOk;
          switch (o.kind) {
            case Kind::kPut: r = put_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target); break;
            case Kind::kGet: r = get_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target); break;
            case Kind::kFetchAdd: r = atomic_fetch_add(ctx, *st, ctr + o.counter * 8, o.add, o.target, &fetched[i]); break;
            case Kind::kAdd: r = atomic_add(ctx, *st, ctr + o.counter * 8, o.add, o.target); break;
          }
          if (r != OpResult::kOk) return;
        }
      (void)quiet_all(ctx, *st);
    });
  }
  std::string violation;
  s.add_agent("invariants", [&](gpu_sim::AgentCtx& a) {
    for (;;) {
      a.point();
      if (violation.empty()) violation = world.check_invariants();
      if (!a.spin("invariant checker")) return;
    }
  });
  world.attach(s);
  const gpu_sim::RunResult r = s.run();
  if (r.outcome != Outcome::kCompleted) return {false, r.report};
  if (!violation.empty()) return {false, "invariant: " + violation};
  if (std::string e = world.first_error(); !e.empty()) return {false, e};
  // Reference.
  std::vector<std::vector<uint64_t>> sums(p.npes, std::vector<uint64_t>(kCounters));
  std::map<std::pair<uint32_t, uint32_t>, std::set<uint64_t>> olds;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    const uint8_t* got = nullptr;
    const uint8_t* want = world.at(o.target, ro + o.src);
    if (o.kind == Kind::kPut) got = world.at(o.target, dst + i * kSlot), want = world.at(o.pe, ro + o.src);
    if (o.kind == Kind::kGet) got = world.at(o.pe, dst + i * kSlot);
    if (got != nullptr && std::memcmp(got, want, o.bytes) != 0) return {false, "op " + std::to_string(i) + ": data differs"};
    if (o.kind == Kind::kFetchAdd || o.kind == Kind::kAdd) sums[o.target][o.counter] += o.add;
    if (o.kind == Kind::kFetchAdd && !olds[{o.target, o.counter}].insert(fetched[i]).second)
      return {false, "op " + std::to_string(i) + ": fetched a previous value twice"};
  }
  for (uint32_t pe = 0; pe < p.npes; ++pe)
    for (uint32_t k = 0; k < kCounters; ++k)
      if (*reinterpret_cast<uint64_t*>(world.at(pe, ctr + k * 8)) != sums[pe][k])
        return {false, "counter " + std::to_string(k) + " on pe " + std::to_string(pe) + " wrong"};
  return {};
}

RC_GTEST_PROP(IbgdaProperty, MemoryEqualsSequentialReferenceAfterQuiet, ()) {
  const Program p = *gen_program();
  const Result r = run(p);
  RC_LOG() << r.why;
  RC_ASSERT(r.ok);
}

}  // namespace
}  // namespace doorbell::ibgda
