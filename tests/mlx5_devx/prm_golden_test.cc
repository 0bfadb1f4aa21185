// Golden test of every PRM command the driver builds. The table below re-describes each
// field from the PRM (absolute bit offset in the command, width) without using layouts.h;
// a reader written here decodes the driver's bytes; every field must hold what the spec
// asked for, and no bit outside the table may be set.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hw/mlx5_devx/driver.h"

namespace doorbell::devx {
namespace {

struct Golden {
  const char* field;
  uint32_t off;  // bits from the start of the command, MSB-first
  uint32_t width;
  uint64_t want;
};

// MSB-first bit reader over a byte string (deliberately not prm::get).
uint64_t read_bits(const uint8_t* b, uint32_t off, uint32_t width) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < width; ++i) {
    const uint32_t bit = off + i;
    v = (v << 1) | ((b[bit / 8] >> (7 - bit % 8)) & 1);
  }
  return v;
}

template <size_t N>
void check(const std::array<uint8_t, N>& cmd, const std::vector<Golden>& table, const char* name) {
  std::vector<bool> covered(N * 8);
  for (const Golden& g : table) {
    EXPECT_EQ(read_bits(cmd.data(), g.off, g.width), g.want) << name << "." << g.field << " at bit 0x" << std::hex << g.off;
    for (uint32_t i = 0; i < g.width; ++i) covered[g.off + i] = true;
  }
  for (uint32_t bit = 0; bit < N * 8; ++bit)
    if (!covered[bit] && read_bits(cmd.data(), bit, 1)) ADD_FAILURE() << name << ": stray bit 0x" << std::hex << bit;
}

constexpr uint32_t kCqc = 0x80;    // cq_context within CREATE_CQ
constexpr uint32_t kQpc = 0xc0;    // qp_context within CREATE_QP / modify commands
constexpr uint32_t kAds = kQpc + 0xc0;  // primary_address_path within qpc

TEST(PrmGolden, CreateCq) {
  CqSpec s;
  s.log_size = 11;
  s.collapsed = true;
  s.buf_umem = 0x01234567;
  s.buf_offset = 0x1122334455667788ull;
  s.dbr_umem = 0x89abcdef;
  s.dbr_offset = 0x0102030405060708ull;
  s.uar_page = 0xabcdef;
  s.eqn = 0x5a;
  check(Driver::build_create_cq(s),
        {{"opcode", 0x00, 16, 0x400},
         {"cq_context.dbr_umem_valid", kCqc + 0x06, 1, 1},
         {"cq_context.cqe_sz", kCqc + 0x08, 3, 0},
         {"cq_context.cc", kCqc + 0x0b, 1, 1},
         {"cq_context.oi", kCqc + 0x0e, 1, 1},  // overrun ignore: nobody advances a collapsed CQ's ci
         {"cq_context.dbr_umem_id", kCqc + 0x20, 32, 0x89abcdef},
         {"cq_context.log_cq_size", kCqc + 0x63, 5, 11},
         {"cq_context.uar_page", kCqc + 0x68, 24, 0xabcdef},
         {"cq_context.c_eqn", kCqc + 0xb8, 8, 0x5a},
         {"cq_context.dbr_addr", kCqc + 0x1c0, 64, 0x0102030405060708ull},
         {"cq_umem_offset", 0x280, 64, 0x1122334455667788ull},
         {"cq_umem_id", 0x2c0, 32, 0x01234567},
         {"cq_umem_valid", 0x2e0, 1, 1}},
        "CREATE_CQ");
  s.collapsed = false;
  EXPECT_EQ(read_bits(Driver::build_create_cq(s).data(), kCqc + 0x0b, 1), 0u);
}

