// Target 2: reserve / submit / post / poll from several agents. The input decodes a small
// IBGDA program (PEs, warps, lanes, queue depth, batch size, proxy or BlueFlame, each
// thread's puts / gets / fetch-adds, then quiet) and, from its remaining bytes, the schedule:
// which runnable agent (lane, NIC engine, proxy) moves next. Checked: the queue-index
// invariants after every step, no hang, no error CQE, and memory equal to the sequential
// reference (every op owns its destination slot; fetch-adds sum and never fetch twice).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/ibgda/host/model_world.h"
#include "core/ibgda/ops.h"
#include "fuzz/check.h"
#include "hw/gpu_sim/sim_ctx.h"

using namespace doorbell;
using namespace doorbell::ibgda;

namespace {

constexpr uint64_t kRo = 4096, kSlot = 512;

enum class Kind : uint8_t { kPut, kGet, kFetchAdd };

struct Op {
  uint32_t pe, warp, lane, target, bytes, src;
  Kind kind;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  WorldConfig c;
  c.npes = in.ConsumeIntegralInRange<uint32_t>(2, 3);
  const uint32_t warps = in.ConsumeIntegralInRange<uint32_t>(1, 2), lanes = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  c.log_qp_depth = in.ConsumeIntegralInRange<uint32_t>(2, 5);
  c.opt.num_requests_in_batch = 1u << in.ConsumeIntegralInRange<uint32_t>(0, 5);
  c.opt.cpu_proxy = in.ConsumeBool();
  c.ibuf_slots = 1u << in.ConsumeIntegralInRange<uint32_t>(0, 2);
#ifdef DOORBELL_PLANT
  c.opt.plant_no_idle_doorbell = true;  // planted: the last submitter of a burst does not ring
#endif
  c.heap.heap_bytes = 1ull << 20;
  c.heap.granularity = 4096;
  c.heap.max_handle_bytes = 64 << 10;
  std::vector<Op> ops(in.ConsumeIntegralInRange<size_t>(1, 24));
  for (Op& o : ops) {
    o.pe = in.ConsumeIntegralInRange<uint32_t>(0, c.npes - 1);
    o.warp = in.ConsumeIntegralInRange<uint32_t>(0, warps - 1);
    o.lane = in.ConsumeIntegralInRange<uint32_t>(0, lanes - 1);
    o.target = in.ConsumeIntegralInRange<uint32_t>(0, c.npes - 1);
    o.kind = Kind(in.ConsumeIntegralInRange<int>(0, 2));
    o.bytes = in.ConsumeIntegralInRange<uint32_t>(1, kSlot);
    o.src = in.ConsumeIntegralInRange<uint32_t>(0, kRo - o.bytes);
  }
  auto w = ModelWorld::create(c);
  FUZZ_CHECK(w.is_ok(), "world: %s", w.status().to_string().c_str());
  ModelWorld& world = **w;
  const uint64_t ro = *world.malloc(kRo), ctr = *world.malloc(8), dst = *world.malloc(ops.size() * kSlot);
  for (uint32_t pe = 0; pe < c.npes; ++pe)
    for (uint64_t i = 0; i < kRo; ++i) world.at(pe, ro)[i] = uint8_t(i * 131 + pe * 7 + 1);
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<size_t>> mine;
  for (size_t i = 0; i < ops.size(); ++i) mine[{ops[i].pe, ops[i].warp, ops[i].lane}].push_back(i);
  std::vector<uint64_t> fetched(ops.size(), ~0ull);

  // The schedule: one input byte per choice; then round-robin, so a short input still ends.
  const std::vector<uint8_t> script = in.ConsumeRemainingBytes<uint8_t>();
  size_t pos = 0, rr = 0;
  gpu_sim::SchedOptions so;
  so.policy = gpu_sim::Policy::kScripted;
  so.choose = [&](size_t n) { return pos < script.size() ? size_t(script[pos++]) % n : rr++ % n; };
  so.hang_spins = 256;
  so.max_steps = 2'000'000;
  std::string violation;
  so.observe = [&](uint64_t, double) {
    if (violation.empty()) violation = world.check_invariants();
  };
  gpu_sim::Scheduler s(so);
  for (uint32_t pe = 0; pe < c.npes; ++pe) {
    DevState* st = &world.state(pe);
    s.launch("pe" + std::to_string(pe), {1, warps, lanes}, [&, st, pe](gpu_sim::SimCtx& ctx) {
      if (auto it = mine.find({pe, ctx.warp(), ctx.lane()}); it != mine.end())
        for (size_t i : it->second) {
          const Op& o = ops[i];
          const uint64_t slot = dst + i * kSlot;
          OpResult r = OpResult::kOk;
          switch (o.kind) {
            case Kind::kPut: r = put_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target); break;
            case Kind::kGet: r = get_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target); break;
            case Kind::kFetchAdd: r = atomic_fetch_add(ctx, *st, ctr, o.bytes, o.target, &fetched[i]); break;
          }
          if (r != OpResult::kOk) return;
        }
      (void)quiet_all(ctx, *st);
    });
  }
  world.attach(s);
  const gpu_sim::RunResult r = s.run();
  FUZZ_CHECK(r.outcome == gpu_sim::Outcome::kCompleted, "%s after %zu scripted choices:\n%s",
             gpu_sim::outcome_name(r.outcome), pos, r.report.c_str());
  FUZZ_CHECK(violation.empty(), "invariant: %s", violation.c_str());
  const std::string err = world.first_error();
  FUZZ_CHECK(err.empty(), "error CQE: %s", err.c_str());
  std::vector<uint64_t> sums(c.npes);
  std::map<uint32_t, std::set<uint64_t>> olds;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (o.kind == Kind::kFetchAdd) {
      sums[o.target] += o.bytes;
      FUZZ_CHECK(olds[o.target].insert(fetched[i]).second, "op %zu fetched a previous value twice", i);
      continue;
    }
    const uint8_t* got = world.at(o.kind == Kind::kPut ? o.target : o.pe, dst + i * kSlot);
    const uint8_t* want = world.at(o.kind == Kind::kPut ? o.pe : o.target, ro + o.src);
    FUZZ_CHECK(std::memcmp(got, want, o.bytes) == 0, "op %zu (%s of %u bytes): data differs", i,
               o.kind == Kind::kPut ? "put" : "get", o.bytes);
  }
  for (uint32_t pe = 0; pe < c.npes; ++pe)
    FUZZ_CHECK(*reinterpret_cast<uint64_t*>(world.at(pe, ctr)) == sums[pe], "counter on pe %u wrong", pe);
  return 0;
}
