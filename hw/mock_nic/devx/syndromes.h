// Why the NIC model rejected a PRM command: each check has a syndrome (model-specific
// values; real firmware syndromes are opaque numbers too) and the PRM status it reports.
// One table maps them (syndromes.cc).
#pragma once

#include <cstdint>

namespace doorbell::mock_nic {

enum class DevxSyndrome : uint32_t {
  kNone = 0,
  kUnknownOpcode = 0x0d0b0001,
  kInputTooShort = 0x0d0b0002,
  kOutputTooShort = 0x0d0b0003,
  kWrongObject = 0x0d0b0004,  // the command does not apply to this object
  kUnknownUmem = 0x0d0b0010,
  kUmemRange = 0x0d0b0011,
  kUmemNotValid = 0x0d0b0012,
  kMisaligned = 0x0d0b0013,
  kUnknownPd = 0x0d0b0020,
  kUnknownUar = 0x0d0b0021,
  kUnknownCq = 0x0d0b0022,
  kCqOtherContext = 0x0d0b0023,
  kUnknownSrq = 0x0d0b0024,
  kUnknownQp = 0x0d0b0025,
  kQpnMismatch = 0x0d0b0026,
  kBadCqSize = 0x0d0b0030,
  kCqeSizeUnsupported = 0x0d0b0031,
  kBadSqSize = 0x0d0b0032,
  kQpTypeUnsupported = 0x0d0b0033,
  kRqTypeUnsupported = 0x0d0b0034,
  kBadMtu = 0x0d0b0035,
  kBadPort = 0x0d0b0036,
  kIllegalTransition = 0x0d0b0040,
  kCqInUse = 0x0d0b0041,
  kModelRefused = 0x0d0b00ff,  // the device model refused the object (message in last_error)
};

struct DevxSyndromeInfo {
  DevxSyndrome syndrome;
  uint8_t status;       // PRM command status
  const char* what;
};

const DevxSyndromeInfo& devx_syndrome_info(DevxSyndrome s);
// The description of a syndrome value, or nullptr if it is not one of the model's.
const char* devx_syndrome_text(uint32_t syndrome);

}  // namespace doorbell::mock_nic
