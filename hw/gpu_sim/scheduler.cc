#include "hw/gpu_sim/scheduler.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::gpu_sim {

namespace {
#if defined(__SANITIZE_ADDRESS__)  // GCC's ASan (clang 14 does not define it: its fuzz builds run on 64 KiB)
constexpr size_t kDefaultStack = 512 * 1024;
#else
constexpr size_t kDefaultStack = 64 * 1024;
#endif
// A polling loop may make a few accesses between two spins and still count as polling.
constexpr uint64_t kPollSlack = 8;

// Lists of address ranges that do not overlap, sorted by base (store checks, wakers): insert
// one, and find the one holding an address (null: none).
template <class R>
void insert_range(std::vector<R>& v, R r) {
  auto at = std::upper_bound(v.begin(), v.end(), r.base, [](uintptr_t x, const R& e) { return x < e.base; });
  v.insert(at, std::move(r));
}
template <class R>
const R* range_at(const std::vector<R>& v, uintptr_t a) {
  auto it = std::upper_bound(v.begin(), v.end(), a, [](uintptr_t x, const R& e) { return x < e.base; });
  if (it == v.begin()) return nullptr;
  const R& r = *std::prev(it);
  return a - r.base < r.bytes ? &r : nullptr;
}

uint64_t next_rand(uint64_t& s) {  // xorshift64*
  s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}
}  // namespace

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kRandom: return "random";
    case Policy::kPct: return "pct";
    case Policy::kRunToCompletion: return "fast";
    case Policy::kTimed: return "timed";
    case Policy::kScripted: return "scripted";
    case Policy::kPreempt: return "preempt";
  }
  return "?";
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kCompleted: return "completed";
    case Outcome::kHang: return "hang";
    case Outcome::kStepLimit: return "step-limit";
  }
  return "?";
}

// A kernel launch: what its lanes run, how many still do, and what to do when none does.
struct LaunchDone {
  std::string name;
  LaunchConfig cfg;
  std::function<void(SimCtx&)> body;
  uint64_t left = 0;
  std::function<void()> fn;
  std::vector<uint32_t> threads;  // the kernel's threads in the weak memory model
};

// What devices tell of their accesses, told to the weak memory model and the race detector.
// A device actor (a NIC's QP) is a thread of its own in the detector, named after the agent.
struct Scheduler::Devices final : mem::Observer {
  Scheduler& s;
  std::unordered_map<const void*, uint32_t> actors;
  explicit Devices(Scheduler& sc) : s(sc) {}
  // The detector, where an actor is running (null otherwise).
  RaceDetector* race() const { return s.cur_actor_ != RaceDetector::kNoThread ? s.race_.get() : nullptr; }
  void device_write(const void* addr, size_t len, const char* what, uint64_t index) override {
    if (s.weak_) s.weak_->device_write(addr, len);
    if (RaceDetector* r = race()) r->device_write(s.cur_actor_, addr, len, what, index);
  }
  void device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) override {
    if (s.weak_) s.weak_->device_read(addr, len, who, what, index);
    if (RaceDetector* r = race()) r->device_read(s.cur_actor_, addr, len, what, index);
  }
  void device_landing(const void* addr, size_t len, const char* what, uint64_t index) override {
    if (s.weak_) s.weak_->landing(addr, len, what, index, s.current_agent());
    if (RaceDetector* r = race()) r->device_write(s.cur_actor_, addr, len, what, index);
  }
  void device_flush() override {
    if (s.weak_) s.weak_->flush_landings(s.current_agent());
  }
  void device_rewrite(const void* addr, size_t len, const char*, uint64_t) override {
    if (s.weak_) s.weak_->device_write(addr, len);
    if (RaceDetector* r = race()) r->device_rewrite(s.cur_actor_, addr, len);
  }
  void device_atomic(const void* addr, size_t len) override {
    if (s.weak_) s.weak_->device_write(addr, len);
    if (RaceDetector* r = race()) r->device_atomic(s.cur_actor_, addr);
  }
  void device_actor(const void* key, const char* what, uint64_t index) override {
    if (!s.race_ || s.cur_lane_ == nullptr) return;
    auto [it, fresh] = actors.try_emplace(key, 0);
    if (fresh) {
      char n[32];
      std::snprintf(n, sizeof n, " %s 0x%llx", what, static_cast<unsigned long long>(index));
      it->second = s.race_->add_thread(agent_name(*s.cur_agent_) + n);
    }
    s.cur_actor_ = it->second;
    s.race_->acquire_from(s.cur_actor_, key);
  }
  void device_command(const void* key) override {
    RaceDetector* r = race();
    if (r == nullptr) return;
    if (auto it = actors.find(key); it != actors.end()) r->acquire_thread(s.cur_actor_, it->second);
    r->release_to(s.cur_actor_, key);
  }
  void device_release(const void* key) override {
    if (RaceDetector* r = race()) r->release_to(s.cur_actor_, key);
  }
};

