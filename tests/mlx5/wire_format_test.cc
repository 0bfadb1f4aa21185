// The wire formats against rdma-core's own definitions: layouts (sizes, offsets), constant
// values, and byte-for-byte round trips with rdma-core's setters.
#include "hw/mlx5/wqe.h"

#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <cstring>
#include <random>

#include "hw/mlx5/cqe.h"

namespace doorbell::mlx5 {
namespace {

#define SAME_OFFSET(ours, theirs, field) static_assert(offsetof(ours, field) == offsetof(theirs, field))
static_assert(sizeof(WqeCtrlSeg) == sizeof(mlx5_wqe_ctrl_seg));
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, qpn_ds);
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, signature);
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, fm_ce_se);
SAME_OFFSET(WqeCtrlSeg, mlx5_wqe_ctrl_seg, imm);
static_assert(sizeof(WqeRaddrSeg) == sizeof(mlx5_wqe_raddr_seg));
SAME_OFFSET(WqeRaddrSeg, mlx5_wqe_raddr_seg, raddr);
SAME_OFFSET(WqeRaddrSeg, mlx5_wqe_raddr_seg, rkey);
static_assert(sizeof(WqeDataSeg) == sizeof(mlx5_wqe_data_seg));
SAME_OFFSET(WqeDataSeg, mlx5_wqe_data_seg, byte_count);
SAME_OFFSET(WqeDataSeg, mlx5_wqe_data_seg, lkey);
SAME_OFFSET(WqeDataSeg, mlx5_wqe_data_seg, addr);
static_assert(sizeof(WqeAtomicSeg) == sizeof(mlx5_wqe_atomic_seg));
SAME_OFFSET(WqeAtomicSeg, mlx5_wqe_atomic_seg, swap_add);
SAME_OFFSET(WqeAtomicSeg, mlx5_wqe_atomic_seg, compare);
static_assert(sizeof(WqeInlineSeg) == sizeof(mlx5_wqe_inl_data_seg));
static_assert(sizeof(Cqe64) == sizeof(mlx5_cqe64));
SAME_OFFSET(Cqe64, mlx5_cqe64, srqn_uidx);
SAME_OFFSET(Cqe64, mlx5_cqe64, imm_inval_pkey);
SAME_OFFSET(Cqe64, mlx5_cqe64, byte_cnt);
SAME_OFFSET(Cqe64, mlx5_cqe64, timestamp);
SAME_OFFSET(Cqe64, mlx5_cqe64, sop_drop_qpn);
SAME_OFFSET(Cqe64, mlx5_cqe64, wqe_counter);
SAME_OFFSET(Cqe64, mlx5_cqe64, signature);
SAME_OFFSET(Cqe64, mlx5_cqe64, op_own);
static_assert(sizeof(ErrCqe64) == sizeof(mlx5_err_cqe));
SAME_OFFSET(ErrCqe64, mlx5_err_cqe, vendor_err_synd);
SAME_OFFSET(ErrCqe64, mlx5_err_cqe, syndrome);
SAME_OFFSET(ErrCqe64, mlx5_err_cqe, s_wqe_opcode_qpn);
SAME_OFFSET(ErrCqe64, mlx5_err_cqe, wqe_counter);

