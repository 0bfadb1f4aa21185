// The IBGDA replay of a scenario, one step per function: size the heap and configure the
// world, place the buffers, run the workload (every PE's threads) under the scheduler,
// classify the run, check its data (bytes or phantom records, atomics, stated values), judge
// it against the expectation, and report.
#include "scenarios/replay/replay_ibgda.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "scenarios/replay/generators.h"
#include "sim/ibgda/atomic_check.h"
#include "sim/ibgda/model_world.h"
#include "sim/ibgda/workload.h"

namespace doorbell::scenario {

using namespace doorbell::ibgda;

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class IbgdaReplay {
 public:
  IbgdaReplay(const Scenario& s, const ReplayOptions& o)
      : sc(s),
        opt(o),
        spec(run_spec(s, o, 512)),
        seed(spec.seed),
        schedule(spec.schedule),
        memory_model(spec.memory_model),
        threads(s.ctas * s.warps * s.lanes),
        gen(generate(s)) {}

  ReplayResult run() {
    if (!configure()) return out;
    place();
    gpu_sim::SchedOptions so = scheduler_options();
    gpu_sim::Scheduler s(so);
    // Faults: the scenario's, or a random schedule drawn from the seed, early enough to meet
    // work in flight (the first 60 NIC actions on the step clock, 6 us simulated).
    faults = sc.random_faults ? random_faults(seed, sc.pes, 6e3) : sc.faults;
    world->inject(faults);
    run_->launch(s);
    world->attach(s);
    world->check_every_store(s);  // the queue invariants, at each change of a QP's words
    const gpu_sim::RunResult r = s.run();
    if (opt.progress && opt.trace == nullptr) std::fprintf(stderr, "\r\033[K");
    const WorkloadRun::Verdict v = run_->classify(s, r, sc.failover);
    out.outcome = v.outcome, out.detail = v.detail;
    if (out.outcome == "completed")
      for (const std::string& bad : {sc.phantom ? check_phantom() : run_->check_bytes(), check_atomics()})
        if (!bad.empty() && out.detail.empty()) out.outcome = "wrong-data", out.detail = bad;
    judge(s, r, so);
    report(r, so);
    return out;
  }

 private:
  // The world: its QPs and heap from the scenario's stack and workload.
  bool configure() {
    uint64_t max_bytes = 8;
    for (const Op& o : sc.ops) max_bytes = std::max(max_bytes, o.bytes);
    slot = round_up(max_bytes, 64);
    const uint64_t big = gen.send_bytes + gen.recv_bytes;
    const uint64_t need = slot /*src*/ + uint64_t(threads) * sc.ops.size() * slot /*dst*/ + 64 /*counters*/ + big + 2 * 4096;
    // NVSHMEM's granularity for big heaps; small ones keep many chunks (transfers split at
    // their ends), at most 256 per PE: key tables grow with chunks x PEs on every PE.
    uint64_t gran = need >= (1ull << 30) ? 512ull << 20 : 64ull << 10;
    while (need / gran > 256) gran *= 2;

    WorldConfig c;
    c.npes = sc.pes;
    c.num_rc_per_pe = sc.num_rc_per_pe;
    c.num_nics = sc.nics_per_pe;
    uint32_t log_depth = 0;
    while ((1u << log_depth) < sc.qp_depth) ++log_depth;
    c.log_qp_depth = log_depth;
    c.layout = sc.pe_major ? QpLayout::kPeMajor : QpLayout::kQpMajor;
    c.opt.num_requests_in_batch = sc.num_requests_in_batch;
    c.opt.may_skip_cst = !sc.cst;
    c.opt.cpu_proxy = sc.cpu_proxy;
    c.opt.plant = sc.plant;
    c.nic_buf_on_gpumem = sc.nic_buffers_on_gpu;
    c.ibuf_slots = sc.ibuf_slots;
    c.response_delay_max = sc.response_delay;
    c.seed = seed;
    c.start_index = sc.start_index;
    c.heap.granularity = gran;
    c.heap.heap_bytes = round_up(need + gran * 4, gran);
    c.heap.max_handle_bytes = std::max<uint64_t>(32 * (64 << 10), 4 * gran);  // at most 2 GiB per handle
    c.heap.phantom = sc.phantom;
    c.failover = sc.failover;
    c.failover_threads = threads;
    c.rts.ack_timeout = uint8_t(sc.ack_timeout);
    c.rts.retry_count = uint8_t(sc.retry_count);
    c.rts.rnr_retry = uint8_t(sc.rnr_retry);
    auto w = ModelWorld::create(c);
    if (!w) {
      out.outcome = "error";
      out.detail = "set-up failed: " + w.status().to_string();
      return false;
    }
    world = std::move(*w);
    return true;
  }

  // The buffers every PE allocates symmetrically, sources filled with a pattern.
  void place() {
    wl.shape = {sc.ctas, sc.warps, sc.lanes};
    wl.ops = sc.ops;
    wl.seed = seed;
    wl.src = *world->malloc(slot), wl.src_bytes = slot;
    wl.words = *world->malloc(kCounterWords * 8);
    wl.slot = slot;
    wl.dst = *world->malloc(wl.dst_bytes());
    wl.msgs = &gen.by_pe;
    wl.msg_send = gen.send_bytes ? *world->malloc(gen.send_bytes, 4096) : 0, wl.msg_send_bytes = gen.send_bytes;
    wl.msg_recv = gen.recv_bytes ? *world->malloc(gen.recv_bytes, 4096) : 0;
    run_.emplace(*world, wl);
    if (!sc.phantom) run_->fill_sources();  // phantom heaps have no bytes to fill (their pages are not even accessible)
  }

  // The schedule, with the timeline and progress observers the options ask for.
  gpu_sim::SchedOptions scheduler_options() {
    gpu_sim::SchedOptions so = spec.so;
    if (sc.wire_gbps > 0) so.costs.wire_bytes_per_ns = sc.wire_gbps / 8;
    if (sc.pcie_gbps > 0) so.costs.pcie_bytes_per_ns = sc.pcie_gbps / 8;
    // Timeline and progress: between steps, an observer samples every QP's indices and records a
    // counter event when they change; doorbells become instant events. Time is simulated
    // microseconds on the timed schedule, the step count otherwise. Observing draws nothing
    // from the schedule, so a traced run is the same run.
    const bool timed = so.policy == gpu_sim::Policy::kTimed;
    if (opt.trace != nullptr) {
      (*opt.trace)["displayTimeUnit"] = "ns";
      (*opt.trace)["otherData"] = {{"scenario", sc.name}, {"clock", timed ? "simulated us" : "observer samples"}};
    }
    auto event = [this](nlohmann::ordered_json e) { (*opt.trace)["traceEvents"].push_back(std::move(e)); };
    if (opt.trace != nullptr)
      world->on_doorbell([this, event, timed](uint32_t pe, double ns) {
        event({{"name", "doorbell"}, {"ph", "i"}, {"s", "p"}, {"ts", timed ? ns / 1000.0 : sample_}, {"pid", pe}, {"tid", 0}});
      });
    gpu_sim::SchedOptions& obs = so;
    if (opt.trace != nullptr)
      obs.observe = [this, event, timed](uint64_t step, double now_ns) {
        sample_ = double(step);
        size_t i = 0;
        for (uint32_t pe = 0; pe < sc.pes; ++pe)
          for (uint32_t q = 0; q < qps_per_set(world->state(pe)); ++q, ++i) {
            const Mvars& m = *world->state(pe).qps[q].mv;
            const std::array<uint64_t, 4> now{m.resv_head, m.ready_head, m.prod_idx, m.cons_idx};
            if (last_.size() <= i) last_.push_back({});
            if (now != last_[i])
              event({{"name", "qp" + std::to_string(q) + "->pe" + std::to_string(world->state(pe).qps[q].pe)},
                     {"ph", "C"},
                     {"ts", timed ? now_ns / 1000.0 : sample_},
                     {"pid", pe},
                     {"args", {{"resv", now[0]}, {"ready", now[1]}, {"prod", now[2]}, {"cons", now[3]}}}});
            last_[i] = now;
          }
      };
    else if (opt.progress) {
      obs.observe_every = 1 << 16;
      obs.observe = [this](uint64_t step, double) {
        std::fprintf(stderr, "\r[doorbell] %s: step %llu", sc.name.c_str(), (unsigned long long)step);
      };
    }
    return so;
  }

  // Phantom memory: every generated message must appear in the NICs' records as pieces that
  // cover exactly its destination, each from the matching source bytes; explicit puts and
  // gets likewise. What is wrong, or "".
  std::string check_phantom() {
    std::string bad;
    std::vector<mock_nic::PhantomCopy> log, want;
    for (uint32_t pe = 0; pe < sc.pes; ++pe)
      for (uint32_t d = 0; d < sc.nics_per_pe; ++d)
        log.insert(log.end(), world->nic(pe, d).phantom_log().begin(), world->nic(pe, d).phantom_log().end());
    for (const auto& per : gen.by_pe)
      for (const Msg& m : per)
        want.push_back({reinterpret_cast<uint64_t>(world->at(m.to, wl.msg_recv + m.dst)),
                        reinterpret_cast<uint64_t>(world->at(m.from, wl.msg_send + m.src)), m.len});
    auto by_dst = [](const auto& x, const auto& y) { return x.dst < y.dst; };
    std::sort(log.begin(), log.end(), by_dst);
    std::sort(want.begin(), want.end(), by_dst);
    size_t i = 0;
    for (const auto& w : want) {
      uint64_t done = 0;
      while (done < w.len && i < log.size() && log[i].dst == w.dst + done && log[i].src == w.src + done) done += log[i++].len;
      if (done != w.len) {
        bad = "a generated message of " + std::to_string(w.len) + " bytes arrived as " + std::to_string(done);
        break;
      }
    }
    // Explicit puts and gets: the records inside each op's destination slot come from the
    // matching source bytes and add up to its bytes times its count.
    for (uint32_t pe = 0; pe < sc.pes && bad.empty(); ++pe)
      for (uint64_t t = 0; t < threads && bad.empty(); ++t)
        for (size_t j = 0; j < sc.ops.size() && bad.empty(); ++j) {
          const Op& o = sc.ops[j];
          if (o.pe != pe || !owns_slot(o, t, wl.shape)) continue;
          if (o.kind != OpKind::kPut && o.kind != OpKind::kGet) continue;
          const uint64_t sl = wl.slot_at(t, j);
          const auto d = reinterpret_cast<uint64_t>(world->at(o.kind == OpKind::kPut ? o.target : pe, sl));
          const auto from = reinterpret_cast<uint64_t>(world->at(o.kind == OpKind::kPut ? pe : o.target, wl.src + o.src));
          uint64_t got = 0;
          for (auto it = std::lower_bound(log.begin(), log.end(), mock_nic::PhantomCopy{d, 0, 0}, by_dst);
               it != log.end() && it->dst < d + o.bytes; ++it) {
            if (it->src - from != it->dst - d) got = ~0ull >> 1;  // from the wrong source bytes
            got += it->len;
          }
          if (got != o.bytes * o.count) {
            bad = "op " + std::to_string(j) + " of pe " + std::to_string(pe) + " thread " + std::to_string(t) + ": " +
                  std::to_string(o.bytes * o.count) + " bytes expected in its destination, the NICs moved " +
                  (got > (~0ull >> 2) ? std::string("some from the wrong source") : std::to_string(got));
          }
        }
    phantom_transfers = log.size();
    return bad;
  }

  // Atomics: some order of them explains every result and final value; then the values the
  // scenario states.
  std::string check_atomics() {
    auto word_at = [&](uint32_t pe, uint32_t w) { return *reinterpret_cast<const uint64_t*>(world->at(pe, wl.words + w * 8)); };
    if (std::string bad = run_->check_atomics(); !bad.empty()) return bad;
    for (const ExpectWord& e : sc.expect_words)
      if (const uint64_t v = word_at(e.pe, e.word); v != e.equals)
        return "pe " + std::to_string(e.pe) + " word " + std::to_string(e.word) + ": expected " + std::to_string(e.equals) +
               ", saw " + std::to_string(v);
    return {};
  }

  // The schedule and stale reads that explain a miss; whether the expectation held.
  void judge(const gpu_sim::Scheduler& s, const gpu_sim::RunResult& r, const gpu_sim::SchedOptions& so) {
    // The preempt search: the schedule in words (it has one preemption).
    if (so.policy == gpu_sim::Policy::kPreempt && !r.preempted.empty() && out.outcome != "completed")
      out.detail += "\nschedule: every lane runs until it waits, agents in turn, except: " + r.preempted + " ran next";
    // Weak memory: what was read stale explains an error or wrong data (hang reports have it).
    if (out.outcome == "error" || out.outcome == "wrong-data")
      if (std::string m = s.memory_report(); !m.empty()) out.detail += "\n" + m;
    switch (sc.expect) {
      case Expect::kCompletes:
        out.met = out.outcome == "completed" && (sc.expect_max_sim_us == 0 || r.sim_time_ns <= sc.expect_max_sim_us * 1000);
        if (out.outcome == "completed" && !out.met)
          out.detail = "simulated time " + std::to_string(r.sim_time_ns / 1000) + " us exceeds the limit of " +
                       std::to_string(sc.expect_max_sim_us) + " us";
        break;
      case Expect::kHangs:
        out.met = out.outcome == "hang" && out.detail.find(sc.expect_waits_on) != std::string::npos;
        break;
      case Expect::kErrors:
        out.met = out.outcome == "error" && out.detail.find(sc.expect_syndrome) != std::string::npos;
        break;
    }
  }

  // The JSON report and the summary: counters, timing, failover, per-QP table.
  void report(const gpu_sim::RunResult& r, const gpu_sim::SchedOptions& so) {
    // Report.
    nlohmann::ordered_json& j = out.report;
    report_head(j, sc, seed, schedule, memory_model, out, r.steps, r.trace_hash);
    if (so.policy == gpu_sim::Policy::kPreempt) j["points"] = r.points, j["preempted"] = r.preempted;
    j["accesses"] = r.accesses;
    if (!faults.empty()) {
      nlohmann::ordered_json fl = nlohmann::ordered_json::array();
      for (const WorldFault& f : faults) fl.push_back(describe(f));
      j["faults"] = fl;
    }
    if (sc.failover) {
      const RecoveryStats& rs = world->recovery_stats();
      j["failover"] = {{"suspected", rs.suspected},   {"rerung", rs.rerung},
                       {"failed", rs.failed},         {"recovered", rs.recovered},
                       {"dead_pairs", rs.dead},       {"longest_recovery_ns", int64_t(rs.max_recovery_ns)},
                       {"lost_results", run_->lost_results()}};
    }
    if (gen.messages != 0) j["generated_messages"] = gen.messages, j["generated_bytes"] = gen.bytes;
    if (sc.phantom) j["phantom_transfers"] = phantom_transfers;
    if (so.policy == gpu_sim::Policy::kTimed) {
      // What the workload issued, over the simulated time until its last thread finished.
      uint64_t ops = 0, bytes = 0;
      for (const Op& o : sc.ops)
        if (o.kind != OpKind::kQuiet) {
          uint64_t runners = 0;  // threads that issue it (a collective put is issued once)
          for (uint64_t t = 0; t < threads; ++t) runners += owns_slot(o, t, wl.shape);
          ops += uint64_t(o.count) * runners, bytes += uint64_t(o.count) * runners * o.bytes;
        }
      ops += gen.messages, bytes += gen.bytes;
      const double t = r.sim_time_ns;
      j["sim_time_ns"] = int64_t(t);
      j["ops"] = ops;
      j["message_rate_mops"] = t > 0 ? double(int64_t(double(ops) / t * 1e6)) / 1000.0 : 0.0;  // M ops/s
      j["bandwidth_gbps"] = t > 0 ? double(int64_t(double(bytes) / t * 1000)) / 1000.0 : 0.0;  // GB/s, all PEs
      j["bandwidth_per_pe_gbps"] = t > 0 ? double(int64_t(double(bytes) / sc.pes / t * 1000)) / 1000.0 : 0.0;
    }
    const bool nics = sc.nics_per_pe > 1;
    std::string table = std::string("  pe  qp->pe   resv  ready   prod   cons  WQEs  doorbells") + (nics ? "  nic\n" : "\n");
    for (uint32_t pe = 0; pe < sc.pes; ++pe) {
      nlohmann::ordered_json qps = nlohmann::ordered_json::array();
      for (uint32_t q = 0; q < qps_per_set(world->state(pe)); ++q) {
        const DevQp& d = world->state(pe).qps[q];
        const mock_nic::QpStats& ns = world->nic(pe, d.dev).qp(d.qpn)->stats;
        qps.push_back({{"peer", d.pe},
                       {"qpn", d.qpn},
                       {"resv_head", d.mv->resv_head},
                       {"ready_head", d.mv->ready_head},
                       {"prod_idx", d.mv->prod_idx},
                       {"cons_idx", d.mv->cons_idx},
                       {"wqes_executed", ns.wqes},
                       {"doorbells", ns.doorbells},
                       {"errors", ns.errors},
                       {"flushed", ns.flushed}});
        if (sc.nics_per_pe > 1) qps.back()["nic"] = d.dev;
        if (d.mv->resv_head == 0) continue;
        char line[128];
        std::snprintf(line, sizeof line, "  %2u  %2u->%-3u %6llu %6llu %6llu %6llu %5llu %10llu\n", pe, q, d.pe,
                      (unsigned long long)d.mv->resv_head, (unsigned long long)d.mv->ready_head,
                      (unsigned long long)d.mv->prod_idx, (unsigned long long)d.mv->cons_idx, (unsigned long long)ns.wqes,
                      (unsigned long long)ns.doorbells);
        table += line;
        if (nics) table.insert(table.size() - 1, "  " + std::to_string(d.dev));
      }
      j["pes"].push_back({{"pe", pe}, {"qps", qps}});
    }
    if (!out.detail.empty()) j["detail"] = out.detail;
    out.summary = sc.name + ": " + out.outcome + " (expected " + j["expected"].get<std::string>() + ") — " +
                  (out.met ? "OK" : "EXPECTATION NOT MET") + "\n";
    if (sc.failover) {
      const RecoveryStats& rs = world->recovery_stats();
      char line[200];
      std::snprintf(line, sizeof line,
                    "  failover: %u QP pair(s) failed, %u recovered (longest %.1f us), %u re-rung, %llu result(s) lost\n",
                    rs.failed, rs.recovered, rs.max_recovery_ns / 1000, rs.rerung, (unsigned long long)run_->lost_results());
      out.summary += line;
    }
    if (j.contains("sim_time_ns")) {
      char line[160];
      std::snprintf(line, sizeof line, "  simulated %.3f us: %llu ops, %.3f M ops/s, %.3f GB/s (%.3f GB/s per PE)\n",
                    double(j["sim_time_ns"].get<int64_t>()) / 1000.0, (unsigned long long)j["ops"].get<uint64_t>(),
                    j["message_rate_mops"].get<double>(), j["bandwidth_gbps"].get<double>(),
                    j["bandwidth_per_pe_gbps"].get<double>());
      out.summary += line;
    }
    out.summary += table;
  }

  const Scenario& sc;
  const ReplayOptions& opt;
  const RunSpec spec;
  const uint64_t seed;
  const std::string& schedule;
  const std::string& memory_model;
  const uint32_t threads;
  const Generated gen;
  uint64_t slot = 0;
  std::unique_ptr<ModelWorld> world;
  Workload wl;                      // the scenario's ops and generated messages, placed
  std::optional<WorkloadRun> run_;  // the one runner over them
  std::vector<WorldFault> faults;
  uint64_t phantom_transfers = 0;
  double sample_ = 0;                          // the timeline's clock when not timed: observer samples
  std::vector<std::array<uint64_t, 4>> last_;  // each QP's indices at the last sample
  ReplayResult out;
};

}  // namespace

ReplayResult replay_ibgda(const Scenario& sc, const ReplayOptions& opt) { return IbgdaReplay(sc, opt).run(); }

}  // namespace doorbell::scenario
