// Tests use the model's minimal host driver under the testing namespace.
#pragma once

#include "hw/mock_nic/devx/rig.h"

namespace doorbell::testing {
using namespace doorbell::mlx5;
using mock_nic::Nic;
using mock_nic::driver::Rig;
using mock_nic::driver::SendQueue;
}  // namespace doorbell::testing
