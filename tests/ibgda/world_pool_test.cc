// A rewound world must run a program exactly as a fresh one does (WorldPool, queue_fuzz):
// same verdict, same schedule (every scheduling choice offered the same runnable agents) and
// the same NIC state, management words and heap bytes at the end — whatever program ran on it
// before. Anything a rewind forgets to put back shows up as a difference here.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <random>
#include <sstream>

#include "core/ibgda/queue.h"
#include "sim/ibgda/program.h"
#include "sim/ibgda/world_pool.h"
#include "tests/ibgda/program_gen.h"

namespace doorbell::ibgda {
namespace {

// What a run leaves: its verdict, the number of agents each scheduling choice had, and the
// world's state afterwards (heap bytes up to `heap_bytes`; a rewound heap may have more mapped
// from earlier runs, which must then be zero, or less: a fresh heap grows with alignment slack
// that one already grown by another program may not need, and bytes not mapped read as zero).
struct Outcome {
  std::string why;
  std::vector<size_t> choices;
  std::string state;
  bool operator==(const Outcome&) const = default;
};

// (Untimed schedules only: a NIC's clock is then the world's step clock.)
std::string world_state(ModelWorld& w, uint64_t heap_bytes) {
  std::ostringstream os;
  for (uint32_t pe = 0; pe < w.config().npes; ++pe) {
    const DevState& st = w.state(pe);
    for (uint32_t i = 0; i < qps_per_set(st); ++i) {
      const DevQp& q = st.qps[i];
      const mock_nic::Nic& nic = w.nic(pe, q.dev);
      const mock_nic::Qp& nq = *nic.qp(q.qpn);
      const mock_nic::Cq& cq = *nic.cq(nq.attr.send_cqn);
      os << "pe" << pe << " qp" << i << ":";
      for (const MvarWord& m : kMvarWords) os << " " << q.mv->*m.word;
      os << " nic " << int(nq.state) << " " << nq.head << " " << nq.prod << " " << nq.rcv_upto << " " << nq.stats.wqes << " "
         << nq.stats.bytes << " " << nq.stats.doorbells << " " << nq.inflight.size() << " cq " << cq.pi << " " << cq.cqes_written
         << " dbr " << *q.dbr << "\n";
    }
    for (uint32_t d = 0; d < w.config().num_nics; ++d)
      os << "nic" << pe << "." << d << " now " << w.nic(pe, d).now() << " clock " << w.nic(pe, d).clock_ns() << " moved " << w.nic(pe, d).bytes_moved() << " errors "
         << w.nic(pe, d).errors().size() << "\n";
    const uint8_t* h = w.at(pe, 0);
    uint64_t hash = 1469598103934665603ull;
    for (uint64_t i = 0; i < heap_bytes; ++i) hash = (hash ^ (i < w.heap().mapped() ? h[i] : 0)) * 1099511628211ull;
    bool zero_beyond = true;
    for (uint64_t i = heap_bytes; i < w.heap().mapped(); ++i) zero_beyond = zero_beyond && h[i] == 0;
    os << "heap" << pe << " " << hash << (zero_beyond ? "" : " (bytes beyond the fresh world's heap)") << "\n";
  }
  os << "first error: " << w.first_error() << "\n";
  return os.str();
}

// Run `p` from `pool` under a scripted schedule drawn from `seed`.
Outcome run(const Program& p, WorldPool& pool, uint64_t seed, uint64_t heap_bytes) {
  Outcome o;
  std::mt19937_64 rng(seed);
  gpu_sim::SchedOptions so;
  so.policy = gpu_sim::Policy::kScripted;
  so.choose = [&](size_t n) {
    o.choices.push_back(n);
    return size_t(rng() % n);
  };
  so.hang_spins = 256;
  o.why = run_program(p, so, nullptr, {}, &pool);
  o.state = world_state(*pool.newest(), heap_bytes);
  return o;
}

// A world shape (PEs, NICs, QPs, depth, ibufs, layout) with response delays of up to `delay`.
Program gen_shape(uint32_t delay) {
  Program shape;
  shape.npes = *rc::gen::inRange(2u, 4u);
  shape.stack.log_qp_depth = *rc::gen::inRange(2u, 6u);
  shape.stack.ibuf_slots = *rc::gen::element(1u, 2u, 4u);
  shape.stack.num_rc_per_pe = *rc::gen::inRange(1u, 3u);
  shape.stack.nics_per_pe = *rc::gen::inRange(1u, 3u);
  shape.stack.pe_major = *rc::gen::arbitrary<bool>();
  shape.stack.response_delay = delay;
  shape.heap_bytes = 1ull << 20;
  return shape;
}

// A program of the same world shape as `shape` (PEs, NICs, QPs, depth, ibufs, layout), with
// its own threads, batch, proxy choice, start index and operations.
Program gen_program(const Program& shape) {
  Program p = shape;
  p.warps = *rc::gen::inRange(1u, 3u);
  p.lanes = *rc::gen::inRange(1u, 4u);
  p.stack.num_requests_in_batch = 1u << *rc::gen::inRange(0u, 6u);
  p.stack.cpu_proxy = *rc::gen::arbitrary<bool>();
  p.stack.start_index = gen_start_index();
  p.ops.clear();
  gen_ops(p, *rc::gen::inRange(1u, 25u));
  return p;
}

RC_GTEST_PROP(WorldPool, ARewoundWorldRunsAProgramAsAFreshOneDoes, ()) {
  const Program shape = gen_shape(*rc::gen::element(0u, 20u));
  const Program before = gen_program(shape), p = gen_program(shape);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();

  WorldPool fresh;
  const Outcome first = run(p, fresh, seed, 0);
  const uint64_t mapped = fresh.newest()->heap().mapped();
  const Outcome want = run(p, fresh, seed, mapped);  // (the state again, now with the heap's bytes)
  RC_ASSERT(fresh.built() == 1u);
  WorldPool pool;
  (void)run(before, pool, seed + 1, 0);
  const Outcome got = run(p, pool, seed, mapped);
  RC_ASSERT(pool.built() == 1u);
  RC_LOG() << "fresh:\n" << want.state << "rewound:\n" << got.state << want.why << " | " << got.why;
  RC_ASSERT(first.why == want.why);
  RC_ASSERT(got == want);
}

// Fast mode lets a NIC step run up to 256 engine actions while no NIC's work depends on time
// (ModelWorld::untimed); such a step must end as that many one-action steps do: the same
// verdict, NIC state, step clock, management words and heap bytes.
RC_GTEST_PROP(WorldPool, AFastStepOfManyActionsEndsAsManyStepsOfOne, ()) {
  Program p = gen_program(gen_shape(*rc::gen::element(0u, 0u, 0u, 20u)));  // a delay makes the NICs timed: one action a step
  gpu_sim::SchedOptions so;
  so.policy = gpu_sim::Policy::kRunToCompletion;
  so.hang_spins = 256;
  Outcome many, one;
  for (Outcome* o : {&many, &one}) {
    p.fast_step_actions = o == &many ? 256 : 1;
    WorldPool pool;
    o->why = run_program(p, so, nullptr, {}, &pool);
    o->state = world_state(*pool.newest(), pool.newest()->heap().mapped());
  }
  RC_LOG() << "256 actions a step:\n" << many.state << "1 action a step:\n" << one.state << many.why << " | " << one.why;
  RC_ASSERT(many == one);
}

}  // namespace
}  // namespace doorbell::ibgda

namespace doorbell::ibgda {
namespace {

// A hang report names every management word of every QP with its value — the world's table,
// named once — on the world's first run and on a rewound one alike.
TEST(WorldPool, HangReportsNameEveryManagementWord) {
  Program p;
  p.npes = 2;
  p.stack.plant.no_idle_doorbell = true;  // the last submitter of a burst does not ring: a hang
  p.ops.push_back({});               // pe 0 puts 1 byte to pe 0
  gpu_sim::SchedOptions so;
  so.hang_spins = 64;
  WorldPool pool;
  for (int run = 0; run < 2; ++run) {
    const std::string why = run_program(p, so, nullptr, {}, &pool);
    EXPECT_NE(why.find("hang"), std::string::npos) << why;
    for (const char* word : {"pe0.qp0.resv_head=1", "pe0.qp0.prod_idx=0", "pe0.qp0.proxy_prod=0", "pe1.qp1.cons_idx=0", "pe0.qp1.cqe="})
      EXPECT_NE(why.find(word), std::string::npos) << word << " in\n" << why;
  }
  EXPECT_EQ(pool.built(), 1u);
}

}  // namespace
}  // namespace doorbell::ibgda