mem::Observer* Scheduler::device_observer() {
  if (!weak_ && !race_) return nullptr;
  if (!devices_) devices_ = std::make_unique<Devices>(*this);
  return devices_.get();
}

// A lane's scheduling state: all of it goes back to these values when a lane is reused.
struct Scheduler::LaneVars {
  using State = LaneState;
  Agent* agent = nullptr;
  uint32_t index = 0;
  uint32_t mem_thread = WeakMemory::kNoThread;  // kernel lanes in the weak memory model
  uint32_t race_thread = RaceDetector::kNoThread;  // the lane (or device agent) in the race detector
  State state = State::kRunnable;
  uint64_t resumes = 0;
  double step_ns = 0;  // kTimed: this lane's cost in the current warp step
  // Polling: the lane's last spin, at which shared-state version, and on what.
  uint64_t spin_mark = 0, spin_version = ~0ull;
  uint32_t spins = 0;
  bool ever_spun = false;
  const char* wait_what = nullptr;
  const uint64_t* wait_addr = nullptr;
  uint64_t wait_seen = 0;

  bool polling(uint64_t version, uint32_t need) const {
    return ever_spun && resumes - spin_mark <= kPollSlack && spin_version == version && spins >= need;
  }
};

// A lane and its fiber, which runs Scheduler::lane_main(this).
struct Scheduler::Lane : LaneVars {
  Lane(Scheduler* s, uint32_t i, size_t stack_bytes) : sched(s), fiber(&Scheduler::lane_main, this, stack_bytes) { index = i; }
  Scheduler* sched;
  Fiber fiber;
};

// Agents and lanes of finished schedulers, kept for the next ones on this thread: a run
// built an agent per warp and device and a lane (with its fiber) per thread, and freed them
// all at its end, a tenth of a queue_fuzz input under ASan.
struct Scheduler::Recycled {
  static constexpr size_t kKeep = 256;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::unique_ptr<Lane>> lanes;
  // A scheduler's own lists, empty, with the room they grew to.
  std::vector<std::unique_ptr<Agent>> agent_list;
  std::vector<std::unique_ptr<CtaBarrier>> barrier_list;
  std::vector<uint8_t> runnable;
  std::vector<uint32_t> fenwick;
  std::vector<Mmio> mmio;
  std::vector<Checked> checked;
  std::vector<Waker> wakers;
  std::vector<std::function<std::string()>> reporters;
  std::vector<const WatchTable*> watch_tables;
  // Swap a scheduler's lists (emptied) with these: a new one takes the room, a finished one
  // leaves it.
  void trade(Scheduler& s) {
    auto swap_empty = [](auto& mine, auto& spare) {
      mine.clear();
      mine.swap(spare);
    };
    swap_empty(s.agents_, agent_list), swap_empty(s.barriers_, barrier_list), swap_empty(s.runnable_, runnable);
    swap_empty(s.fenwick_, fenwick), swap_empty(s.mmio_, mmio), swap_empty(s.checked_, checked), swap_empty(s.wakers_, wakers);
    swap_empty(s.reporters_, reporters), swap_empty(s.watch_tables_, watch_tables);
  }
  static Recycled& get() {
    Fiber::make_pool();       // first: it outlives the fibers kept here
    thread_local Recycled r;  // explore's jobs run schedulers on several threads
    return r;
  }
};

// A CTA-wide barrier: every live lane of every warp of the CTA must arrive.
struct Scheduler::CtaBarrier {
  uint32_t live = 0, arrived = 0;
  std::vector<Scheduler::Lane*> waiting;
  void release(Scheduler& s) {
    for (Lane* l : waiting) s.set_state(*l, LaneState::kRunnable);
    waiting.clear();
    arrived = 0;
  }
  // bar.sync id, count (id 1 to 15): released by its count-th arrival, exited threads or not.
  struct Named {
    uint32_t arrived = 0;
    std::vector<Scheduler::Lane*> waiting;
  };
  std::array<Named, 16> named;
};

struct Scheduler::Agent {
  std::string name;                       // a device agent's; a warp's is made from its kernel's when shown
  std::function<void(AgentCtx&)> body;    // a device agent's
  std::shared_ptr<LaunchDone> launch;     // a warp's kernel
  uint32_t cta = 0, warp = 0;             // a warp's place in its kernel
  CtaBarrier* barrier = nullptr;  // the CTA's barrier (kernel warps only)
  uint32_t index = 0;
  bool daemon = false;
  std::vector<std::unique_ptr<Lane>> lanes;
  uint32_t live = 0;
  // Warp collective exchange, double-buffered by generation.
  int coll_kind = -1;
  uint32_t arrived = 0;
  uint64_t gen = 0;
  uint64_t in_val[32] = {};
  uint32_t in_arg[32] = {};
  uint64_t out[2][32] = {};
  int64_t priority = 0;
  double clock_ns = 0;  // kTimed
  uint32_t runnable_lanes = 0;
};

