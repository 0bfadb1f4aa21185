// The CPU GPU model's weak memory mode: enough of the PTX memory model that a missing or
// too-narrow fence shows up as a stale value, deterministically from the seed.
//
// Writer side: every store of a GPU thread goes into that thread's store buffer. Buffered
// stores drain to memory one at a time at scheduling points drawn from the seed, in any
// order across addresses (PSO: message passing without a fence can fail) but in order for
// overlapping ones. A fence promotes the thread's buffered stores by scope: CTA scope makes
// them visible to its CTA, GPU scope to every GPU thread, system scope drains them to memory
// (where the NIC and host agents read). Fences are cumulative: a GPU fence also promotes
// what the CTA could see, a system fence drains what the GPU could see.
//
// Reader side: memory keeps the last few values of every word written during the run. A
// load may return a value superseded after the thread's last acquire or fence (its view),
// never one older than a value it already read (coherence). An acquire or a fence brings the
// view up to date. Atomics act on the newest value.
//
// Histories are kept per aligned 8-byte word; a word is tracked once a write covers it whole,
// so objects need not be word-sized (a load reads memory only in the bytes it wants).
//
// Devices (NIC engine, host proxy) are system-scope observers: they see memory only, tell
// the model of their writes (mem::Observer) and of reads that missed buffered stores, which
// the model keeps as notes for hang and failure reports. When the NIC's buffers are in GPU
// memory it reads through the GPU's L2, so GPU scope reaches it (set_gpu_scope_reaches_devices).
#pragma once

#include <cstdint>
#include <functional>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/exec/scope.h"
#include "hw/mem/observer.h"

namespace doorbell::gpu_sim {

enum class MemoryModel : uint8_t { kSc, kWeak };
const char* memory_model_name(MemoryModel m);

class WeakMemory final : public mem::Observer {
 public:
  static constexpr uint32_t kNoThread = ~0u;

  explicit WeakMemory(uint64_t seed);

  // A GPU thread (one lane) of global CTA `cta`; `name` appears in reports.
  uint32_t add_thread(uint32_t cta, std::string name);
  // The NIC's buffers are in GPU memory and it reads them through the GPU's L2: what a
  // GPU-scope fence makes visible, devices see too (the fence drains instead of promoting).
  void set_gpu_scope_reaches_devices(bool on) { gpu_reaches_devices_ = on; }
  // Names addresses in reports (the scheduler's watched words).
  void set_namer(std::function<std::string(const void*)> fn) { namer_ = std::move(fn); }

  // ---- a GPU thread's accesses ----
  void store(uint32_t t, void* addr, const void* src, size_t len);
  void load(uint32_t t, const void* addr, void* dst, size_t len);
  void acquired(uint32_t t);  // after an acquire load: the view catches up
  void fence(uint32_t t, exec::Scope s);
  // One step of a fence: promotes (or, at system scope, drains) one store the fence must
  // carry, chosen from the seed; false when none is left. A fence is a series of these with
  // scheduling points between them: until it completes, its stores land in any order.
  bool fence_step(uint32_t t, exec::Scope s, uint64_t upto);
  uint64_t last_store() const { return seq_; }  // bounds a fence's cumulativity
  // An atomic read-modify-write of [addr, +len): first the stores it must follow land
  // (rmw_begin), then, just before it writes (`writes`: a failed CAS does not), rmw.
  void rmw_begin(uint32_t t, void* addr, size_t len);
  void rmw(uint32_t t, void* addr, size_t len, bool writes);
  // Would a store of [src, +len) at addr by t change anything another agent could see?
  bool store_changes(const void* addr, const void* src, size_t len) const;

  // ---- devices (system scope) ----
  void device_write(const void* addr, size_t len, const char* what = "device write", uint64_t index = 0) override;
  void device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) override;

