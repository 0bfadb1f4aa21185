// What the NVSHMEM-API programs leave, written once for both of their runs: NVSHMEM over the
// verbs shim on GPUs (gpu/nvshmem_api.cu) and the same programs on doorbell's device API in
// the model (tests/ibgda/nvshmem_api_programs_test.cc). Host-and-device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"

namespace doorbell::nvshmem_api {

// Byte i of PE pe's source in transfer round `round`.
DOORBELL_HD uint8_t pattern(int pe, size_t i, int round) { return uint8_t(i * 29 + pe * 101 + round * 7 + 3); }

// The AMO program (every AMO at 8 and 4 bytes on the peer's words, in order, then signal set
// and add twice): what each fetching one returns, in order ...
inline constexpr unsigned long long kAmoOlds[] = {105, 116, 0, 0xf0f0, 0xff00, 0x0e0e, 0x000e, 0x100e, 0x1000,
                                                  10,  16,  0, 0xabcd, 0x0201, 0x0201, 0x8201, 0x8200};
// ... and the words it leaves: w8[0], w8[1], w4[0], w4[1], sig[0], sig[1].
inline constexpr uint64_t kAmoW8[2] = {117, 0x1000};
inline constexpr uint32_t kAmoW4[2] = {17, 0x8200};
inline constexpr uint64_t kAmoSig[2] = {9, 10};

// The put-with-signal ping-pong sends vals[7] (vals[i] = i) each way.
inline constexpr uint64_t kPingPongValue = 7;

}  // namespace doorbell::nvshmem_api
