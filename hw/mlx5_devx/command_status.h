// The one place a device's reply to a PRM command becomes an error, for every side of the
// DEVX seam (the driver, the model answering through it): status -> error class, and a
// message naming opcode, op_mod, status and syndrome (plus the backend's reading of the
// syndrome, if any).
#pragma once

#include "base/status.h"
#include "hw/mlx5_devx/devx_context.h"

namespace doorbell::devx {

// `in` / `out`: the command's mailboxes; `transport`: how the exchange itself went.
Status command_error(const void* in, const void* out, const Status& transport, const DevxContext* ctx = nullptr);

}  // namespace doorbell::devx
