// The modelled address space: host and GPU memory segments at modelled virtual addresses,
// backed by real bytes. Every access a device model makes resolves through here (or through
// a translation it took from here and pinned), so out-of-range accesses are caught, never
// performed. Segments are separated by unmapped guard gaps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "hw/mem/line_aligned.h"

namespace doorbell::mem {

enum class MemKind : uint8_t { kHost, kGpu };

struct Segment {
  uint64_t va = 0;
  uint64_t size = 0;
  std::byte* host = nullptr;  // backing bytes
  MemKind kind = MemKind::kHost;
  bool owned = false;         // allocated here (vs. external memory mapped at its own address)
  uint32_t pins = 0;          // registrations that hold a translation; free refuses while > 0
  bool phantom = false;       // sizes only: the bytes are never stored (large replays)
  std::string name;
  LineArray<std::byte> storage;  // on a line boundary: a weak run replays wherever the heap is
};

class AddressSpace {
 public:
  AddressSpace() = default;
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  // Allocates `size` zeroed bytes of `kind` memory; returns the segment's address.
  Result<uint64_t> alloc(uint64_t size, MemKind kind, std::string name = {}, uint64_t align = 4096);
  // Maps caller-owned memory at its own address (va == pointer), e.g. pinned host memory
  // that a real GPU also sees.
  // A phantom mapping is address space without bytes: keys and bounds are checked as usual,
  // data movement is recorded instead of performed, and read()/write() refuse it.
  Status map_external(void* p, uint64_t size, MemKind kind, std::string name = {}, bool phantom = false);
  // Unmaps a segment by its base address; refused while pinned.
  Status free(uint64_t va);

  // The segment holding `va`, or nullptr.
  const Segment* find(uint64_t va) const;
  // Host pointer for [va, va+len) when it lies inside one segment, else nullptr.
  std::byte* translate(uint64_t va, uint64_t len) const;
  // Pin / unpin the segment holding va (registrations must not outlive their memory).
  Status pin(uint64_t va);
  void unpin(uint64_t va);

  // Bounds-checked copies; false (and nothing copied) when the range is not mapped.
  bool read(uint64_t va, void* dst, uint64_t len) const;
  bool write(uint64_t va, const void* src, uint64_t len);

  // Host-side view of a typed object in modelled memory (tests and drivers).
  template <class T>
  T* as(uint64_t va) const {
    return reinterpret_cast<T*>(translate(va, sizeof(T)));
  }

 private:
  Segment* find_mut(uint64_t va) const;
  Status insert(std::unique_ptr<Segment> s);

  // By va, non-overlapping. A map: a large heap maps one segment per chunk per PE (hundreds
  // of thousands at 256 PEs), which a sorted vector inserted into one by one made quadratic.
  std::map<uint64_t, std::unique_ptr<Segment>> segs_;
  uint64_t next_host_va_ = 0x0000'5500'0000'0000ull;
  uint64_t next_gpu_va_ = 0x0000'7e00'0000'0000ull;
};

}  // namespace doorbell::mem
