// Model memory that starts on a 128-byte boundary. The weak memory model groups stores by
// 64-byte line of their host address, so a buffer at whatever offset malloc gave it would
// share lines differently from run to run of one process (what earlier runs left on the heap
// moves it): the same seed would not replay. A GPU's allocations are aligned far more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace doorbell::mem {

inline constexpr size_t kLineAlignBytes = 128;
inline constexpr std::align_val_t kLineAlign{kLineAlignBytes};

template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kLineAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kLineAlign); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const { return true; }
};

// Bytes (or words) other agents of the model see.
template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;
using LineBytes = LineVector<uint8_t>;

// A zeroed array of n bytes on the same boundary, owned (an allocation's backing). Raw
// operator delete[]: no destructors run, so bytes only.
template <class B>
struct LineDelete {
  static_assert(std::is_trivially_destructible_v<B>);
  void operator()(B* p) const { ::operator delete[](p, kLineAlign); }
};
template <class B = uint8_t>
using LineArray = std::unique_ptr<B[], LineDelete<B>>;
// Null when the host has no n bytes left.
template <class B = uint8_t>
LineArray<B> line_array(size_t n) {
  return LineArray<B>(new (kLineAlign, std::nothrow) B[n]());
}

}  // namespace doorbell::mem
