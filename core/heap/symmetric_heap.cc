#include "core/heap/symmetric_heap.h"

#include <algorithm>
#include <cstring>

namespace doorbell::heap {

Result<std::unique_ptr<SymmetricHeap>> SymmetricHeap::create(const HeapConfig& c, base::VaSpace& va, ChunkHook on_chunk) {
  if (c.npes == 0) return Status(Errc::kBadParam, "heap: no PEs");
  if (c.granularity < 4096 || (c.granularity & (c.granularity - 1)) != 0)
    return Status(Errc::kBadParam, "heap: granularity must be a power of two >= 4096");
  if (c.heap_bytes % c.granularity != 0 || c.max_handle_bytes < c.granularity)
    return Status(Errc::kBadParam, "heap: heap size and handle limit must be multiples of the granularity");
  std::unique_ptr<SymmetricHeap> h(new SymmetricHeap(c, va, std::move(on_chunk)));
  // Address space only: no memory is committed until a chunk is mapped.
  Result<uint8_t*> p = va.reserve(c.heap_bytes * c.npes);
  if (!p) return Status(p.status().code(), "heap: reserving the range failed: " + p.status().message());
  h->reserve_ = *p;
  return h;
}

SymmetricHeap::~SymmetricHeap() {
  if (reserve_ != nullptr) va_->release(reserve_, cfg_.heap_bytes * cfg_.npes);
}

Status SymmetricHeap::grow(uint64_t bytes) {
  const uint64_t g = cfg_.granularity;
  const uint64_t need = (bytes + g - 1) / g * g;
  if (mapped_ + need > cfg_.heap_bytes)
    return Status(Errc::kNoResource, "symmetric heap exhausted: " + std::to_string(mapped_) + " of " +
                                         std::to_string(cfg_.heap_bytes) + " bytes mapped, " + std::to_string(need) + " more needed");
  for (uint64_t done = 0; done < need;) {
    const uint64_t n = std::min(need - done, cfg_.max_handle_bytes);  // one physical handle
    for (uint32_t pe = 0; pe < cfg_.npes && !cfg_.phantom; ++pe)
      if (Status st = va_->commit(base(pe) + mapped_ + done, n); !st)
        return Status(st.code(), "heap: mapping a chunk failed: " + st.message());
    ++mappings_;
    done += n;
  }
  for (uint64_t off = mapped_; off < mapped_ + need; off += g) {
    std::vector<uint8_t*> addrs(cfg_.npes);
    for (uint32_t pe = 0; pe < cfg_.npes; ++pe) addrs[pe] = base(pe) + off;
    if (Status st = hook_ ? hook_(uint32_t(off / g), addrs, g) : Status(); !st) return st;
  }
  space_.add_region(mapped_, need);
  mapped_ += need;
  return {};
}

Result<uint64_t> SymmetricHeap::alloc(uint64_t bytes, uint64_t align) {
  if (bytes == 0) return Status(Errc::kBadParam, "heap alloc: zero bytes");
  std::optional<uint64_t> off = space_.alloc(bytes, align);
  if (!off) {
    // Grow by what the free tail lacks (plus alignment slack), then retry once.
    const uint64_t tail = space_.free_at_end();
    if (Status st = grow(bytes + align - (tail < bytes + align ? tail : bytes + align)); !st) return st;
    off = space_.alloc(bytes, align);
    if (!off) return Status(Errc::kInternal, "heap alloc: no fit after growing");
  }
  top_ = std::max(top_, *off + bytes);
  return *off;
}

Status SymmetricHeap::free(uint64_t off) { return space_.free(off); }

void SymmetricHeap::reset() {
  for (uint32_t pe = 0; pe < cfg_.npes && !cfg_.phantom; ++pe) std::memset(base(pe), 0, top_);
  top_ = 0;
  space_ = Mspace();
  if (mapped_ > 0) space_.add_region(0, mapped_);
}

}  // namespace doorbell::heap
