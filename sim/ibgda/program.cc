#include "sim/ibgda/program.h"

#include <algorithm>

#include "sim/ibgda/model_world.h"
#include "sim/ibgda/workload.h"

namespace doorbell::ibgda {

std::string run_program(const Program& p, gpu_sim::SchedOptions so, RecoveryStats* stats, Processes procs, WorldPool* pool) {
  using Kind = ProgramOpKind;
  WorldConfig c = world_config(p.stack, p.npes, p.seed);
  c.fast_step_actions = p.fast_step_actions;
  c.heap.heap_bytes = p.heap_bytes;
  c.heap.granularity = 4096;  // many chunks: splits everywhere, keys beyond the constant table
  c.heap.max_handle_bytes = 64 << 10;
  if (p.stack.failover) c.failover_threads = p.warps * p.lanes;  // else not part of the world (a pool shares it)
  c.procs = procs;
  std::unique_ptr<ModelWorld> own;
  ModelWorld* wp = nullptr;
  if (pool != nullptr) {
    Result<ModelWorld*> w = pool->get(c);
    if (!w) return w.status().to_string();
    wp = *w;
  } else {
    Result<std::unique_ptr<ModelWorld>> w = ModelWorld::create(c);
    if (!w) return w.status().to_string();
    own = std::move(*w);
    wp = own.get();
  }
  ModelWorld& world = *wp;
  if (p.plant_gpu_scope_fences)
    for (uint32_t pe = 0; pe < p.npes; ++pe)
      if (world.local(pe)) world.state(pe).opt.nic_buf_on_gpumem = true;
  // The program as a workload: op i names its caller (a thread, a warp, the CTA); counter
  // words 0.. take adds, words kProgramCounters.. compare-swaps.
  Workload wl;
  wl.shape = {1, p.warps, p.lanes};
  wl.seed = p.seed;
  wl.ops.reserve(p.ops.size());
  for (const ProgramOp& po : p.ops) {
    Op o;
    o.pe = po.pe, o.target = po.target, o.bytes = po.bytes, o.src = po.src;
    o.scope = po.scope == ProgramScope::kThread ? Scope::kThread : po.scope == ProgramScope::kWarp ? Scope::kWarp : Scope::kBlock;
    o.warp = o.scope == Scope::kBlock ? -1 : int32_t(po.warp);
    o.lane = o.scope == Scope::kThread ? int32_t(po.lane) : -1;
    o.value = po.add, o.compare = po.compare, o.word = po.counter;
    o.amo = po.amo, o.width = po.width, o.signal_add = po.signal_add;
    switch (po.kind) {
      case Kind::kPut: o.kind = OpKind::kPut; break;
      case Kind::kGet: o.kind = OpKind::kGet; break;
      case Kind::kFetchAdd: o.kind = OpKind::kFetchAdd; break;
      case Kind::kAdd: o.kind = OpKind::kAdd; break;
      case Kind::kCompareSwap: o.kind = OpKind::kCompareSwap, o.word = kProgramCounters + po.counter; break;
      case Kind::kAmo: o.kind = OpKind::kAmo, o.word = 2 * kProgramCounters + po.counter; break;
      case Kind::kPutSignal: o.kind = OpKind::kPutSignal; break;
      case Kind::kP: o.kind = OpKind::kP; break;
      case Kind::kG: o.kind = OpKind::kG; break;
    }
    wl.ops.push_back(o);
  }
  wl.src = *world.malloc(kProgramRo), wl.src_bytes = kProgramRo;
  wl.words = *world.malloc((2 * kProgramCounters + kProgramAmoWords) * 8);
  for (const Op& o : wl.ops) wl.slot = std::max<uint64_t>(wl.slot, (o.bytes + 63) / 64 * 64);  // the largest op's bytes
  wl.dst = *world.malloc(wl.dst_bytes());
  wl.sigs = *world.malloc(wl.sig_bytes());
  world.inject(p.faults);
  const std::string why = run_workload(world, wl, so, p.check_each_step);
  if (stats != nullptr) *stats = world.recovery_stats();
  return why;
}

}  // namespace doorbell::ibgda
