#include "sim/ibgda/program.h"

#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "sim/ibgda/atomic_check.h"
#include "sim/ibgda/model_world.h"
#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::ibgda {

std::string run_program(const Program& p, gpu_sim::SchedOptions so, RecoveryStats* stats) {
  using Kind = ProgramOpKind;
  WorldConfig c;
  c.npes = p.npes;
  c.num_rc_per_pe = p.num_rc_per_pe;
  c.num_nics = p.num_nics;
  c.layout = p.pe_major ? QpLayout::kPeMajor : QpLayout::kQpMajor;
  c.log_qp_depth = p.log_depth;
  c.opt.num_requests_in_batch = 1u << p.batch_log;
  c.opt.cpu_proxy = p.cpu_proxy;
  c.nic_buf_on_gpumem = p.nic_buf_on_gpumem;
  c.opt.plant = p.plant;
  c.ibuf_slots = p.ibuf_slots;
  c.response_delay_max = p.delay;
  c.seed = p.seed;
  c.start_index = p.start_index;
  c.heap.heap_bytes = p.heap_bytes;
  c.heap.granularity = 4096;  // many chunks: splits everywhere, keys beyond the constant table
  c.heap.max_handle_bytes = 64 << 10;
  c.failover = p.failover;
  c.failover_threads = p.warps * p.lanes;
  c.rts.ack_timeout = uint8_t(p.ack_timeout);
  c.rts.retry_count = uint8_t(p.retry_count);
  auto w = ModelWorld::create(c);
  if (!w) return w.status().to_string();
  ModelWorld& world = **w;
  if (p.plant_gpu_scope_fences)
    for (uint32_t pe = 0; pe < p.npes; ++pe) world.state(pe).opt.nic_buf_on_gpumem = true;
  const uint64_t ro = *world.malloc(kProgramRo), ctr = *world.malloc(2 * kProgramCounters * 8),
                 dst = *world.malloc(p.ops.size() * kProgramSlot);
  std::mt19937_64 rng(p.seed);
  for (uint32_t pe = 0; pe < p.npes; ++pe)
    for (uint64_t i = 0; i < kProgramRo; i += 8) {  // 8 bytes a draw: fuzz inputs build a world each
      const uint64_t r = rng();
      std::memcpy(world.at(pe, ro) + i, &r, 8);
    }
  // Each thread's op list, in program order; op i writes slot i.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<size_t>> mine;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const ProgramOp& o = p.ops[i];
    for (uint32_t w = 0; w < p.warps; ++w)  // collective ops: in the list of every caller
      for (uint32_t l = 0; l < p.lanes; ++l)
        if ((o.scope == ProgramScope::kThread && w == o.warp && l == o.lane) || (o.scope == ProgramScope::kWarp && w == o.warp) ||
            o.scope == ProgramScope::kBlock)
          mine[{o.pe, w, l}].push_back(i);
  }
  std::vector<uint64_t> fetched(p.ops.size(), ~0ull);
  std::vector<OpResult> results(p.ops.size(), OpResult::kOk);
  std::vector<OpResult> quiets;
  world.inject(p.faults);
  std::string violation;
  if (p.check_each_step) {
    so.observe = [&](uint64_t, double) {
      if (violation.empty()) violation = world.check_invariants();
    };
    so.observe_every = 1;
  }
  gpu_sim::Scheduler s(so);
  for (uint32_t pe = 0; pe < p.npes; ++pe) {
    DevState* st = &world.state(pe);
    s.launch("pe" + std::to_string(pe), {1, p.warps, p.lanes}, [&, st, pe](gpu_sim::SimCtx& ctx) {
      if (auto it = mine.find({pe, ctx.warp(), ctx.lane()}); it != mine.end())
        for (size_t i : it->second) {
          const ProgramOp& o = p.ops[i];
          const uint64_t slot = dst + i * kProgramSlot;
          OpResult r = OpResult::kOk;
          switch (o.kind) {
            case Kind::kPut:
              // A collective is called by converged callers (as CUDA requires): otherwise a lane
              // still inside an earlier op can wait on a reservation the collective holds.
              if (o.scope == ProgramScope::kWarp) ctx.syncwarp();
              if (o.scope == ProgramScope::kBlock) ctx.sync_cta();
              r = o.scope == ProgramScope::kWarp    ? put_nbi_warp(ctx, *st, slot, ro + o.src, o.bytes, o.target)
                  : o.scope == ProgramScope::kBlock ? put_nbi_block(ctx, *st, slot, ro + o.src, o.bytes, o.target)
                                                    : put_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target);
              break;
            case Kind::kGet: r = get_nbi(ctx, *st, slot, ro + o.src, o.bytes, o.target); break;
            case Kind::kFetchAdd: r = atomic_fetch_add(ctx, *st, ctr + o.counter * 8, o.add, o.target, &fetched[i]); break;
            case Kind::kAdd: r = atomic_add(ctx, *st, ctr + o.counter * 8, o.add, o.target); break;
            case Kind::kCompareSwap:
              r = atomic_compare_swap(ctx, *st, ctr + (kProgramCounters + o.counter) * 8, o.compare, o.add, o.target, &fetched[i]);
              break;
          }
          results[i] = r;
          if (r != OpResult::kOk && r != OpResult::kResultLost) return;
        }
      const OpResult q = quiet_all(ctx, *st);
      if (q != OpResult::kOk) quiets.push_back(q);
    });
  }
  world.attach(s);
  if (!p.check_each_step) world.check_every_store(s);
  const gpu_sim::RunResult r = s.run();
  if (violation.empty()) violation = s.violation();
  if (violation.empty() && r.outcome == gpu_sim::Outcome::kCompleted) violation = world.check_invariants();  // once more at the end
  // What broke, and what the weak memory model saw read stale (nothing in the SC mode). A
  // broken invariant is the root cause of a hang that follows it.
  auto failed = [&s](const std::string& why) { return why + "\n" + s.memory_report(); };
  if (!violation.empty()) return failed("invariant: " + violation);
  if (r.outcome != gpu_sim::Outcome::kCompleted)
    return std::string(gpu_sim::outcome_name(r.outcome)) + " (" + s.describe() + "):\n" + r.report;
  if (stats != nullptr) *stats = world.recovery_stats();
  // Without failover any error fails the run; with it, only an operation that failed does.
  bool op_failed = !quiets.empty();
  for (OpResult r : results) op_failed |= r != OpResult::kOk && r != OpResult::kResultLost;
  if (!p.failover || op_failed)
    if (std::string e = world.first_error(); !e.empty() || op_failed) return failed("an operation failed: " + e);
  // The sequential reference for puts and gets; for atomics, some order of them all.
  AtomicCheck atomics;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const ProgramOp& o = p.ops[i];
    const uint8_t* got = nullptr;
    const uint8_t* want = world.at(o.target, ro + o.src);
    if (o.kind == Kind::kPut) got = world.at(o.target, dst + i * kProgramSlot), want = world.at(o.pe, ro + o.src);
    if (o.kind == Kind::kGet) got = world.at(o.pe, dst + i * kProgramSlot);
    if (got != nullptr && std::memcmp(got, want, o.bytes) != 0) return failed("op " + std::to_string(i) + ": data differs");
    const std::optional<uint64_t> old = results[i] == OpResult::kOk ? std::optional(fetched[i]) : std::nullopt;
    if (o.kind == Kind::kAdd) atomics.add(o.target, o.counter, o.add);
    if (o.kind == Kind::kFetchAdd) atomics.fetch_add(o.target, o.counter, o.add, old);
    if (o.kind == Kind::kCompareSwap) atomics.compare_swap(o.target, kProgramCounters + o.counter, o.compare, o.add, old);
  }
  if (std::string bad = atomics.check([&](uint32_t pe, uint32_t w) { return *reinterpret_cast<uint64_t*>(world.at(pe, ctr + w * 8)); });
      !bad.empty())
    return failed("atomics: " + bad);
  return {};
}

}  // namespace doorbell::ibgda