void Scheduler::set_state(Lane& l, LaneState s) {
  // A finished lane stays finished: abort_all resumes a lane waiting at a CTA barrier, which
  // then finishes (KernelAborted) still in the barrier's list, and the barrier's release must
  // not make it runnable again (its fiber's body has returned).
  if (l.state == s || l.state == LaneState::kDone) return;
  Agent& a = *l.agent;
  if (l.state == LaneState::kRunnable && --a.runnable_lanes == 0) set_runnable(a, false);
  l.state = s;
  if (s == LaneState::kRunnable && a.runnable_lanes++ == 0) set_runnable(a, true);
}

void Scheduler::set_runnable(Agent& a, bool on) {
  runnable_[a.index] = on;
  runnable_agents_ += on ? 1 : -1;
  for (size_t i = a.index + 1; i <= fenwick_.size(); i += i & (~i + 1)) fenwick_[i - 1] += on ? 1 : -1;
  if (opt_.policy == Policy::kTimed) {
    if (on) by_clock_.insert({a.clock_ns, a.index});
    else by_clock_.erase({a.clock_ns, a.index});
  }
}

// A new agent (its lanes runnable, its clock set): the pick structures grow to hold it.
void Scheduler::add_to_pick(Agent& a) {
  runnable_.push_back(0);
  if (runnable_.size() > fenwick_.size()) {
    fenwick_.assign(std::max<size_t>(16, fenwick_.size() * 2), 0);
    for (size_t j = 0; j < runnable_.size(); ++j)
      for (size_t i = j + 1; runnable_[j] && i <= fenwick_.size(); i += i & (~i + 1)) ++fenwick_[i - 1];
  }
  for (auto& l : a.lanes) {
    l->agent = &a;
    if (l->state == LaneState::kRunnable && a.runnable_lanes++ == 0) set_runnable(a, true);
  }
  if (a.live != 0) ++live_agents_, live_user_agents_ += !a.daemon;
}

// The runnable agent with k runnable agents before it in index order.
Scheduler::Agent* Scheduler::kth_runnable(size_t k) const {
  size_t pos = 0;
  for (size_t step = fenwick_.size(); step != 0; step >>= 1)
    if (fenwick_[pos + step - 1] <= k) k -= fenwick_[pos + step - 1], pos += step;
  return agents_[pos].get();
}

Scheduler::Scheduler(SchedOptions o) : opt_(o), rng_(o.seed * 0x9E3779B97F4A7C15ull | 1) {
  if (opt_.stack_bytes == 0) opt_.stack_bytes = kDefaultStack;
  Recycled::get().trade(*this);  // the lists of the scheduler before, with their room
  if (opt_.memory == MemoryModel::kWeak) {
    weak_ = std::make_unique<WeakMemory>(opt_.seed);
    weak_->set_namer([this](const void* a) { return name_of(static_cast<const uint64_t*>(a)); });
  }
  if (opt_.races) {
    race_ = std::make_unique<RaceDetector>();
    race_->set_namer([this](const void* a) { return watched_name(static_cast<const uint64_t*>(a)); });
  }
}

Scheduler::~Scheduler() {
  Recycled& r = Recycled::get();
  for (auto& a : agents_) {
    for (auto& l : a->lanes)
      if (r.lanes.size() < Recycled::kKeep && l->fiber.rearmable()) r.lanes.push_back(std::move(l));
    a->lanes.clear();  // the lanes not kept
    if (r.agents.size() < Recycled::kKeep) {
      std::vector<std::unique_ptr<Lane>> room = std::move(a->lanes);
      *a = Agent{};
      a->lanes = std::move(room);
      r.agents.push_back(std::move(a));
    }
  }
  r.trade(*this);  // the agents not kept, the barriers and the hooks go here; the room stays
}

std::unique_ptr<Scheduler::Agent> Scheduler::new_agent() {
  Recycled& r = Recycled::get();
  if (r.agents.empty()) return std::make_unique<Agent>();
  std::unique_ptr<Agent> a = std::move(r.agents.back());
  r.agents.pop_back();
  return a;
}

std::unique_ptr<Scheduler::Lane> Scheduler::new_lane(uint32_t index) {
  Recycled& r = Recycled::get();
  for (size_t i = r.lanes.size(); i-- > 0;)
    if (r.lanes[i]->fiber.stack_bytes() == opt_.stack_bytes) {
      std::unique_ptr<Lane> l = std::move(r.lanes[i]);
      r.lanes[i] = std::move(r.lanes.back());
      r.lanes.pop_back();
      static_cast<LaneVars&>(*l) = LaneVars{};
      l->index = index;
      l->sched = this;
      l->fiber.rearm(&Scheduler::lane_main, l.get());
      return l;
    }
  return std::make_unique<Lane>(this, index, opt_.stack_bytes);
}

std::string Scheduler::describe() const {
  std::ostringstream os;
  os << "seed=" << opt_.seed << " policy=" << policy_name(opt_.policy);
  if (opt_.policy == Policy::kPct) os << " depth=" << opt_.pct_depth;
  if (weak_) os << " memory=weak (" << weak_->describe() << ")";
  return os.str();
}

