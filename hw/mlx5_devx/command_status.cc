#include "hw/mlx5_devx/command_status.h"

#include <cstdio>
#include <string>

#include "hw/mlx5/prm/layouts.h"

namespace doorbell::devx {

using namespace prm;

namespace {
Errc errc_for(uint8_t status) {
  switch (status) {
    case kStatBadOp: return Errc::kNotSupported;
    case kStatBadParam:
    case kStatBadIndex:
    case kStatBadInputLen:
    case kStatBadOutputLen: return Errc::kBadParam;
    case kStatBadRes: return Errc::kNotFound;
    case kStatBadResState:
    case kStatBadQpState:
    case kStatBadSysState: return Errc::kBadState;
    case kStatLimit:
    case kStatNoResources: return Errc::kNoResource;
    default: return Errc::kInternal;
  }
}
}  // namespace

Status command_error(const void* in, const void* out, const Status& transport, const DevxContext* ctx) {
  const uint8_t status = uint8_t(DB_GET(mbox_out, out, status));
  if (status == kStatOk) return transport;
  const auto opcode = uint16_t(DB_GET(mbox_in, in, opcode));
  char msg[256];
  std::snprintf(msg, sizeof msg, "%s (op_mod 0x%x) failed: status %s (0x%x), syndrome 0x%08x", opcode_name(opcode),
                unsigned(DB_GET(mbox_in, in, op_mod)), status_name(status), status,
                unsigned(DB_GET(mbox_out, out, syndrome)));
  std::string m = msg;
  if (const char* t = ctx != nullptr ? ctx->syndrome_text(uint32_t(DB_GET(mbox_out, out, syndrome))) : nullptr)
    m += std::string(" (") + t + ")";
  if (!transport.is_ok() && !transport.message().empty()) m += " [" + transport.message() + "]";
  return Status(errc_for(status), m);
}

}  // namespace doorbell::devx
