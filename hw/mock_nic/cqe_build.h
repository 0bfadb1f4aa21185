// What the engine reports for one completion, and the 64 CQE bytes it becomes: one
// host-and-device source for the NIC model's CQs (cq.cc) and the GPU-resident engine
// (hw/cuda/nic_engine.cuh). The writer stores every word but the last first and the one
// holding op_own last, with release order, so a poller that sees the owner sees the rest.
#pragma once

#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/cqe.h"

namespace doorbell::mock_nic {

struct Completion {
  mlx5::CqeOpcode opcode = mlx5::CqeOpcode::kReq;
  uint32_t qpn = 0;
  uint16_t wqe_counter = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;
  uint8_t wqe_opcode = 0;  // error CQEs: opcode of the failed WQE
  uint8_t syndrome = 0;
  uint8_t vendor_syndrome = 0;
  DOORBELL_HD bool error() const { return opcode == mlx5::CqeOpcode::kReqErr || opcode == mlx5::CqeOpcode::kRespErr; }
};

// The CQE for `c` as the `pi`-th of a CQ of 2^log_size entries (the owner bit follows pi), as
// its last four little-endian 8-byte words (the first four are zero), computed in registers:
// a CQE assembled field by field in memory and then copied out stalled every copy on store
// forwarding (a sixth of the NIC model's time per signaled WQE).
struct CqeWords {
  uint64_t w4, w5, w6, w7;  // bytes 32..39, 40..47, 48..55, 56..63 (op_own is w7's top byte)
};
DOORBELL_HD CqeWords cqe_words(const Completion& c, uint64_t pi, uint32_t log_size) {
  CqeWords q{0, 0, 0, 0};
  uint32_t qpn_word;  // bytes 56..59, big-endian
  if (c.error()) {
    // Bytes 54 and 55: vendor syndrome, syndrome.
    q.w6 = uint64_t(c.vendor_syndrome) << 48 | uint64_t(c.syndrome) << 56;
    qpn_word = uint32_t(c.wqe_opcode) << 24 | (c.qpn & 0xffffff);
  } else {
    q.w4 = uint64_t(mlx5::bswap32(c.imm)) << 32;      // bytes 36..39
    q.w5 = uint64_t(mlx5::bswap32(c.byte_cnt)) << 32;  // bytes 44..47
    // Requester CQEs carry the WQE's opcode in the top byte, as hardware writes them.
    const bool req = c.opcode == mlx5::CqeOpcode::kReq;
    qpn_word = (req ? uint32_t(c.wqe_opcode) << 24 : 0) | (c.qpn & 0xffffff);
  }
  const uint8_t op_own = uint8_t(uint8_t(c.opcode) << 4) | mlx5::cqe_owner_for(pi, log_size);
  const uint16_t wc = uint16_t(c.wqe_counter << 8 | c.wqe_counter >> 8);  // bytes 60..61
  q.w7 = uint64_t(mlx5::bswap32(qpn_word)) | uint64_t(wc) << 32 | uint64_t(op_own) << 56;
  return q;
}

}  // namespace doorbell::mock_nic
