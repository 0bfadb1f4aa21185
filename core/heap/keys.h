// Device-side key tables of the symmetric heap (SPEC §1): one lkey per heap chunk, one rkey
// per (chunk, PE) at rkeys[chunk * npes + pe]; the first kConstKeys entries live in a fixed
// array (constant memory on the GPU), the rest behind a pointer (global memory). Each entry
// carries next_addr, the end of its chunk, so a transfer can be split where a chunk ends.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace doorbell::heap {

struct KeyEntry {
  uint32_t key = 0;
  uint64_t next_addr = 0;  // end of the chunk, in the owning PE's address space
};

struct KeyTables {
  static constexpr uint32_t kConstKeys = 32;
  uint32_t npes = 0;
  uint32_t log2_granularity = 0;
  uint32_t nchunks = 0;
  KeyEntry lkeys_const[kConstKeys];
  KeyEntry* lkeys_global = nullptr;   // entries kConstKeys.. (chunk index)
  KeyEntry rkeys_const[kConstKeys];
  KeyEntry* rkeys_global = nullptr;   // entries kConstKeys.. (chunk * npes + pe)
};

DOORBELL_HD const KeyEntry& lkey_entry(const KeyTables& t, uint32_t chunk) {
  return chunk < KeyTables::kConstKeys ? t.lkeys_const[chunk] : t.lkeys_global[chunk - KeyTables::kConstKeys];
}

DOORBELL_HD const KeyEntry& rkey_entry(const KeyTables& t, uint32_t chunk, uint32_t pe) {
  const uint32_t i = chunk * t.npes + pe;
  return i < KeyTables::kConstKeys ? t.rkeys_const[i] : t.rkeys_global[i - KeyTables::kConstKeys];
}

// One piece of a transfer: both ranges inside one chunk each.
struct Piece {
  uint64_t laddr, raddr;
  uint32_t lkey, rkey;
  uint64_t bytes;
};

// The first piece of [loff, loff+bytes) local / [roff, ...) on `pe` (heap offsets):
// min(remaining, local chunk left, remote chunk left).
DOORBELL_HD Piece first_piece(const KeyTables& t, uint64_t local_base, uint64_t remote_base, uint64_t loff, uint64_t roff,
                              uint64_t bytes, uint32_t pe) {
  const KeyEntry& l = lkey_entry(t, uint32_t(loff >> t.log2_granularity));
  const KeyEntry& r = rkey_entry(t, uint32_t(roff >> t.log2_granularity), pe);
  Piece p;
  p.laddr = local_base + loff;
  p.raddr = remote_base + roff;
  p.lkey = l.key;
  p.rkey = r.key;
  const uint64_t lleft = l.next_addr - p.laddr, rleft = r.next_addr - p.raddr;
  p.bytes = bytes < lleft ? bytes : lleft;
  p.bytes = p.bytes < rleft ? p.bytes : rleft;
  return p;
}

}  // namespace doorbell::heap
