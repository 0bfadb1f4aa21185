// A happens-before race detector over byte ranges. Every agent that touches shared memory is
// a thread here: each GPU lane, each device actor (a NIC QP, a copy engine, a proxy), each
// host thread. Threads carry vector clocks that the context's synchronisation advances, as
// PTX (and C++) define it for the orders the protocols use:
//
// - an acquire load joins the word's clock into the thread's; a relaxed load joins it into
//   the thread's pending clock, which its next fence acquires (poll; fence);
// - a release store joins the thread's clock into the word's; a relaxed store or atomic joins
//   the clock of the thread's last fence (fence; store);
// - a barrier (bar.sync, bar.warp.sync) joins every participant's clock;
// - hand-offs outside memory (a stream's work after the work it depends on, a doorbell's CQE
//   queued behind a delay) release to and acquire from a key.
//
// Devices are system-scope agents: a device read of a line or less (a doorbell record) acquires
// what its words carry; a device write of a line or less (a CQE, an inline put, a signal)
// releases them. A larger
// device write (a payload) releases nothing: a poller of payload bytes is not ordered after
// the rest of the payload, on hardware either.
//
// A read or write that a later write overwrites needs less: hardware does not make a store
// visible before the loads and the releases that precede it in program order (no load
// buffering; hw/gpu_sim/weak_memory.h has none either), so a chain that starts with the
// first thread's release (or, for its read, with any store after the read) and then runs
// through relaxed stores and the loads that read them orders it — the ring slot a poller
// freed with a relaxed atomic after it acquired the NIC's CQE. A second clock per thread and
// word (dep) follows those chains.
//
// Data accesses (read_bytes / write_bytes, the NIC's WQE and payload accesses, copy-engine
// copies) are checked, per 8-byte word and per byte within it, against its last writes (two)
// and reads (three) by other threads: two conflicting accesses that no chain of the
// above orders are a race, reported with both accesses (thread, label, range) and the release
// the first thread made after its access (the flag or index that should have ordered them),
// or that it made none. Deterministic: a race is found in whatever order the schedule ran the
// two accesses. Ordered 1–8 byte accesses are synchronisation, never races.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace doorbell::gpu_sim {

class RaceDetector {
 public:
  using Tid = uint32_t;
  static constexpr Tid kNoThread = ~0u;
  static constexpr size_t kMaxReports = 4;

  // A thread; it starts ordered after what `parent` did so far (a kernel launched by an agent).
  Tid add_thread(std::string name, Tid parent = kNoThread);
  const std::string& thread_name(Tid t) const { return threads_[t].name; }
  // Names addresses in reports (the scheduler's watched words).
  void set_namer(std::function<std::string(const void*)> fn) { namer_ = std::move(fn); }
  // A named range (a PE's heap, a QP's ring, a FIFO): an unnamed word in it is reported as
  // "name+0xoffset", the same in every run of the scenario (host addresses are not).
  void name_range(const void* base, size_t len, std::string name);
  // "name+0xoffset" for an address in a named range, else "".
  std::string range_name(const void* addr) const;

  // ---- synchronisation: ordered accesses of 1..8 bytes (the word holding addr) ----
  void acquire_load(Tid t, const void* addr);
  void relaxed_load(Tid t, const void* addr);
  void release_store(Tid t, const void* addr);
  void relaxed_store(Tid t, const void* addr);
  void rmw(Tid t, const void* addr);  // relaxed read-modify-write
  void fence(Tid t);                  // acquires what relaxed loads read, releases for later stores
  // `dep_only`: a warp shuffle / ballot, whose value orders later stores, not later loads.
  void barrier(std::span<const Tid> threads, bool dep_only = false);
  // Hand-offs outside memory, named by an object and a number within it (a stream's work).
  void release_to(Tid t, const void* key, uint64_t sub = 0);
  void acquire_from(Tid t, const void* key, uint64_t sub = 0);

  // ---- data accesses: `label` (a static string: file:line, or what a device read) names
  // the site, `index` (a WQE index, a byte offset) the instance ----
  void read(Tid t, const void* addr, size_t len, const char* label, uint64_t index = kNoIndex);
  void write(Tid t, const void* addr, size_t len, const char* label, uint64_t index = kNoIndex);
  // A device's: a read acquires its words first; a write of a line or less releases them.
  void device_read(Tid t, const void* addr, size_t len, const char* label, uint64_t index);
  void device_write(Tid t, const void* addr, size_t len, const char* label, uint64_t index);
  void device_atomic(Tid t, const void* addr);  // acquire and release, not a data access
  void device_rewrite(Tid t, const void* addr, size_t len);  // bytes unchanged: device_write less its data access
  // t has seen the state u left (a host agent inspecting a device model's C++ state: a QP
  // that failed): t comes after everything u did so far.
  void acquire_thread(Tid t, Tid u);

