#include "hw/mem/os_va_space.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace doorbell::mem {
namespace {

class OsVaSpace final : public base::VaSpace {
 public:
  Result<uint8_t*> reserve(uint64_t bytes) override {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return Status(Errc::kNoResource, std::string("mmap: ") + std::strerror(errno));
    return static_cast<uint8_t*>(p);
  }
  Status commit(uint8_t* at, uint64_t bytes) override {
    if (mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0) return Status(Errc::kNoResource, std::string("mprotect: ") + std::strerror(errno));
    return {};
  }
  void release(uint8_t* base, uint64_t bytes) override { munmap(base, bytes); }
};

}  // namespace

base::VaSpace& os_va_space() {
  static OsVaSpace va;
  return va;
}

}  // namespace doorbell::mem
