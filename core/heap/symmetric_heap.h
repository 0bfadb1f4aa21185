// The dynamic symmetric heap (SPEC §1) for N PEs of one process: one virtual range of
// npes * heap_bytes is reserved up front with no memory behind it (PE p's heap starts at
// base + p * heap_bytes); an allocation that does not fit maps physical chunks at the end of
// every PE's heap (granularity-sized, at most max_handle_bytes per mapping) and reports each
// new chunk so the transports can register it. Offsets are the same on every PE. The range
// comes from a VaSpace (the OS's is hw/mem/os_va_space.h), so the heap includes no OS header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/heap/mspace.h"
#include "base/status.h"
#include "base/va_space.h"

namespace doorbell::heap {

struct HeapConfig {
  uint32_t npes = 1;
  uint64_t heap_bytes = 1ull << 30;      // reserved per PE
  uint64_t granularity = 512ull << 20;   // physical chunk, a power of two
  uint64_t max_handle_bytes = 2ull << 30;
  bool phantom = false;                  // never back chunks with memory (never committed)
};

// A newly mapped chunk: its index, its address on every PE, its size.
using ChunkHook = std::function<Status(uint32_t chunk, const std::vector<uint8_t*>& addrs, uint64_t bytes)>;

class SymmetricHeap {
 public:
  // `va` outlives the heap.
  static Result<std::unique_ptr<SymmetricHeap>> create(const HeapConfig& cfg, base::VaSpace& va, ChunkHook on_chunk);
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  // Allocate on every PE at once; returns the offset.
  Result<uint64_t> alloc(uint64_t bytes, uint64_t align = 64);
  Status free(uint64_t off);
  // Free every allocation and zero the bytes any of them covered since the last reset (on
  // every PE); the mapped chunks stay mapped and registered. Offsets then come out as on a
  // fresh heap: first fit from 0 over one free region. For a harness that runs many
  // programs on one heap: a write outside every allocation would survive it.
  void reset();
  uint8_t* base(uint32_t pe) const { return reserve_ + uint64_t(pe) * cfg_.heap_bytes; }
  uint64_t mapped() const { return mapped_; }
  uint32_t chunks() const { return uint32_t(mapped_ / cfg_.granularity); }
  uint32_t mappings() const { return mappings_; }
  const HeapConfig& config() const { return cfg_; }
  const Mspace& mspace() const { return space_; }

 private:
  SymmetricHeap(const HeapConfig& c, base::VaSpace& va, ChunkHook h) : cfg_(c), va_(&va), hook_(std::move(h)) {}
  Status grow(uint64_t bytes);

  HeapConfig cfg_;
  base::VaSpace* va_;
  ChunkHook hook_;
  uint8_t* reserve_ = nullptr;
  uint64_t mapped_ = 0;
  uint32_t mappings_ = 0;
  uint64_t top_ = 0;  // the end of the highest allocation since the last reset
  Mspace space_;
};

}  // namespace doorbell::heap
