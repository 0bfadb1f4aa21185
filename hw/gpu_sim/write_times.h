// When each word was last written (the timed schedule): an open-addressing table keyed by
// address. A timed run looks an address up on every simulated access, and at 256 PEs the
// node-based map missed the cache on nearly every lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace doorbell::gpu_sim {

class WriteTimes {
 public:
  // The time `addr` was last written, or nullptr if it never was.
  const double* find(const void* addr) const {
    if (slots_.empty()) return nullptr;
    const uintptr_t k = key(addr);
    for (size_t i = home(k);; i = (i + 1) & mask()) {
      if (slots_[i].key == k) return &slots_[i].ns;
      if (slots_[i].key == 0) return nullptr;
    }
  }
  void set(const void* addr, double ns) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    const uintptr_t k = key(addr);
    size_t i = home(k);
    while (slots_[i].key != k && slots_[i].key != 0) i = (i + 1) & mask();
    if (slots_[i].key == 0) ++used_, slots_[i].key = k;
    slots_[i].ns = ns;
  }
  size_t size() const { return used_; }

 private:
  struct Slot {
    uintptr_t key = 0;  // the address + 1 (0: empty; a null address is never recorded)
    double ns = 0;
  };
  static uintptr_t key(const void* a) { return reinterpret_cast<uintptr_t>(a) + 1; }
  size_t mask() const { return slots_.size() - 1; }
  size_t home(uintptr_t k) const { return size_t((k * 0x9e3779b97f4a7c15ull) >> shift_) & mask(); }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    shift_ = 64 - __builtin_ctzll(slots_.size());
    used_ = 0;
    for (const Slot& s : old)
      if (s.key != 0) set(reinterpret_cast<const void*>(s.key - 1), s.ns);
  }

  std::vector<Slot> slots_;  // a power of two, at most half full
  unsigned shift_ = 64;
  size_t used_ = 0;
};

}  // namespace doorbell::gpu_sim
