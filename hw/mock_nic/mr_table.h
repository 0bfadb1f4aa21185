// Memory regions: registration in a protection domain over the modelled address space; the
// key check every data access passes is mr_resolve.h's, over this table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "hw/mem/address_space.h"
#include "hw/mock_nic/mr_resolve.h"
#include "hw/mock_nic/types.h"

namespace doorbell::mock_nic {

class MrTable {
 public:
  // `salt` starts the variant byte: NICs that register the same regions in the same order
  // still hand out different keys, as separate devices do (a key of the wrong NIC fails).
  explicit MrTable(mem::AddressSpace& mem, uint8_t salt = 0) : mem_(mem), variant_(salt) { mrs_.resize(1); }  // index 0 is never a key
  ~MrTable();

  Result<uint32_t> reg(uint32_t pd, uint64_t addr, uint64_t length, uint32_t access);
  Status dereg(uint32_t key);
  const MemoryRegion* find(uint32_t key) const;
  // The whole table, indexed by key >> 8 (a GPU-resident engine takes a translated copy).
  const std::vector<MemoryRegion>& regions() const { return mrs_; }

  // Host pointer for [addr, addr+len) under `key` in `pd` with rights `need`; on failure
  // nullptr and *fault says why.
  std::byte* resolve(uint32_t key, uint32_t pd, uint64_t addr, uint64_t len, uint32_t need, KeyFault* fault,
                     bool* phantom = nullptr) const {
    return resolve_key(mrs_.data(), mrs_.size(), key, pd, addr, len, need, fault, phantom);
  }
  // The region `key` names, if it lies in `pd` and grants `need` (resolve() less the range).
  const MemoryRegion* find(uint32_t key, uint32_t pd, uint32_t need, KeyFault* fault) const {
    return find_key(mrs_.data(), mrs_.size(), key, pd, need, fault);
  }

 private:
  mem::AddressSpace& mem_;
  std::vector<MemoryRegion> mrs_;
  std::vector<uint32_t> free_idx_;
  uint8_t variant_ = 0;
};

}  // namespace doorbell::mock_nic
