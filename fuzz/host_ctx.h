// One thread alone: a plain-memory ExecContext for fuzz targets that drive a protocol step by
// step. A wait cannot be satisfied by anyone else, so spin() gives up at once — a would-be
// wait comes back as kTimeout, which the target checks against its reference.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/exec/context.h"

namespace doorbell::fuzz {

class HostCtx {
 public:
  uint32_t lane() const { return 0; }
  uint32_t warp() const { return 0; }
  uint32_t cta() const { return 0; }
  uint32_t warps_per_cta() const { return 1; }
  uint32_t num_ctas() const { return 1; }
  uint32_t warp_size() const { return 1; }
  uint64_t shfl(uint64_t v, uint32_t) { return v; }
  uint32_t ballot(bool b) { return b ? 1u : 0u; }
  bool all(bool b) { return b; }
  bool any(bool b) { return b; }
  void syncwarp() {}
  void sync_cta() {}
  void sync_threads(uint32_t, uint32_t) {}

  template <exec::Scope S>
  uint64_t atomic_add(exec::ScopeTag<S>, uint64_t* p, uint64_t v) { const uint64_t o = *p; *p = o + v; return o; }
  template <exec::Scope S>
  uint64_t atomic_cas(exec::ScopeTag<S>, uint64_t* p, uint64_t e, uint64_t d) {
    const uint64_t o = *p;
    if (o == e) *p = d;
    return o;
  }
  template <exec::Scope S>
  uint64_t atomic_max(exec::ScopeTag<S>, uint64_t* p, uint64_t v) { const uint64_t o = *p; if (v > o) *p = v; return o; }
  template <exec::Scope S>
  uint64_t atomic_exch(exec::ScopeTag<S>, uint64_t* p, uint64_t v) { const uint64_t o = *p; *p = v; return o; }
  template <exec::Scope S, exec::Order O, class T>
  T load(exec::ScopeTag<S>, exec::OrderTag<O>, const T* p) { return *p; }
  template <exec::Scope S, exec::Order O, class T>
  void store(exec::ScopeTag<S>, exec::OrderTag<O>, T* p, std::type_identity_t<T> v) { *p = v; }
  void write_bytes(void* d, const void* s, size_t n) { std::memcpy(d, s, n); }
  void read_bytes(void* d, const void* s, size_t n) { std::memcpy(d, s, n); }
  template <exec::Scope S>
  void fence(exec::ScopeTag<S>) {}
  void mmio_store64(uint64_t* p, uint64_t v) { *p = v; }
  bool spin(const char*, const uint64_t*, uint64_t) { ++spins; return false; }

  uint64_t spins = 0;
};
static_assert(exec::ExecContext<HostCtx>);

}  // namespace doorbell::fuzz
