// The reference check for remote atomics, shared by replay and the program runner: what
// each atomic returned, and whether some order of them all explains those results and
// every word's final value. Words start at 0. A word takes adds (fetching or not) or
// compare-swaps, not both.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace doorbell::ibgda {

class AtomicCheck {
 public:
  // `old`: what a fetching op returned; nullopt when it was applied once but its result
  // lost (failover's kResultLost).
  void add(uint32_t pe, uint32_t word, uint64_t v) { ops_.push_back({pe, word, false, v, 0, std::nullopt}); }
  void fetch_add(uint32_t pe, uint32_t word, uint64_t v, std::optional<uint64_t> old) { ops_.push_back({pe, word, false, v, 0, old}); }
  void compare_swap(uint32_t pe, uint32_t word, uint64_t cmp, uint64_t v, std::optional<uint64_t> old) {
    ops_.push_back({pe, word, true, v, cmp, old});
  }
  // Empty when every word is consistent; else the first word that is not, and why.
  // `final_value(pe, word)` reads a word after the run; nullopt: the word is not here (another
  // process's PE), not checked here.
  std::string check(const std::function<std::optional<uint64_t>(uint32_t pe, uint32_t word)>& final_value) const;

  // The records as bytes, and another's records added to these: with one PE per process,
  // each process checks its own words against the atomics every process sent them.
  std::vector<uint8_t> encode() const;
  bool merge(const std::vector<uint8_t>& bytes);

 private:
  // One atomic, in the order recorded (a program run records a few dozen: one flat list, not
  // a node per word, as a queue_fuzz input runs a check).
  struct Op {
    uint32_t pe, word;
    bool cas;
    uint64_t v, cmp;
    std::optional<uint64_t> old;
  };
  using Span = std::pair<const Op*, const Op*>;  // one word's ops
  // The checks' working lists, shared by every word of one check().
  struct Scratch {
    std::vector<std::pair<uint64_t, uint64_t>> pairs;
    std::vector<std::pair<uint64_t, int64_t>> balance;
    std::vector<uint64_t> held, reach, todo;
  };
  static std::string check_adds(Span ops, uint64_t final_value, Scratch& s);
  static std::string check_swaps(Span ops, uint64_t final_value, Scratch& s);
  std::vector<Op> ops_;
};

}  // namespace doorbell::ibgda
