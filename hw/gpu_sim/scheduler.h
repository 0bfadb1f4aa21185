// The CPU GPU model's deterministic scheduler. A kernel launch adds one agent per warp (its
// lanes are fibers that advance in lockstep: one warp step resumes every runnable lane once);
// device agents (a NIC engine, a proxy) join as single-fiber agents. Every shared-memory
// access is a scheduling point; the next agent is chosen from the seed (uniform random, or
// PCT with depth d), or agents run to completion (fast mode, for benchmarks). A run is a pure
// function of (agents, options): the trace hash over every access proves it.
//
// A hang is a result: when every live lane is polling (spin) and no shared word has changed
// for `hang_spins` polls each, the run stops with a report of who waits on what, and the
// watched words' values. Lanes then unwind (spin returns false, accesses throw).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hw/gpu_sim/fiber.h"
#include "hw/gpu_sim/race_detector.h"
#include "hw/gpu_sim/weak_memory.h"
#include "hw/gpu_sim/write_times.h"
#include "models/cost_model.h"

namespace doorbell::gpu_sim {

// kScripted: `choose` picks among the runnable agents (fuzzers decode it from their input).
// kPreempt: a systematic search, one schedule per (point, agent): every lane runs until it
// waits (as kRunToCompletion, agents in turn), except that at scheduling point `preempt_at`
// the running lane is preempted and runnable agent number `preempt_to` runs next. Sweeping
// both covers every one-preemption schedule (context bounding), where a race that is one
// step wide is as likely as any other.
enum class Policy : uint8_t { kRandom, kPct, kRunToCompletion, kTimed, kScripted, kPreempt };
const char* policy_name(Policy p);

struct SchedOptions {
  Policy policy = Policy::kRandom;
  uint64_t seed = 1;
  uint32_t pct_depth = 3;          // PCT: d - 1 priority change points
  uint64_t pct_steps = 20'000;     // PCT: step range the change points are drawn from
  uint32_t hang_spins = 64;        // polls per waiting lane with no shared change => hang
  uint64_t max_steps = 100'000'000;
  size_t stack_bytes = 0;          // per fiber; 0 = default (64 KiB, 512 KiB under ASan)
  models::CostModel costs;         // kTimed: what accesses, doorbells and polls cost
  // kWeak: store buffers and stale loads (weak_memory.h), drawn from `seed`.
  MemoryModel memory = MemoryModel::kSc;
  // The happens-before race detector over byte ranges (race_detector.h): a run with a race
  // says so in RunResult::races. It costs every access its bookkeeping (fast mode's plain
  // path is off).
  bool races = false;
  // Random, PCT, scripted and preempt schedules: a byte range longer than 64 bytes
  // (read_bytes / write_bytes: WQE segments, FIFO slots, NVLS slices) is a scheduling point
  // every 64 bytes after its first (offsets, not address lines: replays must not depend on
  // where a buffer was allocated), so explore interleaves inside a copy.
  bool byte_points = true;
  // Called after every `observe_every`-th agent step with the step count and the stepped
  // agent's clock; it draws nothing from the schedule, so observing never changes a run.
  std::function<void(uint64_t step, double now_ns)> observe;
  uint64_t observe_every = 1;
  // kScripted: index of the next agent among `candidates` runnable ones (taken modulo).
  std::function<size_t(size_t candidates)> choose;
  // kScripted without `choose`: one byte of `script` per choice (modulo the candidates), then
  // round-robin once it runs out, so a short script still ends — the fuzzers' schedule,
  // decoded here rather than in their (traced) code at every step.
  std::span<const uint8_t> script;
  // Untimed policies: a device agent that only an event can move on (a NIC engine with no
  // doorbell) may park instead of polling — off the runnable agents, no steps — until
  // another agent wakes it (AgentCtx::park, Scheduler::wake). Its polls did nothing but
  // take turns; without them every choice of a scripted schedule moves something.
  bool park_idle = false;
  // kPreempt: the scheduling point (1-based; 0: none) and the runnable agent (modulo their
  // number) it switches to.
  uint64_t preempt_at = 0;
  uint32_t preempt_to = 0;
};

enum class Outcome : uint8_t { kCompleted, kHang, kStepLimit };
const char* outcome_name(Outcome o);

struct RunResult {
  Outcome outcome = Outcome::kCompleted;
  uint64_t steps = 0;        // lane/agent resumptions
  uint64_t accesses = 0;     // shared-memory accesses performed
  uint64_t trace_hash = 0;   // over every access: (agent, lane, kind, value)
  std::string report;        // hang / limit report; empty when completed
  double sim_time_ns = 0;    // kTimed: when the last kernel lane finished
  uint64_t points = 0;       // kPreempt: scheduling points passed (the search's range)
  std::string preempted;     // kPreempt: who was preempted where, and who ran next
  std::string races;         // SchedOptions::races: the data races found (empty: none)
};

struct LaunchConfig {
  uint32_t ctas = 1;
  uint32_t warps_per_cta = 1;
  uint32_t lanes = 32;       // lanes per warp (<= 32); fewer make small tests cheap
  uint32_t gpu = 0;          // which GPU runs it: how far its .gpu-scope fences reach (weak memory)
};

// Kinds of shared access (part of the trace hash).
enum class Access : uint8_t { kLoad, kStore, kAdd, kCas, kMax, kExch, kMmio, kDevice };

class SimCtx;
class AgentCtx;

// Thrown inside a fiber to unwind it after the run was stopped (hang, step limit).
struct KernelAborted {};

class Scheduler {
 public:
  explicit Scheduler(SchedOptions o = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Add a kernel: cfg.ctas x cfg.warps_per_cta warps; `body` runs once per lane. Also from
  // inside a running agent (a kernel starting on a stream); `on_done` runs when its last lane
  // finishes.
  void launch(const std::string& name, const LaunchConfig& cfg, std::function<void(SimCtx&)> body,
              std::function<void()> on_done = {});
  // Add a device agent. A daemon is stopped (its spin returns false) once every
  // non-daemon agent has finished.
  // Returns its id (for wake()).
  uint32_t add_agent(const std::string& name, std::function<void(AgentCtx&)> body, bool daemon = true);
  // Make agent `id` runnable again if it parked (a no-op otherwise); from inside the run.
  void wake(uint32_t id);
  // Wake agent `id` at every change of a word in [addr, addr + bytes) (ranges do not
  // overlap). Only where a store is seen when it is made: not with weak memory.
  void wake_on_store(const void* addr, size_t bytes, uint32_t id);
  // Name a shared word: hang reports print its value and name waits on it.
  void watch(std::string name, const uint64_t* addr) { watches_.push_back({std::move(name), addr}); }
  // A table of named words that outlives the scheduler (a world's, named once for all its
  // runs): watched as they are, without a copy.
  using WatchTable = std::vector<std::pair<std::string, const uint64_t*>>;
  void watch(const WatchTable* table) { watch_tables_.push_back(table); }
  // Text appended to hang reports (e.g. which stream work waits for which).
  void add_reporter(std::function<std::string()> fn) { reporters_.push_back(std::move(fn)); }
  // Route 64-bit MMIO stores in [base, base+size) to a device: fn(obj, addr, value), or a
  // std::function. (The pointer form is the doorbell's: in fast mode a put rings one each.)
  using MmioFn = void (*)(void* obj, uint64_t addr, uint64_t value);
  void map_mmio(uint64_t base, uint64_t size, MmioFn fn, void* obj);
  void map_mmio(uint64_t base, uint64_t size, std::function<void(uint64_t addr, uint64_t value)> fn);
  // Hand an MMIO store to the device mapped at its address; false where none is.
  bool route_mmio(uint64_t* addr, uint64_t value) {
    const auto a = reinterpret_cast<uint64_t>(addr);
    for (const Mmio& m : mmio_)
      if (a - m.base < m.size) {
        m.fn(m.obj, a, value);
        return true;
      }
    return false;
  }
  // After every access that changes a word in [base, base + bytes), and every plain byte
  // range written from inside it (SimCtx::write_bytes, per piece), check(addr) says what
  // broke ("" if nothing): invariants checked at each step that could break them, at the cost
  // of one range lookup per change. The first thing broken is kept (violation()).
  void check_stores(const void* base, size_t bytes, std::function<std::string(const void* addr)> check);
  const std::string& violation() const { return violation_; }

  RunResult run();
  const SchedOptions& options() const { return opt_; }
  // "seed=N policy=P [memory=weak]" — what a replay needs besides the program.
  std::string describe() const;
  // The weak memory model (null in the sequentially consistent mode); devices report their
  // accesses to it (mem::Observer).
  WeakMemory* weak() const { return weak_.get(); }
  // Stale reads the weak model saw (empty otherwise): for failure reports.
  std::string memory_report() const { return weak_ ? weak_->report() : std::string(); }
  // The race detector (null unless SchedOptions::races) and the running lane's or device
  // actor's thread in it.
  RaceDetector* race() const { return race_.get(); }
  uint32_t race_thread() const { return cur_actor_; }
  // What devices (a NIC engine, a copy engine) tell of their own accesses: the weak memory
  // model and the race detector, whichever are on; null when neither is.
  mem::Observer* device_observer();

  // ---- used by SimCtx / AgentCtx from inside running fibers ----
  // A scheduling point before an access, and the record of one (both on every simulated
  // access: inline, with what needs the agent's details out of line).
  void point() {
    if (aborted_ || (stopping_ && cur_daemon_) || opt_.policy != Policy::kRunToCompletion) point_slow();
  }
  void record(Access kind, uint64_t value, bool changed, const void* addr = nullptr) {
    ++accesses_;
    if (opt_.policy == Policy::kTimed && kind != Access::kDevice) record_timed(kind, changed, addr);
    if (changed) {
      ++version_;
      if (store_hooks_) on_store(addr);  // one test here: record() is every access's path
    }
    hash_step(kind, value);
  }
  // A plain byte range was written at `addr` (each piece of one): check_stores' check of the
  // range it starts in, without waking pollers (a byte range is not a polled word).
  void bytes_stored(const void* addr) {
    if (store_hooks_) check_bytes(addr);
  }
  // record() where plain(): nothing but the counts and the hash.
  void record_plain(Access kind, uint64_t value, bool changed) {
    ++accesses_;
    version_ += changed;
    hash_step(kind, value);
  }
  // kTimed (no-ops otherwise): charge the running lane; make it wait for the time `addr`
  // was last written (it observed that write); note that it wrote `addr` now.
  void advance(double ns);
  void observe(const void* addr);
  void wrote(const void* addr);
  void wait_until_ns(double t);
  double now() const;
  bool spin(const char* what, const uint64_t* addr, uint64_t seen);
  bool park(const char* what);
  uint64_t collective(int kind, uint64_t value, uint32_t arg);
  void sync_cta();
  void sync_threads(uint32_t id, uint32_t count);  // a named barrier (bar.sync id, count)
  void mmio_store(uint64_t* addr, uint64_t value);
  bool stopping() const { return stopping_ || aborted_; }
  // True while the running lane's accesses need nothing but doing and recording (fast mode,
  // sequentially consistent, no store hooks, not stopping it; set at each resumption): then
  // SimCtx takes a path of its own, record_plain. Through point(), the weak-memory test and
  // record(), an access carries many times its own instructions in checks.
  bool plain() const { return plain_; }
  // Byte ranges split at lines with scheduling points between (SchedOptions::byte_points).
  bool byte_points() const { return opt_.byte_points && opt_.policy != Policy::kRunToCompletion && opt_.policy != Policy::kTimed; }
  // The running agent's id (add_agent's), for wake().
  uint32_t current_agent() const;
  // The running lane's thread in the weak memory model.
  uint32_t mem_thread() const;
  void fence(exec::Scope s) {
    if (weak_) fence_weak(s);  // the sequentially consistent mode has nothing to order
    if (race_ && cur_actor_ != RaceDetector::kNoThread) race_->fence(cur_actor_);
  }

 private:
  void point_slow();
  void fence_weak(exec::Scope s);
  // Who, what kind and which value folded into one word first (off the chain from one
  // access's hash to the next), then one FNV-1a step over it: two chained steps per access
  // were a tenth of a fast-mode put_nbi. Who and kind enter multiplied (who_mix_ is the
  // running lane's, set at its resumption; kind's product is a constant), so that they touch
  // every bit above their lowest, not only the bits where they sit.
  void hash_step(Access kind, uint64_t value) {
    hash_ = (hash_ ^ value ^ (who_mix_ + uint64_t(kind) * kMix)) * 0x100000001b3ull;
  }
  static constexpr uint64_t kMix = 0x9e3779b97f4a7c15ull;
  void record_timed(Access kind, bool changed, const void* addr);
  void on_store(const void* addr);  // check_stores' checks, then wake_on_store's wakes
  void check_bytes(const void* addr);
  struct LaneVars;
  struct Lane;
  struct Agent;
  struct CtaBarrier;
  struct Recycled;
  std::unique_ptr<Agent> new_agent();           // a recycled one, else a new one
  std::unique_ptr<Lane> new_lane(uint32_t index);
  static void lane_main(void* lane);  // a fiber's body: its agent's, or its kernel's for this lane
  static std::string agent_name(const Agent& a);
  enum class LaneState : uint8_t { kRunnable, kCollective, kBarrier, kDone, kParked };
  // Which agents can run, kept as their lanes change state (pick() runs every step, and a
  // scan of every agent made runs of hundreds of PEs quadratic): a Fenwick tree over agent
  // indices (random and scripted picks take the k-th runnable agent) and, for kTimed, the
  // runnable agents by (clock, index).
  void set_state(Lane& l, LaneState s);
  void set_runnable(Agent& a, bool runnable);
  void add_to_pick(Agent& a);
  Agent* kth_runnable(size_t k) const;
  uint64_t points_ = 0;            // kPreempt
  bool preempted_ = false;
  std::string preempted_what_;
  std::vector<uint8_t> runnable_;        // by agent index
  std::vector<uint32_t> fenwick_;        // counts of runnable agents; size a power of two
  size_t runnable_agents_ = 0;
  std::set<std::pair<double, uint32_t>> by_clock_;
  uint32_t live_agents_ = 0, live_user_agents_ = 0;
  void step(Agent& a);
  void resume(Agent& a, Lane& l);
  void yield();
  void finish_lane(Agent& a, Lane& l);
  void complete_collective(Agent& a);
  Agent* pick();
  void check_hang();
  std::string hang_report() const;
  std::string name_of(const uint64_t* addr) const;        // its watched name, else its address
  std::string watched_name(const uint64_t* addr) const;  // "" if not watched
  void abort_all();

  SchedOptions opt_;
  std::unique_ptr<WeakMemory> weak_;
  std::unique_ptr<RaceDetector> race_;
  uint32_t cur_actor_ = RaceDetector::kNoThread;  // race_thread()
  struct Devices;                                  // device_observer()
  std::unique_ptr<Devices> devices_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::unique_ptr<CtaBarrier>> barriers_;  // one per launched CTA
  Fiber main_;
  Agent* cur_agent_ = nullptr;
  Lane* cur_lane_ = nullptr;
  uint64_t who_mix_ = 0;       // the running lane in record()'s hash: (agent << 40 | lane << 32) * kMix
  bool cur_daemon_ = false;    // the running agent is a daemon (stops with the run)
  uint64_t rng_;
  size_t script_pos_ = 0, round_robin_ = 0;  // kScripted from opt_.script
  std::vector<uint32_t> parked_;             // agents parked (their one lane), woken when the run stops
  uint64_t version_ = 0;        // bumps on every change to shared state
  uint64_t steps_ = 0, accesses_ = 0, hash_ = 0xcbf29ce484222325ull;
  bool hang_ = false, aborted_ = false, stopping_ = false;
  bool plain_ = false;  // plain()
  std::string report_;
  std::vector<std::pair<std::string, const uint64_t*>> watches_;
  std::vector<const WatchTable*> watch_tables_;
  template <class Fn>
  void for_each_watch(Fn&& fn) const {  // fn(name, addr)
    for (const auto& [name, addr] : watches_) fn(name, addr);
    for (const WatchTable* t : watch_tables_)
      for (const auto& [name, addr] : *t) fn(name, addr);
  }
  std::vector<std::function<std::string()>> reporters_;
  WriteTimes write_ns_;  // kTimed: when each word was last written
  struct Mmio {
    uint64_t base, size;
    MmioFn fn;
    void* obj;
    std::shared_ptr<std::function<void(uint64_t, uint64_t)>> held;  // obj, for the std::function form
  };
  std::vector<Mmio> mmio_;
  struct Checked {
    uintptr_t base, bytes;
    std::function<std::string(const void*)> check;
  };
  std::vector<Checked> checked_;  // sorted by base
  struct Waker {
    uintptr_t base;
    size_t bytes;
    uint32_t id;
  };
  std::vector<Waker> wakers_;  // sorted by base
  bool store_hooks_ = false;   // either of the two is set
  std::string violation_;
  // PCT state.
  std::vector<uint64_t> change_points_;
  int64_t lowest_priority_ = 0;
  size_t rr_next_ = 0;
};

}  // namespace doorbell::gpu_sim