void Scheduler::launch(const std::string& name, const LaunchConfig& cfg, std::function<void(SimCtx&)> body,
                       std::function<void()> on_done) {
  if (aborted_) return;
  const uint32_t lanes = std::clamp<uint32_t>(cfg.lanes, 1, 32);
  auto done = std::make_shared<LaunchDone>();
  done->name = name;
  done->cfg = cfg;
  done->cfg.lanes = lanes;
  done->body = std::move(body);
  done->left = uint64_t(cfg.ctas) * cfg.warps_per_cta * lanes;
  done->fn = std::move(on_done);
  agents_.reserve(agents_.size() + size_t(cfg.ctas) * cfg.warps_per_cta);
  for (uint32_t cta = 0; cta < cfg.ctas; ++cta) {
    const uint32_t global_cta = uint32_t(barriers_.size());
    barriers_.push_back(std::make_unique<CtaBarrier>());
    CtaBarrier* bar = barriers_.back().get();
    bar->live = cfg.warps_per_cta * lanes;
    for (uint32_t w = 0; w < cfg.warps_per_cta; ++w) {
      std::unique_ptr<Agent> a = new_agent();
      a->launch = done;
      a->cta = cta;
      a->warp = w;
      a->barrier = bar;
      a->index = uint32_t(agents_.size());
      a->clock_ns = cur_lane_ != nullptr ? now() : 0;  // launched mid-run: starts at its launcher's time
      // PCT draws the priorities at the start; a kernel launched mid-run draws its own.
      if (cur_lane_ != nullptr && opt_.policy == Policy::kPct)
        a->priority = int64_t(opt_.pct_depth + next_rand(rng_) % (agents_.size() + 1));
      a->lanes.reserve(lanes);
      for (uint32_t i = 0; i < lanes; ++i) {
        std::unique_ptr<Lane> l = new_lane(i);
        if (weak_) {
          l->mem_thread = weak_->add_thread(global_cta, cfg.gpu, agent_name(*a) + " lane " + std::to_string(i));
          done->threads.push_back(l->mem_thread);
        }
        // Launched by a running agent: ordered after what it did before the launch.
        if (race_) l->race_thread = race_->add_thread(agent_name(*a) + " lane " + std::to_string(i), cur_lane_ != nullptr ? cur_actor_ : RaceDetector::kNoThread);
        a->lanes.push_back(std::move(l));
      }
      a->live = lanes;
      Agent* ap = a.get();
      agents_.push_back(std::move(a));
      add_to_pick(*ap);
    }
  }
}

void Scheduler::lane_main(void* lane) {
  Lane& l = *static_cast<Lane*>(lane);
  Scheduler& s = *l.sched;
  Agent& a = *l.agent;
  try {
    if (a.launch) {
      SimCtx ctx(&s, l.index, a.warp, a.cta, a.launch->cfg);
      a.launch->body(ctx);
    } else {
      AgentCtx ctx(&s);
      a.body(ctx);
    }
  } catch (const KernelAborted&) {
  }
  s.finish_lane(a, l);
}

std::string Scheduler::agent_name(const Agent& a) {
  if (!a.launch) return a.name;
  return a.launch->name + "[cta " + std::to_string(a.cta) + " warp " + std::to_string(a.warp) + "]";
}

uint32_t Scheduler::add_agent(const std::string& name, std::function<void(AgentCtx&)> body, bool daemon) {
  std::unique_ptr<Agent> a = new_agent();
  a->name = name;
  a->body = std::move(body);
  a->index = uint32_t(agents_.size());
  a->daemon = daemon;
  a->lanes.push_back(new_lane(0));
  if (race_) a->lanes[0]->race_thread = race_->add_thread(name, cur_lane_ != nullptr ? cur_actor_ : RaceDetector::kNoThread);
  a->live = 1;
  Agent* ap = a.get();
  agents_.push_back(std::move(a));
  add_to_pick(*ap);
  return ap->index;
}

bool Scheduler::park(const char* what) {
  Agent& a = *cur_agent_;
  Lane& l = *cur_lane_;
  if (aborted_ || (stopping_ && a.daemon)) return false;
  l.wait_what = what;
  l.wait_addr = nullptr;
  set_state(l, LaneState::kParked);
  parked_.push_back(a.index);
  yield();
  return !(aborted_ || (stopping_ && a.daemon));
}

uint32_t Scheduler::current_agent() const { return cur_agent_->index; }

void Scheduler::wake(uint32_t id) {
  Lane& l = *agents_[id]->lanes.front();
  if (l.state != LaneState::kParked) return;
  set_state(l, LaneState::kRunnable);
  std::erase(parked_, id);
}


void Scheduler::map_mmio(uint64_t base, uint64_t size, MmioFn fn, void* obj) { mmio_.push_back({base, size, fn, obj, nullptr}); }

void Scheduler::map_mmio(uint64_t base, uint64_t size, std::function<void(uint64_t, uint64_t)> fn) {
  auto held = std::make_shared<std::function<void(uint64_t, uint64_t)>>(std::move(fn));
  const MmioFn call = [](void* f, uint64_t a, uint64_t v) { (*static_cast<std::function<void(uint64_t, uint64_t)>*>(f))(a, v); };
  mmio_.push_back({base, size, call, held.get(), held});
}

