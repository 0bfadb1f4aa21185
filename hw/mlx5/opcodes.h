// mlx5 opcodes, CQE opcodes, error syndromes and control-segment flags (values from the
// mlx5 PRM as published in rdma-core's infiniband/mlx5dv.h; the DUMP opcode as used by
// NVSHMEM's consistency WQE). tests/mlx5 checks each value against mlx5dv.h.
#pragma once

#include <cstdint>

namespace doorbell::mlx5 {

inline constexpr uint32_t kWqebb = 64;          // one send WQE basic block
inline constexpr uint32_t kDsBytes = 16;        // DS counts 16-byte octowords
inline constexpr uint32_t kMaxDs = 63;          // the ctrl segment's DS field is 6 bits
inline constexpr uint32_t kInlineSegFlag = 0x80000000u;

enum class WqeOpcode : uint8_t {
  kNop = 0x00,
  kSendInval = 0x01,
  kRdmaWrite = 0x08,
  kRdmaWriteImm = 0x09,
  kSend = 0x0a,
  kSendImm = 0x0b,
  kRdmaRead = 0x10,
  kAtomicCs = 0x11,
  kAtomicFa = 0x12,
  kAtomicMaskedCs = 0x14,
  kAtomicMaskedFa = 0x15,
  kDump = 0x23,  // reads local memory only; with a fence flag it is NVSHMEM's CST
};

// Extended (masked) atomics carry the operand size in opmod: 0x8 | log2(bytes) - 2.
inline constexpr uint8_t ext_atomic_opmod(uint32_t bytes) {
  return bytes == 4 ? 0x08 : bytes == 8 ? 0x09 : 0xff;
}

enum class CqeOpcode : uint8_t {
  kReq = 0,
  kRespWrImm = 1,
  kRespSend = 2,
  kRespSendImm = 3,
  kReqErr = 13,
  kRespErr = 14,
  kInvalid = 15,
};

enum class CqeSyndrome : uint8_t {
  kNone = 0x00,
  kLocalLengthErr = 0x01,
  kLocalQpOpErr = 0x02,
  kLocalProtErr = 0x04,
  kWrFlushErr = 0x05,
  kMwBindErr = 0x06,
  kBadRespErr = 0x10,
  kLocalAccessErr = 0x11,
  kRemoteInvalReqErr = 0x12,
  kRemoteAccessErr = 0x13,
  kRemoteOpErr = 0x14,
  kTransportRetryExcErr = 0x15,
  kRnrRetryExcErr = 0x16,
  kRemoteAbortedErr = 0x22,
};

const char* syndrome_name(CqeSyndrome s);
const char* opcode_name(WqeOpcode op);

// fm_ce_se byte of the control segment.
inline constexpr uint8_t kCtrlSolicited = 1 << 1;
inline constexpr uint8_t kCtrlCqUpdate = 2 << 2;
inline constexpr uint8_t kCtrlFmMask = 7 << 5;
inline constexpr uint8_t kCtrlFmInitiatorSmallFence = 1 << 5;
inline constexpr uint8_t kCtrlFmFence = 2 << 5;
inline constexpr uint8_t kCtrlFmStrongOrdering = 3 << 5;
inline constexpr uint8_t kCtrlFmFenceAndSmall = 4 << 5;  // rdma-core's MLX5_WQE_CTRL_FENCE

// Doorbell record words (index into the two big-endian 32-bit words of a QP DBR).
inline constexpr int kRcvDbr = 0;
inline constexpr int kSndDbr = 1;

// UAR page layout: BlueFlame registers at 0x800, two alternating buffers of 256 bytes.
inline constexpr uint32_t kUarPageSize = 4096;
inline constexpr uint32_t kBfOffset = 0x800;
inline constexpr uint32_t kBfSize = 0x100;

}  // namespace doorbell::mlx5
