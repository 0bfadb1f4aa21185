// Device-side key tables of the symmetric heap (SPEC §1): one lkey per (heap chunk, NIC) at
// lkeys[chunk * ndevs + dev], one rkey per (chunk, PE, NIC) at rkeys[(chunk * npes + pe) *
// ndevs + dev] (NVSHMEM's order: a chunk is registered on every NIC, each giving its own
// keys, and a QP uses its NIC's); the first kConstKeys entries live in a fixed
// array (constant memory on the GPU), the rest behind a pointer (global memory). Each entry
// carries next_addr, the end of its chunk, so a transfer can be split where a chunk ends.
#pragma once

#include <cstdint>
#ifndef __CUDA_ARCH__
#include <cstdio>
#include <string>
#endif

#include "base/config.h"

namespace doorbell::heap {

struct KeyEntry {
  uint32_t key = 0;
  uint64_t next_addr = 0;  // end of the chunk, in the owning PE's address space
};

struct KeyTables {
  static constexpr uint32_t kConstKeys = 32;
  uint32_t npes = 0;
  uint32_t ndevs = 1;  // NICs per PE
  uint32_t log2_granularity = 0;
  uint32_t nchunks = 0;
  KeyEntry lkeys_const[kConstKeys];
  KeyEntry* lkeys_global = nullptr;   // entries kConstKeys.. (chunk * ndevs + dev)
  KeyEntry rkeys_const[kConstKeys];
  KeyEntry* rkeys_global = nullptr;   // entries kConstKeys.. ((chunk * npes + pe) * ndevs + dev)
};

DOORBELL_HD uint32_t lkey_index(const KeyTables& t, uint32_t chunk, uint32_t dev) { return chunk * t.ndevs + dev; }
DOORBELL_HD uint32_t rkey_index(const KeyTables& t, uint32_t chunk, uint32_t pe, uint32_t dev) {
  return (chunk * t.npes + pe) * t.ndevs + dev;
}

// A lookup outside the tables (a chunk past the heap, a PE past the job, a NIC past the PE's):
// on a GPU it reads whatever lies there; the CPU model keeps the first one of the run (the
// thread's: a run is one thread) and answers with an empty entry, whose key 0 no NIC takes.
struct LookupFault {
  const char* what = nullptr;  // null: none
  uint64_t index = 0, bound = 0, offset = 0;
  uint32_t pe = 0, dev = 0;
};
#ifndef __CUDA_ARCH__
inline LookupFault& lookup_fault() {
  thread_local LookupFault f;
  return f;
}
inline void note_lookup_fault(const LookupFault& f) {
  if (lookup_fault().what == nullptr) lookup_fault() = f;
}
// The run's first fault as a report ("" if none), cleared for the next run.
inline std::string take_lookup_fault() {
  const LookupFault f = lookup_fault();
  lookup_fault() = {};
  if (f.what == nullptr) return {};
  char off[24];
  std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(f.offset));
  return std::string("out-of-bounds device lookup: ") + f.what + " " + std::to_string(f.index) + ", past the bound " + std::to_string(f.bound) +
         " (for PE " + std::to_string(f.pe) + ", NIC " + std::to_string(f.dev) + ", heap offset " + off + ")";
}
inline const KeyEntry& bad_key_lookup(const KeyTables& t, const char* which, uint32_t chunk, uint32_t pe, uint32_t dev) {
  const bool c = chunk >= t.nchunks, p = pe >= t.npes;
  note_lookup_fault({c ? which : p ? "rkey table: PE" : "key table: NIC", c ? chunk : p ? pe : dev, c ? t.nchunks : p ? t.npes : t.ndevs,
                     uint64_t(chunk) << t.log2_granularity, pe, dev});
  static const KeyEntry empty{};
  return empty;
}
#endif

DOORBELL_HD const KeyEntry& lkey_entry(const KeyTables& t, uint32_t chunk, uint32_t dev) {
#ifndef __CUDA_ARCH__
  if (chunk >= t.nchunks || dev >= t.ndevs) return bad_key_lookup(t, "lkey table: chunk", chunk, 0, dev);
#endif
  const uint32_t i = lkey_index(t, chunk, dev);
  return i < KeyTables::kConstKeys ? t.lkeys_const[i] : t.lkeys_global[i - KeyTables::kConstKeys];
}

DOORBELL_HD const KeyEntry& rkey_entry(const KeyTables& t, uint32_t chunk, uint32_t pe, uint32_t dev) {
#ifndef __CUDA_ARCH__
  if (chunk >= t.nchunks || pe >= t.npes || dev >= t.ndevs) return bad_key_lookup(t, "rkey table: chunk", chunk, pe, dev);
#endif
  const uint32_t i = rkey_index(t, chunk, pe, dev);
  return i < KeyTables::kConstKeys ? t.rkeys_const[i] : t.rkeys_global[i - KeyTables::kConstKeys];
}

// The same entry, to change in place (a fault that makes a key stale).
DOORBELL_HD KeyEntry& rkey_entry(KeyTables& t, uint32_t chunk, uint32_t pe, uint32_t dev) {
  return const_cast<KeyEntry&>(rkey_entry(static_cast<const KeyTables&>(t), chunk, pe, dev));
}

// One piece of a transfer: both ranges inside one chunk each.
struct Piece {
  uint64_t laddr, raddr;
  uint32_t lkey, rkey;
  uint64_t bytes;
};

// The first piece of [loff, loff+bytes) local / [roff, ...) on `pe` (heap offsets), with
// the keys of NIC `dev`: min(remaining, local chunk left, remote chunk left). Where a piece
// ends does not depend on the NIC.
DOORBELL_HD Piece first_piece(const KeyTables& t, uint64_t local_base, uint64_t remote_base, uint64_t loff, uint64_t roff,
                              uint64_t bytes, uint32_t pe, uint32_t dev) {
  const KeyEntry& l = lkey_entry(t, uint32_t(loff >> t.log2_granularity), dev);
  const KeyEntry& r = rkey_entry(t, uint32_t(roff >> t.log2_granularity), pe, dev);
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