void Scheduler::check_stores(const void* base, size_t bytes, std::function<std::string(const void*)> check) {
  insert_range(checked_, Checked{reinterpret_cast<uintptr_t>(base), bytes, std::move(check)});
  store_hooks_ = true;
  plain_ = false;
}

void Scheduler::wake_on_store(const void* addr, size_t bytes, uint32_t id) {
  insert_range(wakers_, Waker{reinterpret_cast<uintptr_t>(addr), bytes, id});
  store_hooks_ = true;
  plain_ = false;
}

// A store changed `addr`: check_stores' check of its range (until one has failed), then
// wake_on_store's wake of its range.
void Scheduler::on_store(const void* addr) {
  if (addr == nullptr) return;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (const Checked* c = range_at(checked_, a); c != nullptr && violation_.empty()) violation_ = c->check(addr);
  if (const Waker* w = range_at(wakers_, a)) wake(w->id);
}

void Scheduler::check_bytes(const void* addr) {
  if (const Checked* c = range_at(checked_, reinterpret_cast<uintptr_t>(addr)); c != nullptr && violation_.empty()) violation_ = c->check(addr);
}

// ---- inside fibers ----

void Scheduler::yield() { Fiber::switch_to(cur_lane_->fiber, main_); }

void Scheduler::point_slow() {
  if (aborted_ || (stopping_ && cur_agent_->daemon)) throw KernelAborted{};
  if (opt_.policy == Policy::kPreempt) {
    if (++points_ != opt_.preempt_at) return;
    preempted_ = true;
    preempted_what_ = agent_name(*cur_agent_) + " lane " + std::to_string(cur_lane_->index) + " at point " + std::to_string(points_);
  }
  if (opt_.policy != Policy::kRunToCompletion) {
    yield();
    if (aborted_ || (stopping_ && cur_agent_->daemon)) throw KernelAborted{};
  }
}

// Lanes of a warp run in lockstep: a warp step costs what its slowest lane spent, so costs
// collect per lane and step() adds their maximum to the warp's clock.
void Scheduler::advance(double ns) {
  if (opt_.policy == Policy::kTimed && cur_lane_ != nullptr) cur_lane_->step_ns += ns;
}

uint32_t Scheduler::mem_thread() const { return cur_lane_ != nullptr ? cur_lane_->mem_thread : WeakMemory::kNoThread; }

void Scheduler::fence_weak(exec::Scope s) {
  if (cur_lane_->mem_thread == WeakMemory::kNoThread) return;
  // Stores the fence carries land one at a time, with scheduling points between them.
  const uint64_t upto = weak_->last_store();
  do point();
  while (weak_->fence_step(cur_lane_->mem_thread, s, upto));
  weak_->fenced(cur_lane_->mem_thread, s);
}

double Scheduler::now() const {
  return cur_agent_ != nullptr && cur_lane_ != nullptr ? cur_agent_->clock_ns + cur_lane_->step_ns : 0;
}

void Scheduler::wait_until_ns(double t) {
  if (opt_.policy == Policy::kTimed && cur_lane_ != nullptr && t > now()) cur_lane_->step_ns = t - cur_agent_->clock_ns;
}

void Scheduler::observe(const void* addr) {
  if (opt_.policy != Policy::kTimed || addr == nullptr) return;
  if (const double* t = write_ns_.find(addr)) wait_until_ns(*t);
}

void Scheduler::wrote(const void* addr) {
  if (opt_.policy == Policy::kTimed && addr != nullptr) write_ns_.set(addr, now());
}

void Scheduler::record_timed(Access kind, bool changed, const void* addr) {
  observe(addr);  // what it read was written no earlier than this
  advance(kind == Access::kMmio ? opt_.costs.doorbell_mmio_ns : opt_.costs.gpu_access_ns);
  if (changed || kind == Access::kMmio) wrote(addr);
}

void Scheduler::mmio_store(uint64_t* addr, uint64_t value) {
  point();
  if (!route_mmio(addr, value)) {
    if (weak_) weak_->device_write(addr, sizeof value);  // uncached: straight to memory
    if (race_) race_->relaxed_store(cur_actor_, addr);
    *addr = value;
  }
  record(Access::kMmio, value, true, addr);  // a doorbell is an event even when the value repeats
}

bool Scheduler::spin(const char* what, const uint64_t* addr, uint64_t seen) {
  Agent& a = *cur_agent_;
  Lane& l = *cur_lane_;
  if (aborted_ || (stopping_ && a.daemon)) return false;
  l.wait_what = what;
  l.wait_addr = addr;
  l.wait_seen = seen;
  if (l.spin_version != version_) l.spin_version = version_, l.spins = 0;
  ++l.spins;
  l.spin_mark = l.resumes;
  l.ever_spun = true;
  if (weak_ && l.mem_thread != WeakMemory::kNoThread) weak_->polled(l.mem_thread);
  if (l.spins == opt_.hang_spins) check_hang();
  if (opt_.policy == Policy::kPct) a.priority = --lowest_priority_;  // a poller gives way
  advance(opt_.costs.poll_ns);
  yield();
  return !(aborted_ || (stopping_ && a.daemon));
}

