// The CPU GPU model's execution context: one lane of a simulated warp. It satisfies
// exec::ExecContext; every atomic, ordered load/store and MMIO store is a scheduling point
// of the deterministic scheduler. Memory is real host memory, sequentially consistent by
// default; in the weak mode (SchedOptions::memory) every access goes through WeakMemory,
// where scopes and orders decide what other agents see.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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
  // __syncwarp orders memory among the warp's lanes (bar.warp.sync), as a CTA fence each side.
  void syncwarp() {
    WeakMemory* w = s_->weak();
    if (w != nullptr) w->fence(s_->mem_thread(), exec::Scope::kCta);
    (void)s_->collective(2, 0, 0);
    if (w != nullptr) w->synced(s_->mem_thread());
  }
  void sync_cta() { s_->sync_cta(); }
  void sync_threads(uint32_t id, uint32_t count) { s_->sync_threads(id, count); }

  // Atomics act on the newest value (after the stores they must follow have landed).
  template <exec::Scope S>
  [[gnu::always_inline]] uint64_t atomic_add(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return rmw(Access::kAdd, p, [v](uint64_t o) { return o + v; });
  }
  template <exec::Scope S>
  [[gnu::always_inline]] uint64_t atomic_cas(exec::ScopeTag<S>, uint64_t* p, uint64_t expected, uint64_t desired) {
    return rmw(Access::kCas, p, [=](uint64_t o) { return o == expected ? desired : o; });
  }
  template <exec::Scope S>
  [[gnu::always_inline]] uint64_t atomic_max(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return rmw(Access::kMax, p, [v](uint64_t o) { return v > o ? v : o; });
  }
  template <exec::Scope S>
  [[gnu::always_inline]] uint64_t atomic_exch(exec::ScopeTag<S>, uint64_t* p, uint64_t v) {
    return rmw(Access::kExch, p, [v](uint64_t) { return v; });
  }
  // Ordered loads and stores of 1, 2, 4 or 8 bytes. In the weak mode a store enters the
  // thread's store buffer (release: after a fence of its scope) and a load may read a value
  // its view still allows (acquire: then the view catches up).
  template <exec::Scope S, exec::Order O, class T>
  [[gnu::always_inline]] T load(exec::ScopeTag<S>, exec::OrderTag<O>, const T* p) {
    static_assert(exec::kAccessSize<T>, "loads are of 1, 2, 4 or 8 bytes");
    if (s_->plain()) [[likely]] {
      const T v = *p;
      s_->record_plain(Access::kLoad, uint64_t(v), false);
      return v;
    }
    return load_slow<S, O>(p);
  }
  template <exec::Scope S, exec::Order O, class T>
  [[gnu::always_inline]] void store(exec::ScopeTag<S>, exec::OrderTag<O>, T* p, std::type_identity_t<T> v) {
    static_assert(exec::kAccessSize<T>, "stores are of 1, 2, 4 or 8 bytes");
    if (s_->plain()) [[likely]] {
      const bool changed = *p != v;
      *p = v;
      s_->record_plain(Access::kStore, uint64_t(v), changed);
      return;
    }
    store_slow<S, O>(p, v);
  }
  // Plain (weak) byte ranges, e.g. WQE segments: not scheduling points; in the weak mode
  // they are buffered and read like any other store and load. The race detector checks them
  // (the caller's file:line names the access).
  void write_bytes(void* dst, const void* src, size_t n, const char* file = __builtin_FILE(), uint32_t line = __builtin_LINE()) {
    if (!s_->plain() && n > kPiece && s_->byte_points()) [[unlikely]]
      return by_pieces(dst, src, n, [&](void* d, const void* sr, size_t k) { write_bytes(d, sr, k, file, line); });
    if (RaceDetector* r = s_->race()) [[unlikely]] r->write(s_->race_thread(), dst, n, r->site(file, line));
    if (WeakMemory* w = s_->weak()) w->store(s_->mem_thread(), dst, src, n);
    else if (n % 8 == 0) copy_words(dst, src, n);
    else std::memcpy(dst, src, n);
    s_->bytes_stored(dst);
  }
  void read_bytes(void* dst, const void* src, size_t n, const char* file = __builtin_FILE(), uint32_t line = __builtin_LINE()) {
    if (!s_->plain() && n > kPiece && s_->byte_points()) [[unlikely]]
      return by_pieces(dst, src, n, [&](void* d, const void* sr, size_t k) { read_bytes(d, sr, k, file, line); });
    if (RaceDetector* r = s_->race()) [[unlikely]] r->read(s_->race_thread(), src, n, r->site(file, line));
    if (WeakMemory* w = s_->weak()) w->load(s_->mem_thread(), src, dst, n);
    else std::memcpy(dst, src, n);
  }
  template <exec::Scope S>
  void fence(exec::ScopeTag<S>) {
    s_->fence(S);  // the sequentially consistent mode has nothing to order
  }
  void mmio_store64(uint64_t* p, uint64_t v) {
    if (s_->plain() && s_->route_mmio(p, v)) [[likely]] {
      s_->record_plain(Access::kMmio, v, true);  // a doorbell is an event even when the value repeats
      return;
    }
    s_->mmio_store(p, v);
  }
  bool spin(const char* what, const uint64_t* addr, uint64_t seen) { return s_->spin(what, addr, seen); }
  // Simulated time (timed schedule; no-ops otherwise), for device models that charge a lane
  // for the data it moves (the multicast switch): its clock, and waiting until a time.
  double now() const { return s_->now(); }
  void wait_until_ns(double t) { s_->wait_until_ns(t); }

 private:
  // An atomic read-modify-write leaving next(old) (old itself where it writes nothing). In
  // the weak mode the stores it must follow land first and the model learns whether it
  // writes.
  template <class Next>
  [[gnu::always_inline]] uint64_t rmw(Access kind, uint64_t* p, Next next) {
    if (s_->plain()) [[likely]] {
      const uint64_t old = *p, v = next(old);
      *p = v;
      s_->record_plain(kind, old, v != old);
      return old;
    }
    return rmw_slow(kind, p, next);
  }

  // Each access is its plain path inline (plain(): a load or store and its record) and the
  // rest out of line: inlined whole, the accesses of a put made GCC stop inlining the
  // protocol around them, now here, now there (ibgda_bench moved with unrelated edits).
  template <exec::Scope S, exec::Order O, class T>
  [[gnu::noinline]] T load_slow(const T* p) {
    s_->point();
    if (RaceDetector* r = s_->race()) {
      if constexpr (O == exec::Order::kAcquire || O == exec::Order::kAcqRel) r->acquire_load(s_->race_thread(), p);
      else r->relaxed_load(s_->race_thread(), p);
    }
    T v;
    if (WeakMemory* w = s_->weak()) {
      w->load(s_->mem_thread(), p, &v, sizeof v);
      if constexpr (O == exec::Order::kAcquire || O == exec::Order::kAcqRel) w->acquired(s_->mem_thread(), S);
    } else {
      v = *p;
    }
    s_->record(Access::kLoad, uint64_t(v), false, p);
    return v;
  }
  template <exec::Scope S, exec::Order O, class T>
  [[gnu::noinline]] void store_slow(T* p, T v) {
    s_->point();
    if (RaceDetector* r = s_->race()) {
      if constexpr (O == exec::Order::kRelease || O == exec::Order::kAcqRel) r->release_store(s_->race_thread(), p);
      else r->relaxed_store(s_->race_thread(), p);
    }
    if (WeakMemory* w = s_->weak()) {
      if constexpr (O == exec::Order::kRelease || O == exec::Order::kAcqRel) w->fence(s_->mem_thread(), S);
      const bool changed = w->store_changes(p, &v, sizeof v);
      w->store(s_->mem_thread(), p, &v, sizeof v);
      s_->record(Access::kStore, uint64_t(v), changed, p);
      return;
    }
    const bool changed = *p != v;
    *p = v;
    s_->record(Access::kStore, uint64_t(v), changed, p);
  }
  template <class Next>
  [[gnu::noinline]] uint64_t rmw_slow(Access kind, uint64_t* p, Next next) {
    s_->point();
    if (RaceDetector* r = s_->race()) r->rmw(s_->race_thread(), p);
    if (WeakMemory* w = s_->weak()) {
      w->rmw_begin(s_->mem_thread(), p, sizeof *p);
      w->rmw(s_->mem_thread(), p, sizeof *p, next(*p) != *p);
    }
    const uint64_t old = *p, v = next(old);
    if (v != old) *p = v;
    s_->record(kind, old, v != old, p);
    return old;
  }

  // A byte range 64 bytes at a time, with a scheduling point before every piece after the
  // first. The pieces are cut at offsets from the range's start, not at the address's lines:
  // where the allocator put a buffer must not change the schedule (a replay would differ).
  static constexpr size_t kPiece = 64;
  template <class Part>
  [[gnu::noinline]] void by_pieces(void* dst, const void* src, size_t n, Part part) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* sr = static_cast<const std::byte*>(src);
    for (size_t off = 0; off < n;) {
      if (off != 0) s_->point();
      const size_t k = std::min(n - off, kPiece);
      part(d + off, sr + off, k);
      off += k;
    }
  }

  // 8 bytes at a time, as a WQE stage's segments were stored (mlx5::SegWords): memcpy's
  // 16-byte loads spanned two of those stores each and stalled on store forwarding. The
  // empty asm keeps each word in a register, so the compiler neither widens nor merges them.
  static void copy_words(void* dst, const void* src, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v;
      std::memcpy(&v, static_cast<const std::byte*>(src) + i, 8);
      asm("" : "+r"(v));
      std::memcpy(static_cast<std::byte*>(dst) + i, &v, 8);
    }
  }

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
  // Sleep until Scheduler::wake(this agent's id) — SchedOptions::park_idle; false once the run
  // stops (return then). A daemon that nothing but a wake can move on, instead of spinning.
  bool park(const char* what) { return s_->park(what); }
  uint32_t id() const { return s_->current_agent(); }  // what Scheduler::wake takes
  bool stopping() const { return s_->stopping(); }
  // A device's own 8-byte accesses to memory GPU threads share (system scope): told to the
  // weak memory model, if any; `what` / `index` name a read in stale-read notes.
  uint64_t load64(const uint64_t* p, const char* who, const char* what, uint64_t index) {
    if (WeakMemory* w = s_->weak()) w->device_read(p, sizeof *p, who, what, index);
    if (RaceDetector* r = s_->race()) r->acquire_load(s_->race_thread(), p);
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
  }
  // A word the agent read straight from memory with acquire order (the host's view, which the
  // weak memory model does not hear of): the race detector still orders the agent after it.
  void acquired(const uint64_t* p) {
    if (RaceDetector* r = s_->race()) r->acquire_load(s_->race_thread(), p);
  }
  void store64(uint64_t* p, uint64_t v) {
    if (WeakMemory* w = s_->weak()) w->device_write(p, sizeof v);
    if (RaceDetector* r = s_->race()) r->release_store(s_->race_thread(), p);
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
  }
  // A host agent ringing a device as a GPU thread does (core/ibgda ring_qp takes this
  // context): its stores reach memory in program order, so its fences (the host's wmb before
  // an MMIO) order nothing more here, and its doorbell takes the scheduler's MMIO routes.
  template <exec::Scope S, exec::Order O>
  void store(exec::ScopeTag<S>, exec::OrderTag<O>, uint64_t* p, uint64_t v) { store64(p, v); }
  template <exec::Scope S>
  void fence(exec::ScopeTag<S>) {}
  void mmio_store64(uint64_t* p, uint64_t v) {
    if (!s_->route_mmio(p, v)) store64(p, v);
  }

 private:
  Scheduler* s_;
};

}  // namespace doorbell::gpu_sim
