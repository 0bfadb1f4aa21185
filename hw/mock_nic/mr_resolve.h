// A memory region as the NIC sees it, and the key check every data access passes (key,
// protection domain, access right, range): host-and-device code, over a plain table indexed
// by the key's upper 24 bits, shared by the NIC model (mr_table.h) and the GPU-resident engine (hw/cuda/nic_engine.cuh).
// A failed check is a KeyFault; the engine turns it into the right CQE syndrome.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
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

// The region `key` names in a table of `n`, if it lies in `pd` and grants `need`; else
// nullptr and *fault says why.
DOORBELL_HD const MemoryRegion* find_key(const MemoryRegion* mrs, size_t n, uint32_t key, uint32_t pd, uint32_t need,
                                         KeyFault* fault) {
  const uint32_t idx = key >> 8;
  if (idx >= n || !mrs[idx].valid || mrs[idx].key != key) return *fault = KeyFault::kBadKey, nullptr;
  const MemoryRegion& m = mrs[idx];
  if (m.pd != pd) return *fault = KeyFault::kWrongPd, nullptr;
  if ((m.access & need) != need) return *fault = KeyFault::kNoAccess, nullptr;
  return &m;
}

// Host pointer for [addr, addr+len) in region `m`; nullptr (kOutOfRange) where it leaves it.
DOORBELL_HD std::byte* resolve_in(const MemoryRegion& m, uint64_t addr, uint64_t len, KeyFault* fault, bool* phantom = nullptr) {
#ifndef DOORBELL_PLANT
  if (addr < m.start || len > m.length || addr - m.start > m.length - len) return *fault = KeyFault::kOutOfRange, nullptr;
#else  // planted for fuzz/engine_fuzz: the end of the region goes unchecked
  if (addr < m.start) return *fault = KeyFault::kOutOfRange, nullptr;
#endif
  if (phantom != nullptr) *phantom = m.phantom;
  return m.host + (addr - m.start);
}

// Host pointer for [addr, addr+len) under `key` in `pd` with rights `need`, in a table of
// `n` regions; on failure nullptr and *fault says why.
DOORBELL_HD std::byte* resolve_key(const MemoryRegion* mrs, size_t n, uint32_t key, uint32_t pd, uint64_t addr, uint64_t len,
                                   uint32_t need, KeyFault* fault, bool* phantom = nullptr) {
  const MemoryRegion* m = find_key(mrs, n, key, pd, need, fault);
  return m != nullptr ? resolve_in(*m, addr, len, fault, phantom) : nullptr;
}

}  // namespace doorbell::mock_nic