uint64_t Scheduler::collective(int kind, uint64_t value, uint32_t arg) {
  if (aborted_) throw KernelAborted{};
  Agent& a = *cur_agent_;
  Lane& l = *cur_lane_;
  if (a.arrived != 0 && a.coll_kind != kind) {
    report_ = "divergent warp collectives in " + agent_name(a) + " (lanes called different collectives)\n";
    hang_ = true;
    yield();
    throw KernelAborted{};
  }
  a.coll_kind = kind;
  a.in_val[l.index] = value;
  a.in_arg[l.index] = arg % uint32_t(a.lanes.size());
  ++a.arrived;
  const uint64_t gen = a.gen;
  if (a.arrived == a.live) {
    complete_collective(a);
  } else {
    set_state(l, LaneState::kCollective);
    yield();
    if (aborted_) throw KernelAborted{};
  }
  return a.out[gen & 1][l.index];
}

void Scheduler::sync_cta() {
  if (aborted_) throw KernelAborted{};
  CtaBarrier* b = cur_agent_->barrier;
  if (b == nullptr) return;  // device agents have no CTA
  // __syncthreads orders memory among the CTA's threads, as a CTA fence on each side.
  if (weak_) weak_->fence(cur_lane_->mem_thread, exec::Scope::kCta);
  if (++b->arrived == b->live) {
    if (weak_) weak_->synced(cur_lane_->mem_thread);
    if (race_) {
      std::vector<uint32_t> ts{cur_actor_};
      for (const Lane* l : b->waiting) ts.push_back(l->race_thread);
      race_->barrier(ts);
    }
    b->release(*this);
    return;
  }
  set_state(*cur_lane_, LaneState::kBarrier);
  b->waiting.push_back(cur_lane_);
  yield();
  if (aborted_) throw KernelAborted{};
  if (weak_) weak_->synced(cur_lane_->mem_thread);
}

void Scheduler::sync_threads(uint32_t id, uint32_t count) {
  if (aborted_) throw KernelAborted{};
  CtaBarrier* cb = cur_agent_->barrier;
  if (cb == nullptr) return;
  if (id == 0 || id >= cb->named.size() || count == 0) {
    report_ = "sync_threads(" + std::to_string(id) + ", " + std::to_string(count) + ") in " + agent_name(*cur_agent_) +
              ": a named barrier is 1 to 15, of 1 or more threads\n";
    hang_ = true;
    yield();
    throw KernelAborted{};
  }
  CtaBarrier::Named& b = cb->named[id];
  if (weak_) weak_->fence(cur_lane_->mem_thread, exec::Scope::kCta);  // as sync_cta: a CTA fence on each side
  if (++b.arrived == count) {
    if (weak_) weak_->synced(cur_lane_->mem_thread);
    if (race_) {
      std::vector<uint32_t> ts{cur_actor_};
      for (const Lane* l : b.waiting) ts.push_back(l->race_thread);
      race_->barrier(ts);
    }
    for (Lane* l : b.waiting) set_state(*l, LaneState::kRunnable);
    b.waiting.clear();
    b.arrived = 0;
    return;
  }
  set_state(*cur_lane_, LaneState::kBarrier);
  b.waiting.push_back(cur_lane_);
  yield();
  if (aborted_) throw KernelAborted{};
  if (weak_) weak_->synced(cur_lane_->mem_thread);
}

void Scheduler::complete_collective(Agent& a) {
  uint64_t ballot = 0;
  for (const auto& l : a.lanes)
    if (l->state != Lane::State::kDone && a.in_val[l->index] != 0) ballot |= uint64_t(1) << l->index;
  uint64_t* out = a.out[a.gen & 1];
  // __syncwarp (bar.warp.sync) orders the warp's lanes; a shuffle or a ballot only hands on
  // what the lanes did before it to what depends on its value (race_detector.h's dep).
  if (race_) {
    std::vector<uint32_t> ts;
    for (const auto& l : a.lanes)
      if (l->state != Lane::State::kDone) ts.push_back(l->race_thread);
    race_->barrier(ts, a.coll_kind != 2);
  }
  for (const auto& l : a.lanes) {
    const uint32_t i = l->index;
    out[i] = a.coll_kind == 0 ? a.in_val[a.in_arg[i]] : a.coll_kind == 1 ? ballot : 0;
    if (l->state == Lane::State::kCollective) set_state(*l, LaneState::kRunnable);
  }
  a.arrived = 0;
  ++a.gen;
}