TEST(PrmGolden, CreateRcQpWithZeroSizeRqAndWithSrq) {
  RcQpSpec s;
  s.pdn = 0x345678;
  s.log_sq_size = 13;
  s.wq_umem = 0x11112222;
  s.wq_offset = 0x3333444455556666ull;
  s.dbr_umem = 0x77778888;
  s.dbr_offset = 0x0000000099990040ull;
  s.send_cqn = 0x0abcde;
  s.uar_page = 0x123456;
  std::vector<Golden> common = {{"opcode", 0x00, 16, 0x500},
                                {"qpc.st", kQpc + 0x08, 8, 0},
                                {"qpc.pm_state", kQpc + 0x13, 2, 3},
                                {"qpc.pd", kQpc + 0x28, 24, 0x345678},
                                {"qpc.log_sq_size", kQpc + 0x51, 4, 13},
                                {"qpc.uar_page", kQpc + 0x68, 24, 0x123456},
                                {"qpc.cqn_snd", kQpc + 0x3e8, 24, 0x0abcde},
                                {"qpc.dbr_addr", kQpc + 0x500, 64, 0x99990040},
                                {"qpc.dbr_umem_valid", kQpc + 0x683, 1, 1},
                                {"qpc.dbr_umem_id", kQpc + 0x720, 32, 0x77778888},
                                {"wq_umem_offset", 0x800, 64, 0x3333444455556666ull},
                                {"wq_umem_id", 0x840, 32, 0x11112222},
                                {"wq_umem_valid", 0x860, 1, 1}};
  std::vector<Golden> zero_rq = common;
  zero_rq.push_back({"qpc.rq_type", kQpc + 0x565, 3, 3});
  check(Driver::build_create_rc_qp(s), zero_rq, "CREATE_QP");

  s.srqn = 0x00f00d;
  s.recv_cqn = 0x00beef;
  std::vector<Golden> with_srq = common;
  with_srq.push_back({"qpc.rq_type", kQpc + 0x565, 3, 1});
  with_srq.push_back({"qpc.srqn_rmpn_xrqn", kQpc + 0x568, 24, 0x00f00d});
  with_srq.push_back({"qpc.cqn_rcv", kQpc + 0x4e8, 24, 0x00beef});
  check(Driver::build_create_rc_qp(s), with_srq, "CREATE_QP(srq)");

  s.dci = true;  // a DC initiator: st 0x5, the rest as RC's
  std::vector<Golden> dci = with_srq;
  dci[1] = {"qpc.st", kQpc + 0x08, 8, 5};
  check(Driver::build_create_rc_qp(s), dci, "CREATE_QP(dci)");
}

// CREATE_DCT (opcode 0x710): the dctc at bit 0x80 (the kernel's mlx5_ifc_dctc_bits).
TEST(PrmGolden, CreateDct) {
  constexpr uint32_t kDctc = 0x80;
  DctSpec s;
  s.pdn = 0x345678;
  s.cqn = 0x0abcde;
  s.srqn = 0x00f00d;
  s.dc_key = 0x5623ceafull;
  s.atomic_mode = 3;
  s.port = 1;
  s.mtu = 5;
  s.min_rnr_nak = 12;
  check(Driver::build_create_dct(s),
        {{"opcode", 0x00, 16, 0x710},
         {"dctc.cqn", kDctc + 0x48, 24, 0x0abcde},
         {"dctc.atomic_mode", kDctc + 0x68, 4, 3},
         {"dctc.rre", kDctc + 0x6c, 1, 1},
         {"dctc.rwe", kDctc + 0x6d, 1, 1},
         {"dctc.rae", kDctc + 0x6e, 1, 1},
         {"dctc.min_rnr_nak", kDctc + 0x93, 5, 12},
         {"dctc.srqn_xrqn", kDctc + 0xa8, 24, 0x00f00d},
         {"dctc.pd", kDctc + 0xc8, 24, 0x345678},
         {"dctc.dc_access_key", kDctc + 0x100, 64, 0x5623ceafull},
         {"dctc.mtu", kDctc + 0x145, 3, 5},
         {"dctc.port", kDctc + 0x148, 8, 1}},
        "CREATE_DCT");
}

TEST(PrmGolden, Rst2Init) {
  InitSpec s;
  s.port = 2;
  s.pkey_index = 0xbeef;
  s.remote_read = false;
  check(Driver::build_rst2init(0x123456, s),
        {{"opcode", 0x00, 16, 0x502},
         {"qpn", 0x48, 24, 0x123456},
         {"qpc.pm_state", kQpc + 0x13, 2, 3},
         {"ads.pkey_index", kAds + 0x10, 16, 0xbeef},
         {"ads.vhca_port_num", kAds + 0x128, 8, 2},
         {"qpc.atomic_mode", kQpc + 0x48c, 4, 3},  // extended atomics up to 8 bytes, as NVSHMEM sets
         {"qpc.rre", kQpc + 0x490, 1, 0},
         {"qpc.rwe", kQpc + 0x491, 1, 1},
         {"qpc.rae", kQpc + 0x492, 1, 1}},
        "RST2INIT_QP");
}