static_assert(uint8_t(WqeOpcode::kNop) == MLX5_OPCODE_NOP);
static_assert(uint8_t(WqeOpcode::kRdmaWrite) == MLX5_OPCODE_RDMA_WRITE);
static_assert(uint8_t(WqeOpcode::kRdmaWriteImm) == MLX5_OPCODE_RDMA_WRITE_IMM);
static_assert(uint8_t(WqeOpcode::kSend) == MLX5_OPCODE_SEND);
static_assert(uint8_t(WqeOpcode::kRdmaRead) == MLX5_OPCODE_RDMA_READ);
static_assert(uint8_t(WqeOpcode::kAtomicCs) == MLX5_OPCODE_ATOMIC_CS);
static_assert(uint8_t(WqeOpcode::kAtomicFa) == MLX5_OPCODE_ATOMIC_FA);
static_assert(uint8_t(WqeOpcode::kAtomicMaskedCs) == MLX5_OPCODE_ATOMIC_MASKED_CS);
static_assert(uint8_t(WqeOpcode::kAtomicMaskedFa) == MLX5_OPCODE_ATOMIC_MASKED_FA);
static_assert(uint8_t(CqeSyndrome::kLocalLengthErr) == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
static_assert(uint8_t(CqeSyndrome::kLocalQpOpErr) == MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
static_assert(uint8_t(CqeSyndrome::kLocalProtErr) == MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
static_assert(uint8_t(CqeSyndrome::kWrFlushErr) == MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
static_assert(uint8_t(CqeSyndrome::kRemoteInvalReqErr) == MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
static_assert(uint8_t(CqeSyndrome::kRemoteAccessErr) == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
static_assert(uint8_t(CqeSyndrome::kTransportRetryExcErr) == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
static_assert(uint8_t(CqeSyndrome::kRnrRetryExcErr) == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
static_assert(uint8_t(CqeOpcode::kReq) == MLX5_CQE_REQ && uint8_t(CqeOpcode::kReqErr) == MLX5_CQE_REQ_ERR);
static_assert(uint8_t(CqeOpcode::kInvalid) == MLX5_CQE_INVALID);
static_assert(uint8_t(CqeOpcode::kRespWrImm) == MLX5_CQE_RESP_WR_IMM);
static_assert(kCtrlCqUpdate == MLX5_WQE_CTRL_CQ_UPDATE && kCtrlSolicited == MLX5_WQE_CTRL_SOLICITED);
static_assert(kCtrlFmFenceAndSmall == MLX5_WQE_CTRL_FENCE);
static_assert(kCtrlFmInitiatorSmallFence == MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
static_assert(kWqebb == MLX5_SEND_WQE_BB && kInlineSegFlag == MLX5_INLINE_SEG && kSndDbr == MLX5_SND_DBR);

class WireFormat : public ::testing::Test {
 protected:
  std::mt19937_64 rng{0xd00b311};
  uint64_t r64() { return rng(); }
  uint32_t r32() { return uint32_t(rng()); }
};

TEST_F(WireFormat, CtrlSegMatchesRdmaCoreBytes) {
  for (int i = 0; i < 1000; ++i) {
    const uint16_t pi = uint16_t(r32());
    const uint8_t opmod = uint8_t(r32()), fm = uint8_t(r32()), ds = uint8_t(r32() & 0x3f);
    const uint32_t qpn = r32() & 0xffffff, imm = r32();
    const auto op = WqeOpcode(uint8_t(r32()));
    WqeCtrlSeg ours;
    mlx5_wqe_ctrl_seg theirs;
    std::memset(&theirs, 0, sizeof theirs);
    set_ctrl_seg(&ours, pi, op, opmod, qpn, fm, ds, imm);
    mlx5dv_set_ctrl_seg(&theirs, pi, uint8_t(op), opmod, qpn, fm, ds, 0, htobe32(imm));
    ASSERT_EQ(0, std::memcmp(&ours, &theirs, 16));
    EXPECT_EQ(ours.opcode(), uint8_t(op));
    EXPECT_EQ(ours.opmod(), opmod);
    EXPECT_EQ(ours.wqe_index(), pi);
    EXPECT_EQ(ours.qpn(), qpn);
    EXPECT_EQ(ours.ds(), ds);
    EXPECT_EQ(ours.fm_ce_se, fm);
    EXPECT_EQ(ours.imm.get(), imm);
    uint64_t raw;
    std::memcpy(&raw, &theirs, 8);  // what mlx5 providers store to the BlueFlame register
    EXPECT_EQ(doorbell_word(ours), raw);
    const SegWords w = ctrl_words(pi, op, opmod, qpn, fm, ds, imm);
    uint64_t second;
    std::memcpy(&second, reinterpret_cast<const uint8_t*>(&theirs) + 8, 8);
    EXPECT_EQ(w.w0, raw);
    EXPECT_EQ(w.w1, second);
  }
}

TEST_F(WireFormat, DataRaddrAtomicSegsMatchRdmaCore) {
  for (int i = 0; i < 1000; ++i) {
    const uint32_t len = r32(), key = r32();
    const uint64_t addr = r64(), a = r64(), b = r64();
    WqeDataSeg d;
    mlx5_wqe_data_seg td;
    set_data_seg(&d, len, key, addr);
    mlx5dv_set_data_seg(&td, len, key, addr);
    ASSERT_EQ(0, std::memcmp(&d, &td, 16));
    EXPECT_EQ(d.byte_count.get(), len);
    EXPECT_EQ(d.lkey.get(), key);
    EXPECT_EQ(d.addr.get(), addr);

    WqeRaddrSeg r;
    mlx5_wqe_raddr_seg tr{htobe64(addr), htobe32(key), 0};
    set_raddr_seg(&r, addr, key);
    ASSERT_EQ(0, std::memcmp(&r, &tr, 16));
    EXPECT_EQ(r.raddr.get(), addr);
    EXPECT_EQ(r.rkey.get(), key);

    WqeAtomicSeg at;
    mlx5_wqe_atomic_seg tat{htobe64(a), htobe64(b)};
    set_atomic_seg(&at, a, b);
    ASSERT_EQ(0, std::memcmp(&at, &tat, 16));
    EXPECT_EQ(at.swap_add.get(), a);
    EXPECT_EQ(at.compare.get(), b);
  }
}

TEST_F(WireFormat, InlineAndMaskedAtomicSegs) {
  alignas(16) uint8_t buf[64] = {};
  auto* inl = reinterpret_cast<WqeInlineSeg*>(buf);
  EXPECT_EQ(set_inline_seg(inl, 12), 1u);  // 4-byte header + 12 bytes = one octoword
  EXPECT_EQ(set_inline_seg(inl, 13), 2u);
  EXPECT_EQ(be32toh(reinterpret_cast<mlx5_wqe_inl_data_seg*>(buf)->byte_count), 13u | MLX5_INLINE_SEG);

  WqeMaskedCs64Seg cs;
  cs.swap.set(1), cs.compare.set(2), cs.swap_mask.set(3), cs.compare_mask.set(4);
  const auto* words = reinterpret_cast<const uint64_t*>(&cs);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(be64toh(words[i]), uint64_t(i + 1));
  WqeMaskedFa32Seg fa;
  fa.add.set(0x11223344), fa.field_boundary.set(0x80008000);
  EXPECT_EQ(be32toh(reinterpret_cast<const uint32_t*>(&fa)[0]), 0x11223344u);
  EXPECT_EQ(be32toh(reinterpret_cast<const uint32_t*>(&fa)[1]), 0x80008000u);
  EXPECT_EQ(ext_atomic_opmod(4), 0x08);
  EXPECT_EQ(ext_atomic_opmod(8), 0x09);
  EXPECT_EQ(wqebbs_for_ds(1), 1u);
  EXPECT_EQ(wqebbs_for_ds(4), 1u);
  EXPECT_EQ(wqebbs_for_ds(5), 2u);
  EXPECT_EQ(wqebbs_for_ds(63), 16u);
}

TEST_F(WireFormat, CqeReadsRdmaCoreLayout) {
  for (int i = 0; i < 1000; ++i) {
    mlx5_cqe64 t;
    std::memset(&t, 0, sizeof t);
    const uint16_t wc = uint16_t(r32());
    const uint32_t qpn = r32() & 0xffffff, bc = r32(), imm = r32();
    const uint8_t op = uint8_t(r32() & 0xf), owner = uint8_t(r32() & 1);
    t.wqe_counter = htobe16(wc);
    t.sop_drop_qpn = htobe32(qpn);
    t.byte_cnt = htobe32(bc);
    t.imm_inval_pkey = htobe32(imm);
    t.op_own = uint8_t(op << 4) | owner;
    Cqe64 c;
    std::memcpy(&c, &t, 64);
    EXPECT_EQ(c.wqe_counter.get(), wc);
    EXPECT_EQ(c.qpn(), qpn);
    EXPECT_EQ(c.byte_cnt.get(), bc);
    EXPECT_EQ(c.imm_inval_pkey.get(), imm);
    EXPECT_EQ(c.opcode(), mlx5dv_get_cqe_opcode(&t));
    EXPECT_EQ(c.owner(), mlx5dv_get_cqe_owner(&t));

    mlx5_err_cqe te;
    std::memset(&te, 0, sizeof te);
    te.syndrome = uint8_t(r32()), te.vendor_err_synd = uint8_t(r32());
    te.s_wqe_opcode_qpn = htobe32(r32());
    ErrCqe64 e;
    std::memcpy(&e, &te, 64);
    EXPECT_EQ(e.syndrome, te.syndrome);
    EXPECT_EQ(e.vendor_err_synd, te.vendor_err_synd);
    EXPECT_EQ(e.s_wqe_opcode_qpn.get(), be32toh(te.s_wqe_opcode_qpn));
  }
}

TEST(Owner, FlipsEveryRingPass) {
  EXPECT_EQ(cqe_owner_for(0, 6), 0);
  EXPECT_EQ(cqe_owner_for(63, 6), 0);
  EXPECT_EQ(cqe_owner_for(64, 6), 1);
  EXPECT_EQ(cqe_owner_for(128, 6), 0);
}

}  // namespace
}  // namespace doorbell::mlx5