  // ---- the scheduler ----
  // At a scheduling point: maybe drain one buffered store. True when memory changed.
  bool step();
  // A failed poll by t: its view may catch up (eventual visibility).
  void polled(uint32_t t);
  // Drain every store of thread t.
  bool drain_thread(uint32_t t);
  // Drain every buffer and bring every view up to date (kernel end, hang check). True when
  // that changed anything a thread could see.
  bool settle();
  size_t buffered() const { return live_; }
  // Notes on stale reads (devices that missed buffered stores, threads that read a
  // superseded value); empty when there were none.
  std::string report() const;
  // "drain=D/256 stale=S/256": the knobs this seed drew.
  std::string describe() const;

 private:
  using Slot = uint32_t;  // an entry's place in the slab
  struct Entry {
    bool live = false;
    uint64_t seq, vis;  // store order; when it became visible beyond its thread
    uintptr_t addr;
    uint32_t len, thread, cta;
    uint8_t level;      // 0 thread, 1 CTA, 2 GPU
    uint8_t bytes[64];
  };
  struct Version {
    uint64_t start, value;
  };
  struct History {
    uint64_t start = 0;  // when memory's current value was written
    uint32_t n = 0;      // older versions kept, newest first
    Version old[3];
  };
  struct Thread {
    uint32_t cta;
    std::string name;
    uint64_t horizon = 0;                          // versions superseded before this are gone
    // Per word: the newest version it has read (few: cleared by every acquire and fence).
    std::vector<std::pair<uintptr_t, uint64_t>> floor;
    std::vector<Slot> own;  // its buffered stores, oldest first
  };

  uint32_t rand(uint32_t n);
  bool visible(const Entry& e, uint32_t t) const;
  bool covered(const Entry& e, uint32_t t, exec::Scope s) const;
  bool line_busy(uintptr_t addr, size_t len) const;
  void index(Slot s, bool add);
  void drain(Slot s);
  uint64_t floor_of(const Thread& th, uintptr_t word) const;
  void raise_floor(Thread& th, uintptr_t word, uint64_t v);
  void drain_random_own(uint32_t t);
  void promote(Entry& e, uint8_t level);
  void record(uintptr_t word, uint64_t visible_since);
  uint64_t view_word(uint32_t t, uintptr_t word, uintptr_t lo, uintptr_t hi);
  bool trackable(uintptr_t w, uintptr_t a, size_t len) const;
  void catch_up(Thread& th);
  std::string name_of(const void* addr) const;

  uint64_t rng_;
  uint32_t drain_per_256_, stale_per_256_, refresh_per_256_;
  uint64_t clock_ = 1, seq_ = 0;
  uint64_t last_write_ = 0;  // clock of the latest value written over
  std::vector<Entry> slab_;                                 // buffered stores (live ones)
  std::vector<Slot> free_;
  size_t live_ = 0;
  std::unordered_map<uintptr_t, std::vector<Slot>> lines_;  // 64-byte line -> its stores, oldest first
  // Stores a fence promoted, in promotion order; drained ones are skipped lazily.
  using Promoted = std::deque<std::pair<Slot, uint64_t>>;  // (slot, seq)
  std::vector<Promoted> cta_level_;                        // per CTA: stores visible to it
  Promoted gpu_level_;                                     // stores visible GPU-wide
  const std::pair<Slot, uint64_t>* first_promoted(Promoted& q, uint8_t level);
  bool promoted(const std::pair<Slot, uint64_t>& q, uint8_t level) const;
  std::unordered_map<uintptr_t, History> hist_;    // 8-byte word -> recent values
  std::vector<Thread> threads_;
  std::function<std::string(const void*)> namer_;
  bool gpu_reaches_devices_ = false;
  struct StaleLoad {
    uint32_t thread;
    uintptr_t word;
    uint64_t got, newest;
  };
  struct DeviceNote {
    const char* what;  // one note per kind of read
    std::string text;
    uint64_t count;
  };
  std::vector<DeviceNote> device_notes_;
  std::vector<StaleLoad> thread_notes_;  // the last few
  uint64_t device_stale_ = 0, thread_stale_ = 0;
};

}  // namespace doorbell::gpu_sim
