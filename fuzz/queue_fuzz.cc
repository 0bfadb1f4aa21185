// Target 2: reserve / submit / post / poll from several agents. The input decodes a small
// IBGDA program (sim/ibgda/program.h: PEs, warps, lanes, queue depth, batch size, proxy
// or BlueFlame, where the counters begin, each thread's puts / gets / fetch-adds / adds, then quiet) and, from its
// remaining bytes, the schedule: which runnable agent (lane, NIC engine, proxy) moves next.
// Each input runs on a world of its shape taken from a pool and rewound (ModelWorld::rewind),
// as on a fresh one: building a world was most of an input's time.
// run_program checks the queue-index invariants at each change of a QP's words, no hang, no error CQE, and
// memory equal to the sequential reference.
#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

#include "sim/ibgda/program_draw.h"
#include "fuzz/check.h"

using namespace doorbell;
using namespace doorbell::ibgda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Program p;
  p.npes = in.ConsumeIntegralInRange<uint32_t>(2, 3);
  p.warps = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  p.lanes = in.ConsumeIntegralInRange<uint32_t>(1, 3);
  p.stack.log_qp_depth = in.ConsumeIntegralInRange<uint32_t>(2, 5);
  p.stack.num_requests_in_batch = 1u << in.ConsumeIntegralInRange<uint32_t>(0, 5);
  p.stack.cpu_proxy = in.ConsumeBool();
  p.stack.ibuf_slots = 1u << in.ConsumeIntegralInRange<uint32_t>(0, 2);
  p.stack.num_rc_per_pe = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  p.stack.nics_per_pe = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  p.stack.pe_major = in.ConsumeBool();
  // Every draw from the input: a value in [lo, hi).
  auto draw = [&in](uint32_t lo, uint32_t hi) { return in.ConsumeIntegralInRange<uint32_t>(lo, hi - 1); };
  auto pick = [&draw](uint32_t n) { return draw(0, n); };
  p.stack.start_index = draw_start_index(draw, pick);
#ifdef DOORBELL_PLANT
  p.stack.plant.no_idle_doorbell = true;  // planted: the last submitter of a burst does not ring
#endif
  p.heap_bytes = 1ull << 20;  // fits 24 ops: smaller heaps make more runs per second
  p.check_each_step = false;  // the invariants at each change of a QP's words, as replay checks them
  draw_ops(p, draw(1, 25), draw, pick, 512);
  // The schedule: one input byte per choice; then round-robin, so a short input still ends.
  const std::vector<uint8_t> script = in.ConsumeRemainingBytes<uint8_t>();
  gpu_sim::SchedOptions so;
  so.policy = gpu_sim::Policy::kScripted;
  so.script = script;
  so.park_idle = true;  // an idle NIC engine takes no turns: every script byte moves something
  so.hang_spins = 256;
  so.max_steps = 2'000'000;
  static WorldPool pool(256);  // a world per shape (there are 192), rewound for each input of that shape
  const std::string why = run_program(p, so, nullptr, {}, &pool);
  FUZZ_CHECK(why.empty(), "under a schedule script of %zu bytes: %s", script.size(), why.c_str());
  return 0;
}
