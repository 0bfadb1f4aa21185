// The 64-byte mlx5 CQE and the error-CQE view of the same bytes, plus the CQ and QP
// doorbell records. Layout as rdma-core's struct mlx5_cqe64 / mlx5_err_cqe. Each is encoded
// and decoded here once, also as the 8-byte words the GPU and the NIC model load and store
// (cqe_words, cqe_tail_*, dbr_word / dbr_send), and the 16-bit counters they carry are
// widened back to 64-bit indices by one rule (widen16).
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

// The 64-bit index a 16-bit counter stands for: the first one at or above `ref` whose low 16
// bits are `v` (ref <= result < ref + 2^16). A WQE counter in a CQE or the send counter of a
// doorbell record is read against an index known not to be ahead of it.
DOORBELL_HD constexpr uint64_t widen16(uint64_t ref, uint16_t v) { return ref + uint16_t(v - uint16_t(ref)); }

// The QP doorbell record's 8 bytes for send producer index `pi` as one little-endian word
// (receive counter 0, send counter pi & 0xffff, both big-endian), and its send counter back.
DOORBELL_HD constexpr uint64_t dbr_word(uint64_t pi) { return uint64_t(bswap32(uint32_t(pi & 0xffff))) << 32; }
DOORBELL_HD constexpr uint16_t dbr_send(uint64_t word) { return uint16_t(bswap32(uint32_t(word >> 32))); }

// The owner bit software expects for the CQE with consumer index `ci` in a ring of 2^log_n.
DOORBELL_HD constexpr uint8_t cqe_owner_for(uint64_t ci, uint32_t log_n) { return uint8_t((ci >> log_n) & 1); }

DOORBELL_HD constexpr bool cqe_opcode_is_error(uint8_t opcode) {
  return opcode == uint8_t(CqeOpcode::kReqErr) || opcode == uint8_t(CqeOpcode::kRespErr);
}

// A CQE's last 8 bytes (qpn, wqe_counter, signature, op_own) loaded as one little-endian word,
// and the 8 before them (..., vendor syndrome, syndrome): what a poller reads.
DOORBELL_HD constexpr uint16_t cqe_tail_wqe_counter(uint64_t w7) { return uint16_t(((w7 >> 32) & 0xff) << 8 | ((w7 >> 40) & 0xff)); }
DOORBELL_HD constexpr uint8_t cqe_tail_opcode(uint64_t w7) { return uint8_t(w7 >> 60); }
DOORBELL_HD constexpr uint8_t cqe_word6_syndrome(uint64_t w6) { return uint8_t(w6 >> 56); }

// What a NIC reports for one completion, and the CQE bytes it becomes.
struct Completion {
  CqeOpcode opcode = CqeOpcode::kReq;
  uint32_t qpn = 0;
  uint16_t wqe_counter = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;
  uint8_t wqe_opcode = 0;  // error CQEs: opcode of the failed WQE
  uint8_t syndrome = 0;
  uint8_t vendor_syndrome = 0;
  DOORBELL_HD constexpr bool error() const { return cqe_opcode_is_error(uint8_t(opcode)); }
};

// The CQE for `c` as the `pi`-th of a CQ of 2^log_size entries (the owner bit follows pi), as
// its last four little-endian 8-byte words (the first four are zero), computed in registers:
// a CQE assembled field by field in memory and copied out stalls on store forwarding. A
// writer stores w7 (op_own) last, with release order, so a poller that sees it sees the rest.
struct CqeWords {
  uint64_t w4, w5, w6, w7;  // bytes 32..39, 40..47, 48..55, 56..63 (op_own is w7's top byte)
};
DOORBELL_HD constexpr CqeWords cqe_words(const Completion& c, uint64_t pi, uint32_t log_size) {
  CqeWords q{0, 0, 0, 0};
  uint32_t qpn_word = 0;  // bytes 56..59, big-endian
  if (c.error()) {
    // Bytes 54 and 55: vendor syndrome, syndrome.
    q.w6 = uint64_t(c.vendor_syndrome) << 48 | uint64_t(c.syndrome) << 56;
    qpn_word = uint32_t(c.wqe_opcode) << 24 | (c.qpn & 0xffffff);
  } else {
    q.w4 = uint64_t(bswap32(c.imm)) << 32;      // bytes 36..39
    q.w5 = uint64_t(bswap32(c.byte_cnt)) << 32;  // bytes 44..47
    // Requester CQEs carry the WQE's opcode in the top byte, as hardware writes them.
    const bool req = c.opcode == CqeOpcode::kReq;
    qpn_word = (req ? uint32_t(c.wqe_opcode) << 24 : 0) | (c.qpn & 0xffffff);
  }
  const uint8_t op_own = uint8_t(uint8_t(c.opcode) << 4) | cqe_owner_for(pi, log_size);
  const uint16_t wc = uint16_t(c.wqe_counter << 8 | c.wqe_counter >> 8);  // bytes 60..61
  q.w7 = uint64_t(bswap32(qpn_word)) | uint64_t(wc) << 32 | uint64_t(op_own) << 56;
  return q;
}

// The completion a requester's WQE `idx` (opcode `wqe_op`) gets: success, or an error CQE
// with the mlx5 syndrome and the model's vendor code (none on a success).
DOORBELL_HD constexpr Completion requester_completion(uint32_t qpn, uint64_t idx, uint8_t wqe_op, uint32_t byte_cnt, uint8_t synd,
                                                      uint8_t vendor) {
  return {synd != 0 ? CqeOpcode::kReqErr : CqeOpcode::kReq, qpn, uint16_t(idx), byte_cnt, 0, wqe_op, synd, synd != 0 ? vendor : uint8_t(0)};
}

// Where the `pi`-th CQE of a CQ of 2^log_n entries goes: slot 0 of a collapsed CQ, else pi's.
DOORBELL_HD Cqe64* cqe_slot(Cqe64* ring, uint64_t pi, uint32_t log_n, bool collapsed) {
  return collapsed ? ring : ring + (pi & ((uint64_t(1) << log_n) - 1));
}

// One encoder and one decoder: what the words say is what was encoded.
static_assert(cqe_tail_wqe_counter(cqe_words({CqeOpcode::kReq, 7, 0xabcd}, 0, 0).w7) == 0xabcd);
static_assert(cqe_tail_opcode(cqe_words({CqeOpcode::kReqErr, 7, 1, 0, 0, 0, 0x15, 0x80}, 0, 0).w7) == uint8_t(CqeOpcode::kReqErr));
static_assert(cqe_word6_syndrome(cqe_words({CqeOpcode::kReqErr, 7, 1, 0, 0, 0, 0x15, 0x80}, 0, 0).w6) == 0x15);
static_assert(dbr_send(dbr_word(0x12345)) == 0x2345 && widen16(0x1fff0, 0x0005) == 0x20005 && widen16(0x10005, 0x0005) == 0x10005);

}  // namespace doorbell::mlx5
