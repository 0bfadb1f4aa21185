#include "hw/mock_nic/cq.h"

#include <atomic>
#include <cstring>

namespace doorbell::mock_nic {

uint32_t Cq::drain(uint64_t now) {
  uint32_t n = 0;
  while (!pending.empty() && pending.front().due <= now) {
    write(pending.front().c);
    pending.pop_front();
    ++n;
  }
  return n;
}

}  // namespace doorbell::mock_nic