void Scheduler::finish_lane(Agent& a, Lane& l) {
  set_state(l, LaneState::kDone);
  const std::shared_ptr<LaunchDone>& launch = a.launch;
  if (race_ && launch) race_->release_to(l.race_thread, launch.get());  // what completion hands on: every lane's work
  if (launch && --launch->left == 0 && launch->fn) {
    if (race_) race_->acquire_from(l.race_thread, launch.get());
    // The kernel completed: its stores are visible to the stream work behind it, which may
    // start now. (Without a successor its buffers drain as the run goes on: a concurrent
    // observer such as the host may still see them land out of order.)
    if (weak_)
      for (uint32_t t : launch->threads) weak_->drain_thread(t);
    launch->fn();
    ++version_;
  }
  if (--a.live == 0) --live_agents_, live_user_agents_ -= !a.daemon;
  if (a.arrived != 0 && a.arrived == a.live) complete_collective(a);
  if (a.barrier != nullptr && --a.barrier->live != 0 && a.barrier->arrived == a.barrier->live) a.barrier->release(*this);
}

// ---- the scheduler proper (main context) ----

void Scheduler::resume(Agent& a, Lane& l) {
  cur_agent_ = &a;
  cur_lane_ = &l;
  who_mix_ = ((uint64_t(a.index) << 40) | (uint64_t(l.index) << 32)) * kMix;
  cur_daemon_ = a.daemon;
  cur_actor_ = l.race_thread;
  plain_ = opt_.policy == Policy::kRunToCompletion && !weak_ && !race_ && !store_hooks_ && !aborted_ && !(stopping_ && a.daemon);
  ++l.resumes;
  ++steps_;
  Fiber::switch_to(main_, l.fiber);
  cur_lane_ = nullptr;
  cur_actor_ = RaceDetector::kNoThread;
  plain_ = false;
}

void Scheduler::step(Agent& a) {
  // Lockstep: one warp step resumes every runnable lane once, in lane order.
  double cost = 0;
  for (auto& l : a.lanes) {
    if (l->state != Lane::State::kRunnable) continue;
    resume(a, *l);
    cost = std::max(cost, l->step_ns);
    l->step_ns = 0;
    if (hang_) break;
  }
  if (cost != 0 && runnable_[a.index] && opt_.policy == Policy::kTimed) {
    by_clock_.erase({a.clock_ns, a.index});
    by_clock_.insert({a.clock_ns + cost, a.index});
  }
  a.clock_ns += cost;
}

Scheduler::Agent* Scheduler::pick() {
  Agent* best = nullptr;
  size_t candidates = 0;
  switch (opt_.policy) {
    case Policy::kRandom:
    case Policy::kScripted: {
      candidates = runnable_agents_;
      if (candidates == 0) return nullptr;
      size_t k = 0;
      if (opt_.policy == Policy::kRandom) k = next_rand(rng_);
      else if (opt_.choose) k = opt_.choose(candidates);
      else k = script_pos_ < opt_.script.size() ? opt_.script[script_pos_++] : round_robin_++;
      return kth_runnable(k % candidates);
    }
    case Policy::kPct:
      for (auto& a : agents_)
        if (runnable_[a->index] && (best == nullptr || a->priority > best->priority)) best = a.get();
      return best;
    case Policy::kTimed:  // the earliest agent in simulated time; ties by index
      return by_clock_.empty() ? nullptr : agents_[by_clock_.begin()->second].get();
    case Policy::kPreempt:
      if (preempted_ && runnable_agents_ != 0) {
        preempted_ = false;
        Agent* a = kth_runnable(opt_.preempt_to % runnable_agents_);
        rr_next_ = (a->index + 1) % agents_.size();
        preempted_what_ += ", then " + agent_name(*a);
        return a;
      }
      [[fallthrough]];
    case Policy::kRunToCompletion:
      for (size_t i = 0; i < agents_.size(); ++i) {
        Agent* a = agents_[(rr_next_ + i) % agents_.size()].get();
        if (runnable_[a->index]) {
          rr_next_ = (rr_next_ + i + 1) % agents_.size();
          return a;
        }
      }
      return nullptr;
  }
  return nullptr;
}

void Scheduler::check_hang() {
  for (const auto& a : agents_)
    for (const auto& l : a->lanes) {
      if (l->state == Lane::State::kDone || l->state == Lane::State::kCollective || l->state == Lane::State::kBarrier ||
          l->state == Lane::State::kParked)  // waits for a wake, not a word
        continue;
      if (!l->polling(version_, opt_.hang_spins)) return;
    }
  // Not a hang while a buffered store or a stale view could still change what a poller sees.
  if (weak_ && weak_->settle()) {
    ++version_;
    return;
  }
  hang_ = true;
  report_ = hang_report();
}

std::string Scheduler::watched_name(const uint64_t* addr) const {
  const std::string* found = nullptr;
  for_each_watch([&](const std::string& name, const uint64_t* a) {
    if (a == addr && found == nullptr) found = &name;
  });
  return found != nullptr ? *found : std::string();
}

