// The symmetric heap's allocator ("mspace"): a first-fit free-chunk map over heap offsets.
// Allocation scans for a free chunk that fits (with alignment), free returns the chunk and
// coalesces it with free neighbours, and the heap grows by adding regions at its end.
// Every PE runs the same sequence, so every PE gets the same offsets.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "base/status.h"

namespace doorbell::heap {

class Mspace {
 public:
  // Make [off, off+size) allocatable (the heap grew); merges with a free neighbour.
  void add_region(uint64_t off, uint64_t size);
  // First fit; nullopt when no free chunk fits.
  std::optional<uint64_t> alloc(uint64_t size, uint64_t align);
  Status free(uint64_t off);
  uint64_t bytes_free() const;
  uint64_t bytes_used() const;
  size_t free_chunks() const { return free_.size(); }
  // The end of the highest region added.
  uint64_t end() const { return end_; }
  // Bytes free at the very end of the heap (what a growth can extend).
  uint64_t free_at_end() const;

 private:
  void insert_free(uint64_t off, uint64_t size);
  std::map<uint64_t, uint64_t> free_;  // offset -> size
  std::map<uint64_t, uint64_t> used_;
  uint64_t end_ = 0;
};

}  // namespace doorbell::heap
