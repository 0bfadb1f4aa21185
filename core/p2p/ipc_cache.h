// The receiver's cache of remote GPU regions opened through CUDA IPC, one per endpoint
// (SPEC §6, seed 001): opening a handle costs ~90 µs, so an opened region is kept and reused
// for later transfers from the same remote addresses. The owner may free a buffer and get a
// new one at the same address; the handle says which allocation it is (a buffer id), so a
// cached region whose id differs is closed and the new one opened — delivering into the old
// mapping would write into freed memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/cuda_ipc.h"

namespace doorbell::p2p {

// Opens a handle (cuIpcOpenMemHandle: open(handle) -> local bytes, null for sizes-only
// memory) and closes a mapping (cuIpcCloseMemHandle: close(local, handle)). Every mapping still
// open is closed when the cache goes.
template <class Open, class Close>
class IpcCache {
 public:
  IpcCache(Open open, Close close, bool plant_no_id_check = false)
      : open_(open), close_(close), plant_no_id_check_(plant_no_id_check) {}
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;
  ~IpcCache() { close_all(); }

  // Where remote address `va` of the allocation `h` is mapped here; opens (or reopens) on a miss.
  uint8_t* map(const IpcHandle& h, uint64_t va) {
    for (Entry& e : entries_)
      if (va - e.h.base < e.h.size && (e.h.buffer_id == h.buffer_id || plant_no_id_check_)) {
        ++hits_;
        return at(e.local, va - e.h.base);
      }
    // A miss: every cached region overlapping the new allocation belongs to a freed one (the
    // owner cannot have two live allocations there): close them all, then open.
    for (std::size_t i = 0; i < entries_.size();)
      if (entries_[i].h.base < h.base + h.size && h.base < entries_[i].h.base + entries_[i].h.size) {
        close_(entries_[i].local, entries_[i].h);
        entries_[i] = entries_.back();
        entries_.pop_back();
        ++reopens_;
      } else {
        ++i;
      }
    entries_.push_back({h, open_(h)});
    ++opens_;
    return at(entries_.back().local, va - h.base);
  }

  // Closes every mapping (the endpoint's teardown).
  void close_all() {
    for (const Entry& e : entries_) close_(e.local, e.h);
    entries_.clear();
  }

  uint64_t hits() const { return hits_; }
  uint64_t opens() const { return opens_; }      // ~90 µs each
  uint64_t reopens() const { return reopens_; }  // stale entries replaced

 private:
  static uint8_t* at(uint8_t* local, uint64_t off) { return local == nullptr ? nullptr : local + off; }
  struct Entry {
    IpcHandle h;
    uint8_t* local;
  };
  Open open_;
  Close close_;
  bool plant_no_id_check_;
  std::vector<Entry> entries_;
  uint64_t hits_ = 0, opens_ = 0, reopens_ = 0;
};

}  // namespace doorbell::p2p