  // Bytes that nothing reads (a NIC's scratch: where non-fetching atomics' results land):
  // accesses to them are no data accesses.
  void ignore(const void* addr, size_t len);
  // "file:line" of a call site, interned: a label for read / write. (__builtin_FILE /
  // __builtin_LINE give them: clang 14, the fuzz build's, has no std::source_location with
  // libstdc++.)
  const char* site(const char* file, uint32_t line);

  bool found() const { return !reports_.empty(); }
  // The races, one paragraph each (at most kMaxReports; the count of the rest); empty if none.
  std::string report() const;

  static constexpr uint64_t kNoIndex = ~0ull;

 private:
  struct Clock {
    std::vector<uint32_t> c;
    uint32_t at(Tid t) const { return t < c.size() ? c[t] : 0; }
    void join(const Clock& o);
    void raise(Tid t, uint32_t v);
  };
  struct Word {
    Clock sync;  // what releases of the word carried (an acquire takes it)
    Clock dep;   // what chains through stores of it carried (reads and writes a later write follows)
    uint32_t version = 0;  // bumped by every store: a poll of an unchanged word joins nothing new
  };
  // Words a thread has joined lately, at which version: polls re-read one word many times, and
  // a join is as long as the run has threads.
  struct Seen {
    uintptr_t word = 0;
    uint32_t version = 0;
  };
  static constexpr size_t kSeen = 4;
  struct Release {
    uint32_t epoch;   // of the thread, that the release carries
    uintptr_t word;   // 0: a fence, a barrier, a hand-off
    bool fenced;      // a relaxed store after a fence: carries the fence's epoch, made later
  };
  struct Thread {
    std::string name;
    Clock clock, pending, fenced;
    Clock dep;  // >= clock: chains through relaxed stores and loads too
    bool has_pending = false;
    Seen took[kSeen], pended[kSeen];  // acquired (clock and dep hold it); relaxed-read (pending and dep)
    uint8_t took_next = 0, pended_next = 0;
    std::vector<Release> releases;  // the last few, oldest first
    uintptr_t acquired = 0;         // the last word whose releases it took (reports)
  };
  struct Access {
    Tid tid = kNoThread;
    uint32_t epoch = 0;
    uint32_t label = 0;
    uint8_t mask = 0;  // bytes of the word
    uint64_t index = kNoIndex;
  };
  // Per word: the last writes of its bytes (two, by different threads, as lanes write the
  // elements of one word) and the last reads of other threads.
  static constexpr size_t kWrites = 2, kReads = 3;
  struct Shadow {
    Access w[kWrites];
    Access r[kReads];
  };

  uint32_t epoch(Tid t) const { return threads_[t].clock.at(t); }
  // Whether access a comes before t's next: a write before a read by release / acquire; an
  // access before a write also by dep.
  bool ordered(const Access& a, Tid t, bool write) const {
    return a.tid == t || a.epoch <= (write ? threads_[t].dep : threads_[t].clock).at(a.tid);
  }
  void publish(Tid t, uintptr_t word, bool release);  // a store of the word by t
  void tick(Tid t, uintptr_t word);  // a release by t (of `word`, 0 for a fence)
  uint32_t label_id(const char* label);
  template <bool kWrite>
  void access(Tid t, const void* addr, size_t len, const char* label, uint64_t index);
  void conflict(const Access& earlier, bool earlier_write, Tid t, bool write, uintptr_t word, const char* label, uint64_t index);
  std::string describe(const Access& a, bool write) const;
  std::string name_of(uintptr_t word) const;

  std::vector<Thread> threads_;
  std::unordered_map<uintptr_t, Shadow> shadow_;  // 8-byte word -> its last accesses
  std::unordered_map<uintptr_t, Word> sync_;      // 8-byte word -> what its stores carried
  struct KeyHash {
    size_t operator()(const std::pair<const void*, uint64_t>& k) const {
      return std::hash<const void*>()(k.first) ^ (k.second * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<std::pair<const void*, uint64_t>, Clock, KeyHash> keys_;
  std::vector<const char*> labels_{"?"};
  std::unordered_map<uint64_t, const char*> sites_;  // (file, line) -> "file:line"
  std::deque<std::string> site_names_;
  std::unordered_map<const char*, uint32_t> label_ids_;
  std::function<std::string(const void*)> namer_;
  std::vector<std::pair<uintptr_t, uintptr_t>> ignored_;  // [lo, hi), sorted by lo
  struct Range {
    uintptr_t hi;
    std::string name;
  };
  std::map<uintptr_t, Range> ranges_;  // by lo
  bool ignored(uintptr_t lo, uintptr_t hi) const;
  std::vector<std::string> reports_;
  std::unordered_map<uint64_t, bool> reported_;  // (label pair) -> reported once
  uint64_t races_ = 0;
};

}  // namespace doorbell::gpu_sim
