// Memory scopes and orders shared by every execution context. Protocol code names a scope
// with a tag value (cta_scope, gpu_scope, system_scope) so overloads pick the intrinsic at
// compile time, as CUDA's atomicAdd_block / atomicAdd / atomicAdd_system do.
#pragma once

#include <cstdint>
#include <type_traits>

namespace doorbell::exec {

enum class Scope : uint8_t { kCta, kGpu, kSystem };
enum class Order : uint8_t { kRelaxed, kAcquire, kRelease, kAcqRel };

template <Scope S>
struct ScopeTag {
  static constexpr Scope value = S;
};
inline constexpr ScopeTag<Scope::kCta> cta_scope{};
inline constexpr ScopeTag<Scope::kGpu> gpu_scope{};
inline constexpr ScopeTag<Scope::kSystem> system_scope{};

template <Order O>
struct OrderTag {
  static constexpr Order value = O;
};
inline constexpr OrderTag<Order::kRelaxed> relaxed{};
inline constexpr OrderTag<Order::kAcquire> acquire{};
inline constexpr OrderTag<Order::kRelease> release{};
inline constexpr OrderTag<Order::kAcqRel> acq_rel{};

// The sizes a single ordered load or store may have (as PTX ld / st .b8 ... .b64).
template <class T>
inline constexpr bool kAccessSize = std::is_unsigned_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

// How a bounded wait ended.
enum class WaitResult : uint8_t { kOk, kTimeout };

const char* scope_name(Scope s);

}  // namespace doorbell::exec
