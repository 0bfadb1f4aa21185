// The 64-byte mlx5 CQE and the error-CQE view of the same bytes, plus the CQ and QP
// doorbell records. Layout as rdma-core's struct mlx5_cqe64 / mlx5_err_cqe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/endian.h"
#include "hw/mlx5/opcodes.h"

namespace doorbell::mlx5 {

struct Cqe64 {
  uint8_t rsvd0[32];
  Be32 srqn_uidx;
  Be32 imm_inval_pkey;
  uint8_t app;
  uint8_t app_op;
  Be16 app_info;
  Be32 byte_cnt;
  Be64 timestamp;
  Be32 sop_drop_qpn;  // qpn in bits [23:0]
  Be16 wqe_counter;
  uint8_t signature;
  uint8_t op_own;     // opcode[7:4] se[1] owner[0]

  DOORBELL_HD uint8_t opcode() const { return op_own >> 4; }
  DOORBELL_HD uint8_t owner() const { return op_own & 1; }
  DOORBELL_HD uint32_t qpn() const { return sop_drop_qpn.get() & 0xffffff; }
  DOORBELL_HD uint8_t wqe_opcode() const { return uint8_t(sop_drop_qpn.get() >> 24); }  // requester CQEs
};

// Error CQEs reuse the same 64 bytes with syndromes at 54/55 and the failing WQE's opcode.
struct ErrCqe64 {
  uint8_t rsvd0[32];
  Be32 srqn;
  uint8_t rsvd1[18];
  uint8_t vendor_err_synd;
  uint8_t syndrome;
  Be32 s_wqe_opcode_qpn;  // wqe opcode[31:24] qpn[23:0]
  Be16 wqe_counter;
  uint8_t signature;
  uint8_t op_own;
};

static_assert(sizeof(Cqe64) == 64 && sizeof(ErrCqe64) == 64);
static_assert(offsetof(Cqe64, byte_cnt) == 44 && offsetof(Cqe64, wqe_counter) == 60);
static_assert(offsetof(Cqe64, op_own) == 63 && offsetof(ErrCqe64, syndrome) == 55);
static_assert(offsetof(ErrCqe64, vendor_err_synd) == 54 && offsetof(ErrCqe64, s_wqe_opcode_qpn) == 56);

// CQ doorbell record: consumer index (24 bits) then the arm word.
struct CqDoorbellRecord {
  Be32 set_ci;
  Be32 arm;
};

// QP doorbell record: receive then send producer counters (low 16 bits meaningful).
struct QpDoorbellRecord {
  Be32 rcv;
  Be32 snd;
};

static_assert(sizeof(CqDoorbellRecord) == 8 && sizeof(QpDoorbellRecord) == 8);

// The owner bit software expects for the CQE with consumer index `ci` in a ring of 2^log_n.
DOORBELL_HD constexpr uint8_t cqe_owner_for(uint64_t ci, uint32_t log_n) { return uint8_t((ci >> log_n) & 1); }

}  // namespace doorbell::mlx5
