// The CPU GPU model's weak memory mode: enough of the PTX memory model that a missing or
// too-narrow fence shows up as a stale value, deterministically from the seed.
//
// Writer side: every store of a GPU thread goes into that thread's store buffer. Buffered
// stores drain to memory one at a time at scheduling points drawn from the seed, in any
// order across addresses (PSO: message passing without a fence can fail) but in order for
// overlapping ones. A fence promotes the thread's buffered stores by scope: CTA scope makes
// them visible to its CTA, GPU scope to the threads of its GPU (LaunchConfig::gpu; not to
// another GPU's, nor to peer-mapped memory another GPU reads), system scope drains them to
// memory (where the NIC, host agents and other GPUs read). Fences are cumulative: a GPU fence
// also promotes what the CTA could see, a system fence drains what the GPU could see.
//
// Reader side: memory keeps the last few values of every word written during the run. A
// load may return a value superseded after the thread's view, never one older than a value
// it already read (coherence). Atomics act on the newest value. Scoped synchronisation: every
// value carries the view its writer released with it — the time of the writer's last fence,
// per reach (its CTA, its GPU, everyone: the fence's scope) — and an acquire (an acquire
// load, or a fence after relaxed loads) moves the reader's view up to what the values it read
// released to it, only where the acquire's scope includes the writer (.cta: its CTA; .gpu:
// its GPU, and devices; .sys: all). A barrier synchronises with everything (CTA members).
// A read-modify-write's value carries its writer's release, and hands on the widest view of
// the value it replaced to acquires of every scope (release sequences, over-synchronised).
//
// GPUDirect writes unordered (set_unordered_landings; GPUs without PCIe write ordering, which
// need CSTs): data a NIC response lands in memory (landing(): Observer::device_landing) may stay invisible to GPU
// threads, whatever they synchronised with, until flush_landings (the NIC's CST read) or a
// poll's refresh; a load that reads the older value says so in the report.
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
  // `cta` is global across GPUs; `gpu` bounds what GPU-scope fences reach.
  uint32_t add_thread(uint32_t cta, uint32_t gpu, std::string name);
  // The NIC's buffers are in GPU memory and it reads them through the GPU's L2: what a
  // GPU-scope fence makes visible, devices see too (the fence drains instead of promoting).
  void set_gpu_scope_reaches_devices(bool on) { gpu_reaches_devices_ = on; }
  // NIC response data may become visible to GPU threads after what follows it (see above).
  void set_unordered_landings(bool on) { unordered_ = on; }
  // Names addresses in reports (the scheduler's watched words).
  void set_namer(std::function<std::string(const void*)> fn) { namer_ = std::move(fn); }

  // ---- a GPU thread's accesses ----
  void store(uint32_t t, void* addr, const void* src, size_t len);
  void load(uint32_t t, const void* addr, void* dst, size_t len);
  void acquired(uint32_t t, exec::Scope s);  // after an acquire load of scope s
  void synced(uint32_t t);                    // after a barrier: the view catches up with everything
  void fence(uint32_t t, exec::Scope s);
  // The end of a fence of scope s by t (after its fence_steps): it releases t's view for its
  // later stores and acquires what t's relaxed loads read.
  void fenced(uint32_t t, exec::Scope s);
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
  // Unordered landings, per device (`by`: the scheduler's agent; kNoThread flushes all).
  void landing(const void* addr, size_t len, const char* what, uint64_t index, uint32_t by);
  void flush_landings(uint32_t by);

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
  // What a value releases: its writer's view (clock) per reach — readers in the writer's CTA,
  // in its GPU, anywhere (index: relation()). Devices (kNoThread) release at their write.
  struct Rel {
    uint64_t v[3] = {0, 0, 0};
    uint32_t thread = kNoThread;
    uint64_t inherited = 0;  // a release sequence through atomics: taken by any acquire
  };
  struct Entry {
    bool live = false;
    uint64_t seq, vis;  // store order; when it became visible beyond its thread
    uintptr_t addr;
    uint32_t len, thread, cta, gpu;
    uint8_t level;      // 0 thread, 1 CTA, 2 GPU
    Rel rel;
    uint8_t bytes[64];
  };
  struct Version {
    uint64_t start, value;
    Rel rel;
  };
  struct History {
    uint64_t start = 0;  // when memory's current value was written
    Rel rel;
    uint32_t n = 0;      // older versions kept, newest first
    const char* landed = nullptr;  // unordered mode: a NIC landing not yet visible (what, index, by whom)
    uint64_t landed_index = 0;
    uint32_t landed_by = 0;
    Version old[3];
  };
  struct Thread {
    uint32_t cta, gpu;
    std::string name;
    uint64_t horizon = 0;                          // versions superseded before this are gone
    uint64_t fv[3] = {0, 0, 0};                    // its last fences' times, per reach (Rel)
    uint64_t pend[3] = {0, 0, 0};                  // per acquire scope: what its loads read released
    uint64_t last[3] = {0, 0, 0};                  // ... its last load's
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
  void record(uintptr_t word, uint64_t visible_since, const Rel& rel);
  uint64_t view_word(uint32_t t, uintptr_t word, uintptr_t lo, uintptr_t hi);
  bool trackable(uintptr_t w, uintptr_t a, size_t len) const;
  void catch_up(Thread& th);
  void advance(Thread& th, uint64_t view);
  uint32_t relation(uint32_t t, uint32_t writer) const;  // 0 same CTA, 1 same GPU (or a device), 2 another GPU
  void took(uint32_t t, const Rel& r);                   // t's load read a value carrying r
  Rel own_rel(uint32_t t) const;
  Rel device_rel() const;
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
  std::vector<Promoted> gpu_level_;                        // per GPU: stores visible GPU-wide
  const std::pair<Slot, uint64_t>* first_promoted(Promoted& q, uint8_t level);
  bool promoted(const std::pair<Slot, uint64_t>& q, uint8_t level) const;
  std::unordered_map<uintptr_t, History> hist_;    // 8-byte word -> recent values
  std::vector<Thread> threads_;
  std::function<std::string(const void*)> namer_;
  bool gpu_reaches_devices_ = false;
  bool unordered_ = false;
  std::vector<uint64_t> sc_cta_, sc_gpu_;  // the last fence of each CTA (any scope), of each GPU (.gpu or wider)
  uint64_t sc_sys_ = 0;                    // the last .sys fence
  uint32_t show_landed_per_256_;             // unordered mode: a load sees a pending landing
  std::vector<uintptr_t> landed_;            // words with a pending landing
  uint64_t landed_hidden_ = 0;
  struct StaleLoad {
    uint32_t thread;
    uintptr_t word;
    uint64_t got, newest;
    const char* landed;  // the NIC landing it did not see (unordered mode), or null
    uint64_t landed_index;
  };
  struct DeviceNote {
    const char* what;  // one note per kind of read
    std::string text;
    uint64_t count;
  };
  std::vector<DeviceNote> device_notes_;
  std::vector<StaleLoad> thread_notes_;  // the last few
  std::vector<StaleLoad> landed_notes_;  // the first few loads that missed a landing
  // Loads that missed a store another GPU fenced at .gpu: the first few.
  struct ScopeNote {
    uint32_t thread, writer;
    uintptr_t word;
  };
  std::vector<ScopeNote> scope_notes_;
  uint64_t scope_missed_ = 0;
  uint64_t device_stale_ = 0, thread_stale_ = 0;
};

}  // namespace doorbell::gpu_sim
