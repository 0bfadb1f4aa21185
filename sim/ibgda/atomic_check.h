// The reference check for remote atomics, shared by replay and the program runner: what
// each atomic returned, and whether some order of them all explains those results and
// every word's final value. Words start at 0. A word of only adds, or only compare-swaps,
// takes a check that scales to thousands of them; any other mix (every AMO NVSHMEM has, 4-
// or 8-byte, on one word) is searched for an order, up to kMaxSearched atomics a word.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ibgda/amo_op.h"

namespace doorbell::ibgda {

// What AMO k of `width` bytes (4: the word's low half, little-endian) leaves in a word
// holding `cur`; a fetching one returns cur's low `width` bytes.
uint64_t amo_apply(AmoOp k, uint32_t width, uint64_t cur, uint64_t v, uint64_t cmp);
const char* amo_name(AmoOp k);

class AtomicCheck {
 public:
  // `old`: what a fetching op returned; nullopt when it was applied once but its result
  // lost (failover's kResultLost).
  void add(uint32_t pe, uint32_t word, uint64_t v) { amo(pe, word, AmoOp::kAdd, 8, v, 0, std::nullopt); }
  void fetch_add(uint32_t pe, uint32_t word, uint64_t v, std::optional<uint64_t> old) { amo(pe, word, AmoOp::kFetchAdd, 8, v, 0, old); }
  void compare_swap(uint32_t pe, uint32_t word, uint64_t cmp, uint64_t v, std::optional<uint64_t> old) {
    amo(pe, word, AmoOp::kCompareSwap, 8, v, cmp, old);
  }
  // Any AMO; `old` is ignored for one that does not fetch.
  void amo(uint32_t pe, uint32_t word, AmoOp k, uint32_t width, uint64_t v, uint64_t cmp, std::optional<uint64_t> old) {
    ops_.push_back({pe, word, k, uint8_t(width), v, k == AmoOp::kCompareSwap ? cmp : 0, amo_fetches(k) ? old : std::nullopt});
  }
  static constexpr size_t kMaxSearched = 20;
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
    AmoOp kind;
    uint8_t width;
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
  static std::string check_order(Span ops, uint64_t final_value);
  std::vector<Op> ops_;
};

}  // namespace doorbell::ibgda
