// The DEVX layer's blocks saved and put back, for a world rewound between runs (sim/ibgda's
// WorldPool). Harness code: in fuzz builds neither traced nor checked by ASan
// (hw/mock_nic/CMakeLists.txt), as the NIC's run state is not.
#include <cstring>

#include "hw/mock_nic/devx/model_devx.h"

namespace doorbell::mock_nic {

void ModelDevx::save_blocks() {
  saved_.clear();
  for (const auto& [p, b] : allocations_) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    saved_[p].assign(bytes, bytes + b.bytes);
  }
}

Status ModelDevx::restore_blocks() {
  if (saved_.size() != allocations_.size()) return Status(Errc::kBadState, "restore_blocks: blocks were allocated or freed since the save");
  for (auto& [p, bytes] : saved_) std::memcpy(p, bytes.data(), bytes.size());
  return {};
}

}  // namespace doorbell::mock_nic
