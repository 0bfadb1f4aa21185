// The links of a job whose processes found each other through a bootstrap: rank 0 creates
// the shared-memory segment and hands its name out; every rank maps it; then the name is
// unlinked, so nothing outlives the job even if it dies.
#pragma once

#include <memory>

#include "base/status.h"
#include "host/bootstrap/bootstrap.h"
#include "hw/mock_nic/link.h"

namespace doorbell::mock_nic {

Result<std::unique_ptr<ShmLinks>> join_links(bootstrap::Bootstrap& boot);

}  // namespace doorbell::mock_nic
