// The DEVX layer's blocks saved and put back, for a world rewound between runs (sim/ibgda's
// WorldPool). Harness code: in fuzz builds neither traced nor checked by the sanitizers
// (hw/mock_nic/CMakeLists.txt), as the NIC's run state is not.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/mock_nic/devx/model_devx.h"

namespace doorbell::mock_nic {

namespace {

constexpr size_t kLine = 64;

// Whole lines copied inline: a call to memcpy would go through ASan's interceptor, whose
// checks of both ranges cost as much as the copy here (a rewind copies 20-50 KiB).
void copy_lines(uint8_t* to, const uint8_t* from, size_t bytes) {
#if defined(__has_builtin) && __has_builtin(__builtin_memcpy_inline)
  for (size_t i = 0; i < bytes; i += kLine) __builtin_memcpy_inline(to + i, from + i, kLine);
#else
  std::memcpy(to, from, bytes);
#endif
}

}  // namespace

// Blocks start page-aligned and own whole pages (alloc), so a block rounded up to a line
// stays inside its allocation.
void ModelDevx::save_blocks() {
  saved_.clear();
  size_t total = 0;
  for (const auto& [p, b] : allocations_) {
    const size_t bytes = (b.bytes + kLine - 1) / kLine * kLine;
    saved_.push_back({p, total, bytes});
    total += bytes;
  }
  saved_bytes_.resize(total);
  for (const Saved& s : saved_) copy_lines(saved_bytes_.data() + s.offset, static_cast<const uint8_t*>(s.at), s.bytes);
}

Status ModelDevx::restore_blocks() {
  if (saved_.size() != allocations_.size()) return Status(Errc::kBadState, "restore_blocks: blocks were allocated or freed since the save");
  for (const Saved& s : saved_) copy_lines(static_cast<uint8_t*>(s.at), saved_bytes_.data() + s.offset, s.bytes);
  return {};
}

}  // namespace doorbell::mock_nic
