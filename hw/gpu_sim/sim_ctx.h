// The CPU GPU model's execution context: one lane of a simulated warp. It satisfies
// exec::ExecContext; every atomic, ordered load/store and MMIO store is a scheduling point
// of the deterministic scheduler, and memory is real host memory (the model is sequentially
// consistent; scopes and orders are carried for a later weak-memory mode).
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "hw/gpu_sim/scheduler.h"

namespace doorbell::gpu_sim {

class SimCtx {
 public:
  SimCtx(Scheduler* s, uint32_t lane, uint32_t warp, uint32_t cta, const LaunchConfig& cfg)
      : s_(s), lane_(lane), warp_(warp), cta_(cta), cfg_(cfg) {}

  uint32_t lane() const { return lane_; }
  uint32_t warp() const { return warp_; }
  uint32_t cta() const { return cta_; }
  uint32_t warps_per_cta() const { return cfg_.warps_per_cta; }
  uint32_t num_ctas() const { return cfg_.ctas; }
  uint32_t warp_size() const { return cfg_.lanes; }

  uint64_t shfl(uint64_t v, uint32_t src) { return s_->collective(0, v, src); }
  uint32_t ballot(bool b) { return uint32_t(s_->collective(1, b, 0)); }
  bool all(bool b) { return ballot(b) == (cfg_.lanes == 32 ? ~0u : (1u << cfg_.lanes) - 1); }
  bool any(bool b) { return ballot(b) != 0; }
  void syncwarp() { (void)s_->collective(2, 0, 0); }
  void sync_cta() { s_->sync_cta(); }

  template <exec::Scope S>
  uint64_t atomic_add(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    s_->point();
    const uint64_t old = *p;
    *p = old + v;
    s_->record(Access::kAdd, old, v != 0, p);
    return old;
  }
  template <exec::Scope S>
  uint64_t atomic_cas(exec::ScopeTag<S>, uint64_t* p, uint64_t expected, uint64_t desired) {
    s_->point();
    const uint64_t old = *p;
    if (old == expected) *p = desired;
    s_->record(Access::kCas, old, old == expected && desired != old, p);
    return old;
  }
  template <exec::Scope S>
  uint64_t atomic_max(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    s_->point();
    const uint64_t old = *p;
    if (v > old) *p = v;
    s_->record(Access::kMax, old, v > old, p);
    return old;
  }
  template <exec::Scope S>
  uint64_t atomic_exch(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    s_->point();
    const uint64_t old = *p;
    *p = v;
    s_->record(Access::kExch, old, v != old, p);
    return old;
  }
  template <exec::Scope S, exec::Order O>
  uint64_t load(exec::ScopeTag<S>, exec::OrderTag<O>, const uint64_t* p) {
    s_->point();
    const uint64_t v = *p;
    s_->record(Access::kLoad, v, false, p);
    return v;
  }
  template <exec::Scope S, exec::Order O>
  void store(exec::ScopeTag<S>, exec::OrderTag<O>, uint64_t* p, uint64_t v) {
    s_->point();
    const bool changed = *p != v;
    *p = v;
    s_->record(Access::kStore, v, changed, p);
  }
  // Sequentially consistent model: fences order nothing further (weak-memory mode hooks here).
  template <exec::Scope S>
  void fence(exec::ScopeTag<S>) {}
  void mmio_store64(uint64_t* p, uint64_t v) { s_->mmio_store(p, v); }
  bool spin(const char* what, const uint64_t* addr, uint64_t seen) { return s_->spin(what, addr, seen); }

 private:
  Scheduler* s_;
  uint32_t lane_, warp_, cta_;
  LaunchConfig cfg_;
};

static_assert(exec::ExecContext<SimCtx>);

// What a device agent (NIC engine, proxy) sees: scheduling points, polls, and a way to
// report that it changed shared state outside the SimCtx accessors.
class AgentCtx {
 public:
  explicit AgentCtx(Scheduler* s) : s_(s) {}
  void point() { s_->point(); }
  void changed(uint64_t what = 0) { s_->record(Access::kDevice, what, true); }
  // Simulated time (timed schedule): charge this agent, wait for a write it observed, note a
  // write it made, read its clock, wait until a time.
  void advance(double ns) { s_->advance(ns); }
  void observe(const void* addr) { s_->observe(addr); }
  void wrote(const void* addr) { s_->wrote(addr); }
  void wait_until_ns(double t) { s_->wait_until_ns(t); }
  double now() const { return s_->now(); }
  bool spin(const char* what, const uint64_t* addr = nullptr, uint64_t seen = 0) { return s_->spin(what, addr, seen); }
  bool stopping() const { return s_->stopping(); }

 private:
  Scheduler* s_;
};

}  // namespace doorbell::gpu_sim
