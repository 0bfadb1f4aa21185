// Memory regions: registration in a protection domain over the modelled address space, and
// the key check every data access passes (key, PD, access right, range). A failed check is
// a KeyFault; the engine turns it into the right CQE syndrome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "hw/mem/address_space.h"
#include "hw/mock_nic/types.h"

namespace doorbell::mock_nic {

struct MemoryRegion {
  uint64_t start = 0;
  uint64_t length = 0;
  std::byte* host = nullptr;  // pinned translation of start
  uint32_t pd = 0;
  uint32_t access = 0;
  uint32_t key = 0;           // lkey == rkey: index << 8 | variant
  bool valid = false;
  bool phantom = false;       // over phantom memory: never dereference `host`
};

class MrTable {
 public:
  explicit MrTable(mem::AddressSpace& mem) : mem_(mem) { mrs_.resize(1); }  // index 0 is never a key
  ~MrTable();

  Result<uint32_t> reg(uint32_t pd, uint64_t addr, uint64_t length, uint32_t access);
  Status dereg(uint32_t key);
  const MemoryRegion* find(uint32_t key) const;

  // Host pointer for [addr, addr+len) under `key` in `pd` with rights `need`; on failure
  // nullptr and *fault says why.
  std::byte* resolve(uint32_t key, uint32_t pd, uint64_t addr, uint64_t len, uint32_t need, KeyFault* fault,
                     bool* phantom = nullptr) const {
    uint32_t idx = key >> 8;
    if (idx >= mrs_.size() || !mrs_[idx].valid || mrs_[idx].key != key) return *fault = KeyFault::kBadKey, nullptr;
    const MemoryRegion& m = mrs_[idx];
    if (m.pd != pd) return *fault = KeyFault::kWrongPd, nullptr;
    if ((m.access & need) != need) return *fault = KeyFault::kNoAccess, nullptr;
#ifndef DOORBELL_PLANT
    if (addr < m.start || len > m.length || addr - m.start > m.length - len) return *fault = KeyFault::kOutOfRange, nullptr;
#else  // planted for fuzz/engine_fuzz: the end of the region goes unchecked
    if (addr < m.start) return *fault = KeyFault::kOutOfRange, nullptr;
#endif
    if (phantom != nullptr) *phantom = m.phantom;
    return m.host + (addr - m.start);
  }

 private:
  mem::AddressSpace& mem_;
  std::vector<MemoryRegion> mrs_;
  std::vector<uint32_t> free_idx_;
  uint8_t variant_ = 0;
};

}  // namespace doorbell::mock_nic
