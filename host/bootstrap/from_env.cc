#include <cstdlib>
#include <string>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap {

namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

Result<uint32_t> env_u32(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return Status(Errc::kBadParam, std::string("bootstrap: DOORBELL_BOOTSTRAP_UID is set but ") + name + " is not");
  char* end = nullptr;
  const unsigned long x = std::strtoul(v, &end, 10);
  if (*end != '\0' || x > 0xffffffffu) return Status(Errc::kBadParam, std::string("bootstrap: ") + name + "='" + v + "' is not a number");
  return uint32_t(x);
}
}  // namespace

Result<std::unique_ptr<Bootstrap>> from_env() {
  if (env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMI_SIZE") != nullptr || env("PMIX_RANK") != nullptr) return mpi();
  if (const char* uid = env("DOORBELL_BOOTSTRAP_UID")) {
    Result<uint32_t> rank = env_u32("DOORBELL_RANK"), size = env_u32("DOORBELL_NRANKS");
    if (!rank) return rank.status();
    if (!size) return size.status();
    return tcp(uid, *rank, *size);
  }
  return single();
}

}  // namespace doorbell::bootstrap
