#include "hw/gpu_sim/device_memory.h"

#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>

#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::gpu_sim {
namespace {

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

[[noreturn]] void fail(const char* op, const std::string& what) { throw std::invalid_argument(std::string(op) + ": " + what); }

std::string at(uint32_t gpu, uint64_t va) { return "gpu " + std::to_string(gpu) + " address " + hex(va); }

}  // namespace

DeviceMemory::DeviceMemory(uint32_t gpus, models::CostModel costs) : costs_(costs) {
  for (uint32_t g = 0; g < gpus; ++g) spaces_.push_back({kVaBase + (uint64_t(g) << 40), {}, {}});
}

DeviceMemory::Space& DeviceMemory::space(uint32_t gpu, const char* op) {
  if (gpu >= spaces_.size()) fail(op, "gpu " + std::to_string(gpu) + " does not exist (" + std::to_string(spaces_.size()) + " GPUs)");
  return spaces_[gpu];
}

uint64_t DeviceMemory::malloc(uint32_t gpu, uint64_t bytes, bool phantom) {
  Space& sp = space(gpu, "malloc");
  if (bytes == 0) return 0;  // cudaMalloc(0) succeeds with a null pointer
  const uint64_t reserved = (bytes + kGranule - 1) / kGranule * kGranule;
  if (reserved < bytes || reserved > (uint64_t(1) << 40))
    fail("malloc", std::to_string(bytes) + " bytes on gpu " + std::to_string(gpu) + " exceed its 1 TiB address space");
  // First fit over the freed ranges, lowest address first: a freed range is reused at once.
  uint64_t base = 0;
  for (auto it = sp.holes.begin(); it != sp.holes.end(); ++it)
    if (it->second >= reserved) {
      base = it->first;
      if (it->second > reserved) sp.holes[base + reserved] = it->second - reserved;
      sp.holes.erase(it);
      break;
    }
  if (base == 0) {
    if (sp.top + reserved - (kVaBase + (uint64_t(gpu) << 40)) > (uint64_t(1) << 40))
      fail("malloc", std::to_string(bytes) + " bytes: gpu " + std::to_string(gpu) + "'s address space is exhausted");
    base = sp.top;
    sp.top += reserved;
  }
  const uint64_t id = next_id_++;
  Alloc& a = allocs_[id];
  a.id = id;
  a.base = base;
  a.size = bytes;
  a.reserved = reserved;
  if (!phantom) {
    a.bytes = mem::line_array(bytes);  // zeroed
    if (!a.bytes) throw std::bad_alloc();
    by_bytes_[a.bytes.get()] = id;
  }
  sp.live[base] = id;
  return base;
}

void DeviceMemory::free(uint32_t gpu, uint64_t va) {
  Space& sp = space(gpu, "free");
  if (va == 0) return;  // cudaFree(nullptr)
  const auto it = sp.live.find(va);
  if (it == sp.live.end()) fail("free", at(gpu, va) + " is not the start of a live allocation");
  const uint64_t id = it->second;
  Alloc& a = allocs_.at(id);
  sp.live.erase(it);
  // The range goes back, merged with free neighbours.
  uint64_t base = a.base, len = a.reserved;
  if (auto next = sp.holes.find(base + len); next != sp.holes.end()) {
    len += next->second;
    sp.holes.erase(next);
  }
  if (auto prev = sp.holes.lower_bound(base); prev != sp.holes.begin()) {
    --prev;
    if (prev->first + prev->second == base) {
      base = prev->first;
      len += prev->second;
      sp.holes.erase(prev);
    }
  }
  sp.holes[base] = len;
  a.live = false;
  if (a.mappings == 0) destroy(id);  // else the last ipc_close destroys it
}

const DeviceMemory::Alloc* DeviceMemory::live_at(uint32_t gpu, uint64_t va) const {
  if (gpu >= spaces_.size()) return nullptr;
  const auto& live = spaces_[gpu].live;
  auto it = live.upper_bound(va);
  if (it == live.begin()) return nullptr;
  const Alloc& a = allocs_.at((--it)->second);
  return va - a.base < a.size ? &a : nullptr;
}

uint8_t* DeviceMemory::host_ptr(uint32_t gpu, uint64_t va) {
  const Alloc* a = live_at(gpu, va);
  if (a == nullptr) fail("host_ptr", at(gpu, va) + " is not in a live allocation");
  return a->bytes ? a->bytes.get() + (va - a->base) : nullptr;
}

p2p::IpcHandle DeviceMemory::ipc_get_handle(uint32_t gpu, uint64_t va) const {
  const Alloc* a = live_at(gpu, va);
  if (a == nullptr) fail("ipc_get_handle", at(gpu, va) + " is not in a live allocation");
  return {a->base, a->size, a->id};
}

uint8_t* DeviceMemory::ipc_open(const p2p::IpcHandle& h) {
  const auto it = allocs_.find(h.buffer_id);
  if (it == allocs_.end())
    fail("ipc_open", "buffer id " + std::to_string(h.buffer_id) + " (base " + hex(h.base) +
                         ") does not exist: it was freed and its last mapping closed, or never allocated");
  Alloc& a = it->second;
  if (a.base != h.base || a.size != h.size)
    fail("ipc_open", "handle base " + hex(h.base) + " size " + std::to_string(h.size) + " does not match buffer id " +
                         std::to_string(h.buffer_id) + " (base " + hex(a.base) + " size " + std::to_string(a.size) + ")");
  ++a.mappings;
  ++opens_;
  return a.bytes.get();
}

uint8_t* DeviceMemory::ipc_open(AgentCtx& ag, const p2p::IpcHandle& h) {
  ag.advance(costs_.ipc_open_ns);
  return ipc_open(h);
}

void DeviceMemory::ipc_close(uint8_t* mapping) {
  const auto it = by_bytes_.find(mapping);
  if (it == by_bytes_.end())
    fail("ipc_close", mapping == nullptr ? std::string("a null mapping (phantom mappings close by handle)")
                                         : "pointer " + hex(reinterpret_cast<uintptr_t>(mapping)) + " is not a mapping ipc_open returned");
  unmap(it->second, "ipc_close");
}

void DeviceMemory::ipc_close(const p2p::IpcHandle& h) { unmap(h.buffer_id, "ipc_close"); }

void DeviceMemory::unmap(uint64_t id, const char* op) {
  const auto it = allocs_.find(id);
  if (it == allocs_.end() || it->second.mappings == 0) fail(op, "buffer id " + std::to_string(id) + " has no open mapping");
  if (--it->second.mappings == 0 && !it->second.live) destroy(id);
}

void DeviceMemory::destroy(uint64_t id) {
  const auto it = allocs_.find(id);
  if (it->second.bytes) by_bytes_.erase(it->second.bytes.get());
  allocs_.erase(it);
}

std::optional<AllocInfo> DeviceMemory::allocation_of(const uint8_t* p) const {
  auto it = by_bytes_.upper_bound(p);
  if (it == by_bytes_.begin()) return std::nullopt;
  --it;
  const Alloc& a = allocs_.at(it->second);
  if (reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(it->first) >= a.size) return std::nullopt;
  return AllocInfo{it->second, a.live};
}

uint64_t DeviceMemory::open_mappings() const {
  uint64_t n = 0;
  for (const auto& [id, a] : allocs_) n += a.mappings;
  return n;
}

}  // namespace doorbell::gpu_sim
