#include "hw/mock_nic/mr_table.h"

namespace doorbell::mock_nic {

MrTable::~MrTable() {
  for (const MemoryRegion& m : mrs_)
    if (m.valid) mem_.unpin(m.start);
}

Result<uint32_t> MrTable::reg(uint32_t pd, uint64_t addr, uint64_t length, uint32_t access) {
  if (length == 0) return Status(Errc::kBadParam, "reg_mr: zero length");
  std::byte* host = mem_.translate(addr, length);
  if (host == nullptr) return Status(Errc::kBadParam, "reg_mr: range is not inside one mapped segment");
  if (Status st = mem_.pin(addr); !st) return st;
  uint32_t idx;
  if (!free_idx_.empty()) {
    idx = free_idx_.back();
    free_idx_.pop_back();
  } else {
    if (mrs_.size() >= (1u << 24)) return Status(Errc::kNoResource, "reg_mr: mkey table full");
    idx = uint32_t(mrs_.size());
    mrs_.emplace_back();
  }
  // The variant byte changes on every registration, so a stale key of a reused slot fails.
  uint32_t key = (idx << 8) | ++variant_;
  mrs_[idx] = MemoryRegion{addr, length, host, pd, access, key, true, mem_.find(addr)->phantom};
  return key;
}

Status MrTable::dereg(uint32_t key) {
  uint32_t idx = key >> 8;
  if (idx == 0 || idx >= mrs_.size() || !mrs_[idx].valid || mrs_[idx].key != key)
    return Status(Errc::kNotFound, "dereg_mr: unknown key");
  mem_.unpin(mrs_[idx].start);
  mrs_[idx].valid = false;
  free_idx_.push_back(idx);
  return {};
}

const MemoryRegion* MrTable::find(uint32_t key) const {
  uint32_t idx = key >> 8;
  if (idx >= mrs_.size() || !mrs_[idx].valid || mrs_[idx].key != key) return nullptr;
  return &mrs_[idx];
}

}  // namespace doorbell::mock_nic
