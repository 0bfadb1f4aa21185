#include "core/heap/mspace.h"

#include <iterator>

namespace doorbell::heap {

void Mspace::insert_free(uint64_t off, uint64_t size) {
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + size == next->first) {  // merge with the chunk after
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // and with the chunk before
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(off, size);
}

void Mspace::add_region(uint64_t off, uint64_t size) {
  if (size == 0) return;
  insert_free(off, size);
  if (off + size > end_) end_ = off + size;
}

std::optional<uint64_t> Mspace::alloc(uint64_t size, uint64_t align) {
  if (size == 0 || align == 0 || (align & (align - 1)) != 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = (it->first + align - 1) & ~(align - 1);
    if (start + size > it->first + it->second) continue;
    const uint64_t off = it->first, total = it->second;
    free_.erase(it);
    if (start > off) free_.emplace(off, start - off);  // alignment gap stays free
    if (start + size < off + total) free_.emplace(start + size, off + total - start - size);
    used_.emplace(start, size);
    return start;
  }
  return std::nullopt;
}

Status Mspace::free(uint64_t off) {
  auto it = used_.find(off);
  if (it == used_.end()) return Status(Errc::kNotFound, "heap free: no allocation at offset " + std::to_string(off));
  const uint64_t size = it->second;
  used_.erase(it);
  insert_free(off, size);
  return {};
}

uint64_t Mspace::bytes_free() const {
  uint64_t n = 0;
  for (const auto& [o, s] : free_) n += s;
  return n;
}

uint64_t Mspace::bytes_used() const {
  uint64_t n = 0;
  for (const auto& [o, s] : used_) n += s;
  return n;
}

uint64_t Mspace::free_at_end() const {
  if (free_.empty()) return 0;
  const auto& last = *free_.rbegin();
  return last.first + last.second == end_ ? last.second : 0;
}

}  // namespace doorbell::heap
