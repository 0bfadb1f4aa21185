#include "hw/mem/address_space.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace doorbell::mem {
namespace {
constexpr uint64_t kGuardGap = 64 * 1024;  // unmapped bytes between segments
constexpr uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

Result<uint64_t> AddressSpace::alloc(uint64_t size, MemKind kind, std::string name, uint64_t align) {
  if (size == 0) return Status(Errc::kBadParam, "alloc: size 0");
  if (align == 0 || (align & (align - 1)) != 0) return Status(Errc::kBadParam, "alloc: alignment not a power of two");
  uint64_t& next = kind == MemKind::kGpu ? next_gpu_va_ : next_host_va_;
  uint64_t va = round_up(next, std::max<uint64_t>(align, 4096));
  auto s = std::make_unique<Segment>();
  s->storage = line_array<std::byte>(size);
  if (!s->storage) return Status(Errc::kNoResource, "alloc: out of host memory for " + std::to_string(size) + " bytes");
  s->va = va;
  s->size = size;
  s->host = s->storage.get();
  s->kind = kind;
  s->owned = true;
  s->name = std::move(name);
  next = va + round_up(size, 4096) + kGuardGap;
  if (Status st = insert(std::move(s)); !st) return st;
  return va;
}

Status AddressSpace::map_external(void* p, uint64_t size, MemKind kind, std::string name, bool phantom) {
  if (p == nullptr || size == 0) return Status(Errc::kBadParam, "map_external: null or empty range");
  auto s = std::make_unique<Segment>();
  s->va = reinterpret_cast<uint64_t>(p);
  s->size = size;
  s->host = static_cast<std::byte*>(p);
  s->kind = kind;
  s->name = std::move(name);
  s->phantom = phantom;
  return insert(std::move(s));
}

Status AddressSpace::insert(std::unique_ptr<Segment> s) {
  auto it = segs_.lower_bound(s->va);
  if (it != segs_.end() && it->second->va < s->va + s->size) return Status(Errc::kBadParam, "segment overlaps an existing mapping");
  if (it != segs_.begin() && std::prev(it)->second->va + std::prev(it)->second->size > s->va)
    return Status(Errc::kBadParam, "segment overlaps an existing mapping");
  const uint64_t va = s->va;
  segs_.emplace_hint(it, va, std::move(s));
  return {};
}

Status AddressSpace::free(uint64_t va) {
  auto it = segs_.find(va);
  if (it == segs_.end()) return Status(Errc::kNotFound, "free: no segment starts at this address");
  if (it->second->pins != 0)
    return Status(Errc::kBadState, "free: segment is still registered (" + std::to_string(it->second->pins) + " pins)");
  segs_.erase(it);
  return {};
}

Segment* AddressSpace::find_mut(uint64_t va) const {
  auto it = segs_.upper_bound(va);
  if (it == segs_.begin()) return nullptr;
  Segment* s = std::prev(it)->second.get();
  return va - s->va < s->size ? s : nullptr;
}

const Segment* AddressSpace::find(uint64_t va) const { return find_mut(va); }

std::byte* AddressSpace::translate(uint64_t va, uint64_t len) const {
  const Segment* s = find_mut(va);
  if (s == nullptr) return nullptr;
  uint64_t off = va - s->va;
  if (len > s->size - off) return nullptr;
  return s->host + off;
}

Status AddressSpace::pin(uint64_t va) {
  Segment* s = find_mut(va);
  if (s == nullptr) return Status(Errc::kNotFound, "pin: address not mapped");
  ++s->pins;
  return {};
}

void AddressSpace::unpin(uint64_t va) {
  if (Segment* s = find_mut(va); s != nullptr && s->pins > 0) --s->pins;
}

bool AddressSpace::read(uint64_t va, void* dst, uint64_t len) const {
  std::byte* p = translate(va, len);
  if (p == nullptr || find(va)->phantom) return false;
  std::memcpy(dst, p, len);
  return true;
}

bool AddressSpace::write(uint64_t va, const void* src, uint64_t len) {
  std::byte* p = translate(va, len);
  if (p == nullptr || find(va)->phantom) return false;
  std::memcpy(p, src, len);
  return true;
}

}  // namespace doorbell::mem
