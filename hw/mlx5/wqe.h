// mlx5 send-WQE segments (16-byte units, big-endian where the hardware is) and small
// setters in the shape of rdma-core's mlx5dv_set_*_seg. A WQE is a control segment
// followed by DS-1 further octowords; it occupies ceil(DS/4) 64-byte WQEBBs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/endian.h"
#include "hw/mlx5/opcodes.h"

namespace doorbell::mlx5 {

struct WqeCtrlSeg {
  Be32 opmod_idx_opcode;  // opmod[31:24] wqe_index[23:8] opcode[7:0]
  Be32 qpn_ds;            // qpn[31:8] ds[5:0]
  uint8_t signature;
  Be16 dci_stream_channel_id;
  uint8_t fm_ce_se;       // fence mode[7:5] completion mode[3:2] solicited[1]
  Be32 imm;               // immediate (WRITE_IMM), host value stored big-endian

  DOORBELL_HD uint8_t opcode() const { return uint8_t(opmod_idx_opcode.get()); }
  DOORBELL_HD uint8_t opmod() const { return uint8_t(opmod_idx_opcode.get() >> 24); }
  DOORBELL_HD uint16_t wqe_index() const { return uint16_t(opmod_idx_opcode.get() >> 8); }
  DOORBELL_HD uint32_t qpn() const { return qpn_ds.get() >> 8; }
  DOORBELL_HD uint8_t ds() const { return uint8_t(qpn_ds.get() & 0x3f); }
  DOORBELL_HD bool cq_update() const { return (fm_ce_se & kCtrlCqUpdate) != 0; }
  DOORBELL_HD uint8_t fence_mode() const { return fm_ce_se & kCtrlFmMask; }
};

struct WqeRaddrSeg {
  Be64 raddr;
  Be32 rkey;
  uint8_t reserved[4];
};

struct WqeDataSeg {
  Be32 byte_count;  // 0 means 2^31 bytes
  Be32 lkey;
  Be64 addr;
};

struct WqeInlineSeg {  // header of inline data; the data follows, padded to 16 bytes
  Be32 byte_count;     // length | kInlineSegFlag
};

struct WqeAtomicSeg {  // ATOMIC_CS / ATOMIC_FA, 8-byte operands
  Be64 swap_add;
  Be64 compare;
};

struct WqeMaskedFa64Seg {
  Be64 add;
  Be64 field_boundary;  // bit set = most significant bit of a field: its carry is dropped
};

struct WqeMaskedCs64Seg {  // two octowords
  Be64 swap;
  Be64 compare;
  Be64 swap_mask;
  Be64 compare_mask;
};

struct WqeMaskedFa32Seg {
  Be32 add;
  Be32 field_boundary;
  uint8_t reserved[8];
};

struct WqeMaskedCs32Seg {
  Be32 swap;
  Be32 compare;
  Be32 swap_mask;
  Be32 compare_mask;
};

static_assert(sizeof(WqeCtrlSeg) == 16);
static_assert(offsetof(WqeCtrlSeg, fm_ce_se) == 11 && offsetof(WqeCtrlSeg, imm) == 12);
static_assert(sizeof(WqeRaddrSeg) == 16);
static_assert(sizeof(WqeDataSeg) == 16);
static_assert(sizeof(WqeInlineSeg) == 4);
static_assert(sizeof(WqeAtomicSeg) == 16);
static_assert(sizeof(WqeMaskedFa64Seg) == 16);
static_assert(sizeof(WqeMaskedCs64Seg) == 32);
// The address vector a DC initiator's WQE carries right after its control segment
// (rdma-core's mlx5_wqe_av): the half form (16 bytes, one DS) names the target DCT by LID and
// number with its access key; the full form (48 bytes, three DS, kAvExtended set in dqp_dct)
// adds the GRH fields. NOP and DUMP carry none: they never leave the NIC.
struct WqeAvSeg {
  Be64 dc_key;
  Be32 dqp_dct;  // kAvExtended | DCT number
  uint8_t stat_rate_sl;
  uint8_t fl_mlid;
  Be16 rlid;
  uint8_t reserved0[4];
  uint8_t rmac[6];
  uint8_t tclass;
  uint8_t hop_limit;
  Be32 grh_gid_fl;
  uint8_t rgid[16];
};
inline constexpr uint32_t kAvExtended = 0x80000000u;
inline constexpr uint32_t kHalfAvDs = 1, kFullAvDs = 3;
DOORBELL_HD uint32_t av_ds(const WqeAvSeg& av) { return (av.dqp_dct.get() & kAvExtended) ? kFullAvDs : kHalfAvDs; }
static_assert(sizeof(WqeAvSeg) == 48);

static_assert(sizeof(WqeMaskedFa32Seg) == 16);
static_assert(sizeof(WqeMaskedCs32Seg) == 16);

// Number of WQEBBs a WQE of `ds` octowords occupies.
DOORBELL_HD constexpr uint32_t wqebbs_for_ds(uint32_t ds) { return (ds * kDsBytes + kWqebb - 1) / kWqebb; }

// Segments as their two little-endian 8-byte words, computed in registers and stored whole.
// Built in memory field by field and then read back in words (a control word; the CPU
// model's copy to the ring, 8 bytes at a time), every read stalled on store forwarding.
struct SegWords {
  uint64_t w0, w1;  // bytes 0..7, 8..15 of the segment
};
DOORBELL_HD void set_seg(void* s, SegWords w) {
  auto* b = static_cast<uint8_t*>(s);
  store_le<uint64_t>(b, w.w0);
  store_le<uint64_t>(b + 8, w.w1);
}

// A control segment. `pi` is the WQEBB index of the WQE's first block (wraps at 2^16); w0
// is also what a BlueFlame doorbell carries.
DOORBELL_HD constexpr SegWords ctrl_words(uint16_t pi, WqeOpcode op, uint8_t opmod, uint32_t qpn, uint8_t fm_ce_se,
                                          uint8_t ds, uint32_t imm = 0) {
  return {uint64_t(bswap32((uint32_t(opmod) << 24) | (uint32_t(pi) << 8) | uint32_t(op))) |
              uint64_t(bswap32((qpn << 8) | ds)) << 32,
          uint64_t(fm_ce_se) << 24 | uint64_t(bswap32(imm)) << 32};  // signature and dci_stream_channel_id 0
}
DOORBELL_HD constexpr SegWords raddr_words(uint64_t raddr, uint32_t rkey) { return {bswap64(raddr), bswap32(rkey)}; }
DOORBELL_HD constexpr SegWords data_words(uint32_t length, uint32_t lkey, uint64_t addr) {
  return {uint64_t(bswap32(length)) | uint64_t(bswap32(lkey)) << 32, bswap64(addr)};
}
DOORBELL_HD constexpr SegWords atomic_words(uint64_t swap_add, uint64_t compare) { return {bswap64(swap_add), bswap64(compare)}; }
// A 4-byte extended atomic's segment: four big-endian words (masked CS: swap, compare,
// swap_mask, compare_mask; masked FA: add, field_boundary, then 8 reserved bytes).
DOORBELL_HD constexpr SegWords masked32_words(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return {uint64_t(bswap32(a)) | uint64_t(bswap32(b)) << 32, uint64_t(bswap32(c)) | uint64_t(bswap32(d)) << 32};
}

DOORBELL_HD void set_ctrl_seg(WqeCtrlSeg* s, uint16_t pi, WqeOpcode op, uint8_t opmod, uint32_t qpn,
                              uint8_t fm_ce_se, uint8_t ds, uint32_t imm = 0) {
  set_seg(s, ctrl_words(pi, op, opmod, qpn, fm_ce_se, ds, imm));
}
DOORBELL_HD void set_raddr_seg(WqeRaddrSeg* s, uint64_t raddr, uint32_t rkey) { set_seg(s, raddr_words(raddr, rkey)); }
DOORBELL_HD void set_data_seg(WqeDataSeg* s, uint32_t length, uint32_t lkey, uint64_t addr) {
  set_seg(s, data_words(length, lkey, addr));
}
DOORBELL_HD void set_atomic_seg(WqeAtomicSeg* s, uint64_t swap_add, uint64_t compare) { set_seg(s, atomic_words(swap_add, compare)); }

// A half address vector (IB, LID-routed): what NVSHMEM copies into each DCI WQE when every
// port has a LID and the HCA reports compact_address_vector.
// Its 16 bytes: dc_key, dqp_dct, stat_rate_sl, fl_mlid (0), rlid.
DOORBELL_HD constexpr SegWords half_av_words(uint64_t dc_key, uint32_t dctn, uint16_t rlid, uint8_t sl = 0) {
  return {bswap64(dc_key), uint64_t(bswap32(dctn & 0xffffff)) | uint64_t(sl & 0xf) << 32 | uint64_t(bswap16(rlid)) << 48};
}
DOORBELL_HD void set_half_av_seg(WqeAvSeg* s, uint64_t dc_key, uint32_t dctn, uint16_t rlid, uint8_t sl = 0) {
  set_seg(s, half_av_words(dc_key, dctn, rlid, sl));
}

// Inline header; returns the DS the inline part occupies (header + data, 16-byte padded).
DOORBELL_HD uint32_t set_inline_seg(WqeInlineSeg* s, uint32_t length) {
  s->byte_count.set(length | kInlineSegFlag);
  return (uint32_t(sizeof(WqeInlineSeg)) + length + kDsBytes - 1) / kDsBytes;
}

// The 64-bit value a BlueFlame doorbell write carries: the first 8 bytes of the last WQE's
// control segment, as they sit in memory.
DOORBELL_HD uint64_t doorbell_word(const WqeCtrlSeg& s) {
  uint64_t v = 0;
  const uint8_t* p = s.opmod_idx_opcode.b;
  for (int i = 0; i < 4; ++i) v |= uint64_t(p[i]) << (8 * i);
  p = s.qpn_ds.b;
  for (int i = 0; i < 4; ++i) v |= uint64_t(p[i]) << (8 * (i + 4));
  return v;
}

// The value a doorbell store carries for producer index `pi`, built rather than read back: a
// NOP control segment's first 8 bytes with the index and the QPN (the NIC finds the QP by it).
DOORBELL_HD uint64_t doorbell_value(uint64_t pi, uint32_t qpn) {
  return ctrl_words(uint16_t(pi), WqeOpcode::kNop, 0, qpn, 0, 0).w0;
}

}  // namespace doorbell::mlx5