std::string Scheduler::name_of(const uint64_t* addr) const {
  if (std::string n = watched_name(addr); !n.empty()) return n;
  if (race_)  // a named region's offset reads the same in every run; an address does not
    if (std::string n = race_->range_name(addr); !n.empty()) return n;
  std::ostringstream os;
  os << static_cast<const void*>(addr);
  return os.str();
}

std::string Scheduler::hang_report() const {
  std::ostringstream os;
  os << "hang: every live lane polls and no shared word changed for " << opt_.hang_spins << " polls each (step "
     << steps_ << ", " << describe() << ")\n";
  for (const auto& a : agents_) {
    // Group consecutive lanes in the same state.
    size_t i = 0;
    while (i < a->lanes.size()) {
      const Lane& l = *a->lanes[i];
      auto same = [&](const Lane& o) {
        if (o.state != l.state) return false;
        return l.state != Lane::State::kRunnable ||
               (o.wait_what == l.wait_what && o.wait_addr == l.wait_addr && o.wait_seen == l.wait_seen);
      };
      size_t j = i + 1;
      while (j < a->lanes.size() && same(*a->lanes[j])) ++j;
      os << "  " << agent_name(*a);
      if (a->lanes.size() > 1) os << (j - i > 1 ? " lanes " : " lane ") << i << (j - i > 1 ? "-" + std::to_string(j - 1) : "");
      os << ": ";
      if (l.state == Lane::State::kDone) os << "finished";
      else if (l.state == Lane::State::kCollective) os << "at a warp collective";
      else if (l.state == Lane::State::kBarrier) os << "at a CTA barrier";
      else {
        os << "waits in \"" << (l.wait_what ? l.wait_what : "?") << "\"";
        if (l.wait_addr != nullptr) os << " on " << name_of(l.wait_addr) << ", last seen " << l.wait_seen;
      }
      os << "\n";
      i = j;
    }
  }
  for (const auto& r : reporters_) os << r();
  if (!watches_.empty() || !watch_tables_.empty()) {
    os << "  watched:";
    for_each_watch([&](const std::string& name, const uint64_t* addr) { os << " " << name << "=" << *addr; });
    os << "\n";
  }
  return os.str();
}

void Scheduler::abort_all() {
  aborted_ = true;
  for (int round = 0; round < 1000; ++round) {
    bool any = false;
    for (auto& a : agents_)
      for (auto& l : a->lanes) {
        if (l->state == Lane::State::kDone) continue;
        any = true;
        set_state(*l, LaneState::kRunnable);
        resume(*a, *l);
      }
    if (!any) return;
  }
}

RunResult Scheduler::run() {
  // PCT: distinct random priorities above d, and d-1 change points in [1, pct_steps].
  if (opt_.policy == Policy::kPct) {
    std::vector<uint32_t> perm(agents_.size());
    for (uint32_t i = 0; i < perm.size(); ++i) perm[i] = i;
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[next_rand(rng_) % i]);
    for (size_t i = 0; i < agents_.size(); ++i) agents_[i]->priority = int64_t(opt_.pct_depth + perm[i]);
    for (uint32_t j = 1; j < opt_.pct_depth; ++j) change_points_.push_back(1 + next_rand(rng_) % opt_.pct_steps);
    std::sort(change_points_.begin(), change_points_.end());
  }
  RunResult r;
  size_t next_change = 0;
  uint64_t warp_steps = 0;
  for (;;) {
    if (live_agents_ == 0) break;
    if (live_user_agents_ == 0) {
      stopping_ = true;
      for (const uint32_t id : std::exchange(parked_, {})) wake(id);  // parked daemons see the stop and return
    }
    Agent* a = pick();
    if (a == nullptr) {
      hang_ = true;
      report_ = "deadlock: no agent can run\n" + hang_report();
      break;
    }
    ++warp_steps;
    while (next_change < change_points_.size() && change_points_[next_change] <= warp_steps)
      a->priority = int64_t(opt_.pct_depth) - 1 - int64_t(next_change++);
    if (weak_ && weak_->step()) ++version_;
    step(*a);
    if (opt_.observe && warp_steps % opt_.observe_every == 0) opt_.observe(warp_steps, a->clock_ns);
    if (hang_) break;
    if (steps_ >= opt_.max_steps) {
      r.outcome = Outcome::kStepLimit;
      report_ = "step limit " + std::to_string(opt_.max_steps) + " reached (" + describe() + ")\n" + hang_report();
      break;
    }
  }
  if (hang_) r.outcome = Outcome::kHang;
  if (weak_ && r.outcome != Outcome::kCompleted) report_ += weak_->report();
  if (r.outcome != Outcome::kCompleted) abort_all();
  if (weak_) weak_->settle();  // kernel end: every store is visible to the host
  r.steps = steps_;
  r.accesses = accesses_;
  for (const auto& a : agents_)
    if (!a->daemon) r.sim_time_ns = std::max(r.sim_time_ns, a->clock_ns);
  r.trace_hash = hash_;
  r.report = report_;
  r.points = points_;
  r.preempted = preempted_what_;
  if (race_ && race_->found()) r.races = race_->report();
  return r;
}

}  // namespace doorbell::gpu_sim
