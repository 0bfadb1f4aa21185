#include "host/bootstrap/link_join.h"

#include <unistd.h>

#include <cstdio>
#include <vector>

namespace doorbell::mock_nic {

Result<std::unique_ptr<ShmLinks>> join_links(bootstrap::Bootstrap& boot) {
  const uint32_t me = boot.rank(), n = boot.size();
  constexpr size_t kName = 64;
  std::vector<char> names(n * kName);
  if (me == 0) std::snprintf(names.data(), kName, "/doorbell-links-%d", int(getpid()));
  if (Status s = boot.allgather(names.data(), kName); !s) return s;
  const std::string name(names.data());  // rank 0's block
  std::unique_ptr<ShmLinks> links;
  auto open = [&](bool create) -> Status {
    auto l = ShmLinks::open(name, n, me, create);
    if (!l) return l.status();
    links = std::move(*l);
    return {};
  };
  if (me == 0)
    if (Status s = open(true); !s) return s;
  if (Status s = boot.barrier(); !s) return s;  // the segment exists
  if (me != 0)
    if (Status s = open(false); !s) return s;
  if (Status s = boot.barrier(); !s) return s;  // everyone has it mapped
  if (Status s = links->unlink(); !s) return s;
  return links;
}

}  // namespace doorbell::mock_nic
