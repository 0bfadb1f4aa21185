// Shared vocabulary of the software mlx5 NIC model: object states, access rights, the
// model's configuration and its vendor-syndrome codes (the mlx5 syndrome says what class of
// error; the vendor byte says precisely which check failed, for diagnosis).
#pragma once

#include <cstdint>

namespace doorbell::mock_nic {

enum class QpState : uint8_t { kRst, kInit, kRtr, kRts, kErr };
const char* qp_state_name(QpState s);

// Memory-region access rights (values as ibv_access_flags).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
};

// Why a key check failed (the low nibble of the vendor syndrome for key errors).
enum class KeyFault : uint8_t { kNone = 0, kBadKey = 1, kWrongPd = 2, kNoAccess = 3, kOutOfRange = 4 };

// Model-specific vendor syndromes written to err CQE byte 54.
namespace vendor {
inline constexpr uint8_t kBadOpcode = 0x01;
inline constexpr uint8_t kBadDs = 0x02;
inline constexpr uint8_t kQpnMismatch = 0x03;
inline constexpr uint8_t kWqeIndexMismatch = 0x04;
inline constexpr uint8_t kBadSegment = 0x05;
inline constexpr uint8_t kLengthTooLarge = 0x06;
inline constexpr uint8_t kLocalKeyBase = 0x10;   // + KeyFault
inline constexpr uint8_t kRemoteKeyBase = 0x18;  // + KeyFault
inline constexpr uint8_t kAtomicMisaligned = 0x20;
inline constexpr uint8_t kAtomicBadLength = 0x21;
inline constexpr uint8_t kRemoteNotReady = 0x30;
inline constexpr uint8_t kRnr = 0x31;
inline constexpr uint8_t kQpAccess = 0x32;  // the responder QP does not allow this operation
inline constexpr uint8_t kPhantomAtomic = 0x33;  // an atomic needs real bytes, not phantom memory
inline constexpr uint8_t kForcedError = 0x40;
inline constexpr uint8_t kFlushed = 0x41;
}  // namespace vendor

struct NicConfig {
  uint16_t lid = 1;                 // port LID: how a fabric addresses this NIC
  // READ / atomic responses land 0..response_delay_max engine actions after issue (drawn
  // from `seed`), in order; 0 lands them at once. Exposes missing fences.
  uint32_t response_delay_max = 0;
  uint64_t seed = 1;
  bool check_wqe_index = true;      // ctrl-segment WQE index must equal the consumer's
  // After a doorbell, the engine re-reads the send DBR whenever it drains the ring, so DBR
  // advances made while it is active are picked up without a new doorbell (as hardware
  // keeps fetching while the SQ is scheduled).
  bool reread_dbr_when_drained = true;
};

}  // namespace doorbell::mock_nic
