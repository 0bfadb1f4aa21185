#include "scenarios/replay/replay_ibgda.h"

#include <algorithm>
#include <cstdio>

#include "hw/trace/perfetto.h"
#include "sim/ibgda/stack.h"

namespace doorbell::scenario {

using namespace doorbell::ibgda;

namespace {
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

IbgdaReplay::IbgdaReplay(const Scenario& s, const IbgdaWorkload& wk, const RunSpec& sp, const ReplayOptions& o, const Generated& g)
    : sc(s), w(wk), spec(sp), opt(o), threads(wk.ctas * wk.warps * wk.lanes), gen(g) {}

Run IbgdaReplay::run() {
  Run r;
  if (!configure(r.verdict)) return r;
  place();
  gpu_sim::Scheduler s(scheduler_options());
  // Faults: the scenario's, or a random schedule drawn from the seed, early enough to meet
  // work in flight (the first 60 NIC actions on the step clock, 6 us simulated).
  faults = w.random_faults ? random_faults(spec.seed, sc.pes, 6e3) : w.faults;
  world->inject(faults);
  run_->launch(s);
  world->attach(s);
  world->check_every_store(s);  // the queue invariants, at each change of a QP's words
  r.sched = s.run();
  if (opt.progress && opt.trace == nullptr) std::fprintf(stderr, "\r\033[K");
  r.verdict = run_->classify(s, r.sched, w.stack.failover);
  if (r.verdict.kind == sim::RunKind::kCompleted)
    for (const std::string& bad : {sc.phantom ? check_phantom() : run_->check_bytes(), check_atomics()})
      if (!bad.empty() && r.verdict.detail.empty()) r.verdict = {sim::RunKind::kWrongData, bad};
  explain(s, r);
  report(r);
  return r;
}

// The world: its QPs from the stack, its heap from the workload.
bool IbgdaReplay::configure(sim::Verdict& failed) {
  uint64_t max_bytes = 8;
  for (const Op& o : w.ops) max_bytes = std::max(max_bytes, o.bytes);
  slot = round_up(max_bytes, 64);
  const uint64_t big = gen.send_bytes + gen.recv_bytes;
  const bool signals = std::any_of(w.ops.begin(), w.ops.end(), [](const Op& o) { return o.kind == OpKind::kPutSignal; });
  const uint64_t need = slot /*src*/ + uint64_t(threads) * w.ops.size() * slot /*dst*/ + 64 /*counters*/ + big + 2 * 4096 +
                        (signals ? uint64_t(threads) * w.ops.size() * 8 + 4096 : 0) /*signal words*/;
  // NVSHMEM's granularity for big heaps; small ones keep many chunks (transfers split at
  // their ends), at most 256 per PE: key tables grow with chunks x PEs on every PE.
  uint64_t gran = need >= (1ull << 30) ? 512ull << 20 : 64ull << 10;
  while (need / gran > 256) gran *= 2;
  WorldConfig c = world_config(w.stack, sc.pes, spec.seed);
  c.heap.granularity = gran;
  c.heap.heap_bytes = round_up(need + gran * 4, gran);
  c.heap.max_handle_bytes = std::max<uint64_t>(32 * (64 << 10), 4 * gran);  // at most 2 GiB per handle
  c.heap.phantom = sc.phantom;
  c.failover_threads = threads;
  auto made = ModelWorld::create(c);
  if (!made) {
    failed = {sim::RunKind::kError, "set-up failed: " + made.status().to_string()};
    return false;
  }
  world = std::move(*made);
  return true;
}

// The buffers every PE allocates symmetrically, sources filled with a pattern.
void IbgdaReplay::place() {
  wl.shape = {w.ctas, w.warps, w.lanes};
  wl.ops = w.ops;
  wl.seed = spec.seed;
  wl.src = *world->malloc(slot), wl.src_bytes = slot;
  wl.words = *world->malloc(kCounterWords * 8);
  wl.slot = slot;
  wl.dst = *world->malloc(wl.dst_bytes());
  if (std::any_of(wl.ops.begin(), wl.ops.end(), [](const Op& o) { return o.kind == OpKind::kPutSignal; })) wl.sigs = *world->malloc(wl.sig_bytes());
  wl.msgs = &gen.by_pe;
  wl.msg_send = gen.send_bytes ? *world->malloc(gen.send_bytes, 4096) : 0, wl.msg_send_bytes = gen.send_bytes;
  wl.msg_recv = gen.recv_bytes ? *world->malloc(gen.recv_bytes, 4096) : 0;
  run_.emplace(*world, wl);
  if (!sc.phantom) run_->fill_sources();  // phantom heaps have no bytes to fill (their pages are not even accessible)
}

// The schedule, the NIC's link rates, and the timeline and progress observers the options
// ask for.
gpu_sim::SchedOptions IbgdaReplay::scheduler_options() {
  gpu_sim::SchedOptions so = spec.so;
  if (w.wire_gbps > 0) so.costs.wire_bytes_per_ns = w.wire_gbps / 8;
  if (w.pcie_gbps > 0) so.costs.pcie_bytes_per_ns = w.pcie_gbps / 8;
  // Timeline and progress: between steps, an observer samples every QP's indices and records a
  // counter event when they change; doorbells and the NICs' trace events (errors, retries,
  // faults) become instant events, each as hw/trace declares it. Time is simulated
  // microseconds on the timed schedule, the step count otherwise. Observing draws nothing
  // from the schedule, so a traced run is the same run.
  const bool timed = so.policy == gpu_sim::Policy::kTimed;
  if (opt.trace != nullptr) {
    (*opt.trace)["displayTimeUnit"] = "ns";
    (*opt.trace)["otherData"] = {{"scenario", sc.name}, {"clock", timed ? "simulated us" : "observer samples"}};
    auto event = [this](nlohmann::ordered_json e) { (*opt.trace)["traceEvents"].push_back(std::move(e)); };
    world->on_doorbell([this, event, timed](uint32_t pe, double ns) {
      event(trace::perfetto(trace::make(trace::kHostDoorbell, uint64_t(pe)), pe, timed ? ns / 1000.0 : sample_));
    });
    world->on_nic_trace([this, event, timed](uint32_t pe, double ns, const trace::Event& e) {
      event(trace::perfetto(e, pe, timed ? ns / 1000.0 : sample_));
    });
    so.observe = [this, event, timed](uint64_t step, double now_ns) {
      sample_ = double(step);
      size_t i = 0;
      for (uint32_t pe = 0; pe < sc.pes; ++pe)
        for (uint32_t q = 0; q < qps_per_set(world->state(pe)); ++q, ++i) {
          const Mvars& m = *world->state(pe).qps[q].mv;
          const std::array<uint64_t, 4> now{m.resv_head, m.ready_head, m.prod_idx, m.cons_idx};
          if (last_.size() <= i) last_.push_back({});
          if (now != last_[i]) {
            trace::Event e = trace::make(trace::kQpIndices, now[0], now[1], now[2], now[3]);
            e.track = "qp" + std::to_string(q) + "->pe" + std::to_string(world->state(pe).qps[q].pe);
            event(trace::perfetto(e, pe, timed ? now_ns / 1000.0 : sample_));
          }
          last_[i] = now;
        }
    };
  } else if (opt.progress) {
    so.observe_every = 1 << 16;
    so.observe = [this](uint64_t step, double) {
      std::fprintf(stderr, "\r[doorbell] %s: step %llu", sc.name.c_str(), (unsigned long long)step);
    };
  }
  return so;
}

void IbgdaReplay::explain(const gpu_sim::Scheduler& s, Run& r) const {
  const sim::RunKind k = r.verdict.kind;
  // The preempt search: the schedule in words (it has one preemption).
  if (spec.so.policy == gpu_sim::Policy::kPreempt && !r.sched.preempted.empty() && k != sim::RunKind::kCompleted)
    r.verdict.detail += "\nschedule: every lane runs until it waits, agents in turn, except: " + r.sched.preempted + " ran next";
  // Weak memory: what was read stale explains an error or wrong data (hang reports have it).
  if (k == sim::RunKind::kError || k == sim::RunKind::kWrongData)
    if (std::string m = s.memory_report(); !m.empty()) r.verdict.detail += "\n" + m;
}

// The IBGDA runner: one run, then its reference runs. With failover and faults on the timed
// schedule the same run without faults gives the throughput dip; with `compare: cpu_proxy`
// the same workload with a CPU proxy posting for the GPU gives both message rates, and must
// meet the expectation too (without its time limit: that is for the path under test).
Run run(const Scenario& sc, const IbgdaWorkload& w, const RunSpec& spec, const ReplayOptions& opt) {
  const Generated gen = generate(w, sc.pes);  // faults and the proxy change no generated message
  Run r = IbgdaReplay(sc, w, spec, opt, gen).run();
  ReplayOptions ref = opt;
  ref.trace = nullptr;  // the timeline is the run under test's
  if (w.stack.failover && (w.random_faults || !w.faults.empty()) && r.figures.contains("sim_time_ns")) {
    IbgdaWorkload clean = w;
    clean.faults.clear();
    clean.random_faults = false;
    const Run c = IbgdaReplay(sc, clean, spec, ref, gen).run();
    if (c.figures.contains("sim_time_ns")) {
      const double t = r.figures["sim_time_ns"].get<double>(), t0 = c.figures["sim_time_ns"].get<double>();
      const double dip = t > 0 ? 1 - t0 / t : 0;  // share of the fault-free rate lost over the run
      r.compared["fault_free_sim_time_ns"] = c.figures["sim_time_ns"];
      r.compared["throughput_dip"] = double(int64_t(dip * 1000)) / 1000;
      char line[160];
      std::snprintf(line, sizeof line, "  vs fault-free: %.3f us -> throughput dip %.1f %%\n", t0 / 1000, dip * 100);
      r.lines.insert(0, line);  // beside the verdict, above the figures it qualifies
    }
  }
  if (!w.compare_cpu_proxy || w.stack.cpu_proxy) return r;
  IbgdaWorkload proxied = w;
  proxied.stack.cpu_proxy = true;
  Run p = IbgdaReplay(sc, proxied, spec, ref, gen).run();
  Expectation untimed = sc.expect;
  untimed.max_sim_us = 0;
  r.compared_met = judge(untimed, p.verdict.kind, p.sched.sim_time_ns, p.verdict.detail);
  if (r.figures.contains("message_rate_mops") && p.figures.contains("message_rate_mops")) {
    const double g = r.figures["message_rate_mops"].get<double>(), c = p.figures["message_rate_mops"].get<double>();
    const double ratio = c > 0 ? double(int64_t(g / c * 100)) / 100.0 : 0.0;
    r.compared["comparison"] = {{"gpu_initiated_mops", g},
                                {"cpu_proxy_mops", c},
                                {"ratio", ratio},
                                {"cpu_proxy_sim_time_ns", p.figures["sim_time_ns"]},
                                {"cpu_proxy_outcome", sim::run_kind_name(p.verdict.kind)}};
    char line[200];
    std::snprintf(line, sizeof line, "  vs CPU proxy: %.3f M ops/s (%s) -> GPU-initiated is %.2fx\n", c, sim::run_kind_name(p.verdict.kind), ratio);
    r.lines += line;
  }
  return r;
}

}  // namespace doorbell::scenario