TEST(PrmGolden, Init2RtrByLidAndByGid) {
  RtrSpec s;
  s.remote_qpn = 0xfedcba;
  s.port = 1;
  s.mtu = 4;
  s.dlid = 0x4321;
  s.rq_psn = 0x0a0b0c;
  s.min_rnr_nak = 17;
  s.log_rra_max = 5;
  std::vector<Golden> common = {{"opcode", 0x00, 16, 0x503},
                                {"qpn", 0x48, 24, 0x000777},
                                {"qpc.mtu", kQpc + 0x40, 3, 4},
                                {"qpc.log_msg_max", kQpc + 0x43, 5, 30},
                                {"qpc.remote_qpn", kQpc + 0xa8, 24, 0xfedcba},
                                {"ads.vhca_port_num", kAds + 0x128, 8, 1},
                                {"qpc.log_rra_max", kQpc + 0x488, 3, 5},
                                {"qpc.min_rnr_nak", kQpc + 0x4a3, 5, 17},
                                {"qpc.next_rcv_psn", kQpc + 0x4a8, 24, 0x0a0b0c}};
  std::vector<Golden> lid = common;
  lid.push_back({"ads.rlid", kAds + 0x30, 16, 0x4321});
  check(Driver::build_init2rtr(0x777, s), lid, "INIT2RTR_QP(lid)");

  s.use_gid = true;
  s.sgid_index = 3;
  s.hop_limit = 0x40;
  for (int i = 0; i < 16; ++i) s.dgid[size_t(i)] = uint8_t(0xf0 + i);
  std::vector<Golden> gid = common;
  gid.push_back({"ads.grh", kAds + 0x28, 1, 1});
  gid.push_back({"ads.src_addr_index", kAds + 0x48, 8, 3});
  gid.push_back({"ads.hop_limit", kAds + 0x58, 8, 0x40});
  gid.push_back({"ads.rgid_rip[0..8)", kAds + 0x80, 64, 0xf0f1f2f3f4f5f6f7ull});
  gid.push_back({"ads.rgid_rip[8..16)", kAds + 0xc0, 64, 0xf8f9fafbfcfdfeffull});
  check(Driver::build_init2rtr(0x777, s), gid, "INIT2RTR_QP(gid)");
}

TEST(PrmGolden, Rtr2Rts) {
  RtsSpec s;
  s.ack_timeout = 19;
  s.retry_count = 6;
  s.rnr_retry = 5;
  s.sq_psn = 0x00abcd;
  s.log_sra_max = 3;
  check(Driver::build_rtr2rts(0x42, s),
        {{"opcode", 0x00, 16, 0x504},
         {"qpn", 0x48, 24, 0x42},
         {"ads.ack_timeout", kAds + 0x40, 5, 19},
         {"qpc.log_sra_max", kQpc + 0x388, 3, 3},
         {"qpc.retry_count", kQpc + 0x38d, 3, 6},
         {"qpc.rnr_retry", kQpc + 0x390, 3, 5},
         {"qpc.next_send_psn", kQpc + 0x3c8, 24, 0x00abcd}},
        "RTR2RTS_QP");
}

TEST(PrmGolden, ObjectByNumberCommands) {
  for (auto [op, name] : {std::pair{0x507, "2ERR_QP"}, {0x50a, "2RST_QP"}, {0x501, "DESTROY_QP"}, {0x50b, "QUERY_QP"}})
    check(Driver::build_qp_cmd(uint16_t(op), 0xabcdef), {{"opcode", 0x00, 16, uint64_t(op)}, {"qpn", 0x48, 24, 0xabcdef}}, name);
  for (auto [op, name] : {std::pair{0x401, "DESTROY_CQ"}, {0x402, "QUERY_CQ"}})
    check(Driver::build_cq_cmd(uint16_t(op), 0x000401), {{"opcode", 0x00, 16, uint64_t(op)}, {"cqn", 0x48, 24, 0x401}}, name);
}

TEST(PrmGoldenDeathTest, ValueThatDoesNotFitItsFieldStops) {
  RcQpSpec s;
  s.log_sq_size = 16;  // a 4-bit field
  EXPECT_DEATH(Driver::build_create_rc_qp(s), "does not fit create_qp_in.qp_context.log_sq_size \\(4 bits\\)");
}

}  // namespace
}  // namespace doorbell::devx
