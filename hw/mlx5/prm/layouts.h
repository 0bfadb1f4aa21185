// PRM command layouts the DEVX driver builds and the NIC model decodes: CQ, RC / DCI QP and
// DCT creation, the QP state transitions, query and destroy. Facts from the mlx5 PRM as the
// kernel's and DOCA's mlx5_ifc headers publish them; declared here once, one u8 per bit.
// tests/mlx5_devx/prm_golden_test.cc re-describes every field from the PRM independently.
#pragma once

#include <cstdint>

#include "hw/mlx5/prm/bits.h"

namespace doorbell::prm {

enum Opcode : uint16_t {
  kCreateCq = 0x400,
  kDestroyCq = 0x401,
  kQueryCq = 0x402,
  kCreateQp = 0x500,
  kDestroyQp = 0x501,
  kRst2InitQp = 0x502,
  kInit2RtrQp = 0x503,
  kRtr2RtsQp = 0x504,
  kRts2RtsQp = 0x505,
  kQp2Err = 0x507,
  kQp2Rst = 0x50a,
  kQueryQp = 0x50b,
  kCreateDct = 0x710,
  kDestroyDct = 0x711,
};
const char* opcode_name(uint16_t op);

enum CmdStatus : uint8_t {
  kStatOk = 0x0,
  kStatInternal = 0x1,
  kStatBadOp = 0x2,
  kStatBadParam = 0x3,
  kStatBadSysState = 0x4,
  kStatBadRes = 0x5,
  kStatResBusy = 0x6,
  kStatLimit = 0x8,
  kStatBadResState = 0x9,
  kStatBadIndex = 0xa,
  kStatNoResources = 0xf,
  kStatBadQpState = 0x10,
  kStatBadPacket = 0x30,
  kStatBadSizeOutsCqes = 0x40,
  kStatBadInputLen = 0x50,
  kStatBadOutputLen = 0x51,
};
const char* status_name(uint8_t status);

// QP states as qpc.state encodes them.
enum QpcState : uint8_t { kQpcRst = 0, kQpcInit = 1, kQpcRtr = 2, kQpcRts = 3, kQpcSqer = 4, kQpcSqd = 5, kQpcErr = 6 };
enum : uint8_t { kQpcStRc = 0x0, kQpcStDci = 0x5, kQpcPmMigrated = 0x3 };
enum : uint8_t { kRqTypeRegular = 0x0, kRqTypeSrq = 0x1, kRqTypeZeroSize = 0x3 };

// Every command starts with this header; every reply with status + syndrome.
struct mbox_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x40];
};
struct mbox_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x40];
};

// ---- completion queues ----
struct cqc {
  u8 status[0x4];
  u8 as_notify[0x1];
  u8 initiator_src_dct[0x1];
  u8 dbr_umem_valid[0x1];
  u8 reserved_at_7[0x1];
  u8 cqe_sz[0x3];
  u8 cc[0x1];  // collapsed: every CQE in slot 0
  u8 reserved_at_c[0x1];
  u8 scqe_break_moderation_en[0x1];
  u8 oi[0x1];
  u8 cq_period_mode[0x2];
  u8 cqe_comp_en[0x1];
  u8 mini_cqe_res_format[0x2];
  u8 st[0x4];
  u8 reserved_at_18[0x1];
  u8 cqe_comp_layout[0x7];

  u8 dbr_umem_id[0x20];

  u8 reserved_at_40[0x14];
  u8 page_offset[0x6];
  u8 reserved_at_5a[0x2];
  u8 mini_cqe_res_format_ext[0x2];
  u8 cq_timestamp_format[0x2];

  u8 reserved_at_60[0x3];
  u8 log_cq_size[0x5];
  u8 uar_page[0x18];

  u8 reserved_at_80[0x4];
  u8 cq_period[0xc];
  u8 cq_max_count[0x10];

  u8 reserved_at_a0[0x18];
  u8 c_eqn[0x8];

  u8 reserved_at_c0[0x3];
  u8 log_page_size[0x5];
  u8 reserved_at_c8[0x18];

  u8 reserved_at_e0[0x20];

  u8 reserved_at_100[0x8];
  u8 last_notified_index[0x18];
  u8 reserved_at_120[0x8];
  u8 last_solicit_index[0x18];
  u8 reserved_at_140[0x8];
  u8 consumer_counter[0x18];
  u8 reserved_at_160[0x8];
  u8 producer_counter[0x18];

  u8 local_partition_id[0xc];
  u8 process_id[0x14];
  u8 reserved_at_1a0[0x20];

  u8 dbr_addr[0x40];  // with dbr_umem_valid: offset into the DBR umem
};

struct create_cq_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x40];
  cqc cq_context;
  u8 cq_umem_offset[0x40];
  u8 cq_umem_id[0x20];
  u8 cq_umem_valid[0x1];
  u8 reserved_at_2e1[0x1f];
  u8 reserved_at_300[0x580];
};
struct create_cq_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x8];
  u8 cqn[0x18];
  u8 reserved_at_60[0x20];
};

// DESTROY_CQ / QUERY_CQ name the CQ the same way.
struct cq_by_number_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x8];
  u8 cqn[0x18];
  u8 reserved_at_60[0x20];
};
using destroy_cq_in = cq_by_number_in;
using query_cq_in = cq_by_number_in;
struct query_cq_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x40];
  cqc cq_context;
  u8 reserved_at_280[0x600];
};

// ---- queue pairs ----
struct ads {  // address path
  u8 fl[0x1];
  u8 free_ar[0x1];
  u8 reserved_at_2[0xe];
  u8 pkey_index[0x10];

  u8 reserved_at_20[0x8];
  u8 grh[0x1];
  u8 mlid[0x7];
  u8 rlid[0x10];

  u8 ack_timeout[0x5];
  u8 reserved_at_45[0x3];
  u8 src_addr_index[0x8];
  u8 reserved_at_50[0x4];
  u8 stat_rate[0x4];
  u8 hop_limit[0x8];

  u8 reserved_at_60[0x4];
  u8 tclass[0x8];
  u8 flow_label[0x14];

  u8 rgid_rip[0x80];

  u8 reserved_at_100[0x4];
  u8 f_dscp[0x1];
  u8 f_ecn[0x1];
  u8 reserved_at_106[0x1];
  u8 f_eth_prio[0x1];
  u8 ecn[0x2];
  u8 dscp[0x6];
  u8 udp_sport[0x10];

  u8 dei_cfi[0x1];
  u8 eth_prio[0x3];
  u8 sl[0x4];
  u8 vhca_port_num[0x8];
  u8 rmac_47_32[0x10];

  u8 rmac_31_0[0x20];
};

struct qpc {
  u8 state[0x4];
  u8 lag_tx_port_affinity[0x4];
  u8 st[0x8];
  u8 reserved_at_10[0x2];
  u8 isolate_vl_tc[0x1];
  u8 pm_state[0x2];
  u8 reserved_at_15[0x1];
  u8 req_e2e_credit_mode[0x2];
  u8 offload_type[0x4];
  u8 end_padding_mode[0x2];
  u8 reserved_at_1e[0x2];

  u8 wq_signature[0x1];
  u8 block_lb_mc[0x1];
  u8 atomic_like_write_en[0x1];
  u8 latency_sensitive[0x1];
  u8 reserved_at_24[0x1];
  u8 drain_sigerr[0x1];
  u8 reserved_at_26[0x2];
  u8 pd[0x18];

  u8 mtu[0x3];
  u8 log_msg_max[0x5];
  u8 reserved_at_48[0x1];
  u8 log_rq_size[0x4];
  u8 log_rq_stride[0x3];
  u8 no_sq[0x1];
  u8 log_sq_size[0x4];
  u8 reserved_at_55[0x3];
  u8 ts_format[0x2];
  u8 data_in_order[0x1];
  u8 rlky[0x1];
  u8 ulp_stateless_offload_mode[0x4];

  u8 counter_set_id[0x8];
  u8 uar_page[0x18];

  u8 send_dbr_mode[0x2];
  u8 reserved_at_82[0x6];
  u8 user_index[0x18];

  u8 reserved_at_a0[0x3];
  u8 log_page_size[0x5];
  u8 remote_qpn[0x18];

  ads primary_address_path;
  ads secondary_address_path;

  u8 log_ack_req_freq[0x4];
  u8 reserved_at_384[0x4];
  u8 log_sra_max[0x3];
  u8 reserved_at_38b[0x2];
  u8 retry_count[0x3];
  u8 rnr_retry[0x3];
  u8 reserved_at_393[0x1];
  u8 fre[0x1];
  u8 cur_rnr_retry[0x3];
  u8 cur_retry_count[0x3];
  u8 reserved_at_39b[0x5];

  u8 reserved_at_3a0[0x20];

  u8 reserved_at_3c0[0x8];
  u8 next_send_psn[0x18];
  u8 reserved_at_3e0[0x8];
  u8 cqn_snd[0x18];
  u8 reserved_at_400[0x8];
  u8 deth_sqpn[0x18];
  u8 reserved_at_420[0x20];
  u8 reserved_at_440[0x8];
  u8 last_acked_psn[0x18];
  u8 reserved_at_460[0x8];
  u8 ssn[0x18];

  u8 reserved_at_480[0x8];
  u8 log_rra_max[0x3];
  u8 reserved_at_48b[0x1];
  u8 atomic_mode[0x4];
  u8 rre[0x1];
  u8 rwe[0x1];
  u8 rae[0x1];
  u8 reserved_at_493[0x1];
  u8 page_offset[0x6];
  u8 reserved_at_49a[0x3];
  u8 cd_slave_receive[0x1];
  u8 cd_slave_send[0x1];
  u8 cd_master[0x1];

  u8 reserved_at_4a0[0x3];
  u8 min_rnr_nak[0x5];
  u8 next_rcv_psn[0x18];
  u8 reserved_at_4c0[0x8];
  u8 xrcd[0x18];
  u8 reserved_at_4e0[0x8];
  u8 cqn_rcv[0x18];

  u8 dbr_addr[0x40];  // with dbr_umem_valid: offset into the DBR umem

  u8 q_key[0x20];

  u8 reserved_at_560[0x5];
  u8 rq_type[0x3];
  u8 srqn_rmpn_xrqn[0x18];
  u8 reserved_at_580[0x8];
  u8 rmsn[0x18];

  u8 hw_sq_wqebb_counter[0x10];
  u8 sw_sq_wqebb_counter[0x10];
  u8 hw_rq_counter[0x20];
  u8 sw_rq_counter[0x20];
  u8 reserved_at_600[0x20];

  u8 reserved_at_620[0xf];
  u8 cgs[0x1];
  u8 cs_req[0x8];
  u8 cs_res[0x8];

  u8 dc_access_key[0x40];

  u8 reserved_at_680[0x3];
  u8 dbr_umem_valid[0x1];
  u8 reserved_at_684[0x9c];
  u8 dbr_umem_id[0x20];
};

struct create_qp_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x40];
  u8 opt_param_mask[0x20];
  u8 reserved_at_a0[0x20];
  qpc qp_context;
  u8 wq_umem_offset[0x40];
  u8 wq_umem_id[0x20];
  u8 wq_umem_valid[0x1];
  u8 reserved_at_861[0x1f];
};
struct create_qp_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x8];
  u8 qpn[0x18];
  u8 reserved_at_60[0x20];
};

// RST2INIT, INIT2RTR, RTR2RTS (and RTS2RTS) share one layout.
struct modify_qp_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x8];
  u8 qpn[0x18];
  u8 reserved_at_60[0x20];
  u8 opt_param_mask[0x20];
  u8 reserved_at_a0[0x20];
  qpc qp_context;
  u8 reserved_at_800[0x80];
};
using modify_qp_out = mbox_out;

// 2ERR, 2RST, DESTROY_QP and QUERY_QP name the QP the same way.
struct qp_by_number_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x8];
  u8 qpn[0x18];
  u8 reserved_at_60[0x20];
};
using qp_2err_in = qp_by_number_in;
using qp_2rst_in = qp_by_number_in;
using destroy_qp_in = qp_by_number_in;
using query_qp_in = qp_by_number_in;
struct query_qp_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x40];
  u8 opt_param_mask[0x20];
  u8 reserved_at_a0[0x20];
  qpc qp_context;
  u8 reserved_at_800[0x80];
  u8 pas[0x40];
};

// ---- DC targets ----
// A DCT's context: active once created (state 0), it takes requests from any DCI whose
// address vector carries dc_access_key; violations are counted and raise
// DCT_KEY_VIOLATION (event 0x1d) when armed.
struct dctc {
  u8 reserved_at_0[0x4];
  u8 state[0x4];
  u8 reserved_at_8[0x18];
  u8 reserved_at_20[0x8];
  u8 user_index[0x18];
  u8 reserved_at_40[0x8];
  u8 cqn[0x18];
  u8 counter_set_id[0x8];
  u8 atomic_mode[0x4];
  u8 rre[0x1];
  u8 rwe[0x1];
  u8 rae[0x1];
  u8 atomic_like_write_en[0x1];
  u8 latency_sensitive[0x1];
  u8 rlky[0x1];
  u8 free_ar[0x1];
  u8 reserved_at_73[0xd];
  u8 reserved_at_80[0x8];
  u8 cs_res[0x8];
  u8 reserved_at_90[0x3];
  u8 min_rnr_nak[0x5];
  u8 reserved_at_98[0x8];
  u8 reserved_at_a0[0x8];
  u8 srqn_xrqn[0x18];
  u8 reserved_at_c0[0x8];
  u8 pd[0x18];
  u8 tclass[0x8];
  u8 reserved_at_e8[0x4];
  u8 flow_label[0x14];
  u8 dc_access_key[0x40];
  u8 reserved_at_140[0x5];
  u8 mtu[0x3];
  u8 port[0x8];
  u8 pkey_index[0x10];
  u8 reserved_at_160[0x8];
  u8 my_addr_index[0x8];
  u8 reserved_at_170[0x8];
  u8 hop_limit[0x8];
  u8 dc_access_key_violation_count[0x20];
  u8 reserved_at_1a0[0x14];
  u8 dei_cfi[0x1];
  u8 eth_prio[0x3];
  u8 ecn[0x2];
  u8 dscp[0x6];
  u8 reserved_at_1c0[0x40];
};
struct create_dct_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x40];
  dctc dct_context_entry;
  u8 reserved_at_280[0x180];
};
struct create_dct_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x8];
  u8 dctn[0x18];
  u8 reserved_at_60[0x20];
};
// DESTROY_DCT (and DRAIN_DCT, QUERY_DCT) name the DCT the same way.
struct dct_by_number_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x8];
  u8 dctn[0x18];
  u8 reserved_at_60[0x20];
};
using destroy_dct_in = dct_by_number_in;

static_assert(sizeof(mbox_in) == 0x80 && sizeof(mbox_out) == 0x80);
static_assert(sizeof(dctc) == 0x200 && offsetof(dctc, dc_access_key) == 0x100 && offsetof(dctc, pd) == 0xc8);
static_assert(sizeof(create_dct_in) == 0x400 && offsetof(create_dct_in, dct_context_entry) == 0x80);
static_assert(sizeof(create_dct_out) == 0x80 && sizeof(dct_by_number_in) == 0x80);
static_assert(sizeof(cqc) == 0x200 && offsetof(cqc, dbr_addr) == 0x1c0);
static_assert(sizeof(create_cq_in) == 0x880 && offsetof(create_cq_in, cq_umem_offset) == 0x280);
static_assert(sizeof(create_cq_out) == 0x80 && sizeof(cq_by_number_in) == 0x80);
static_assert(sizeof(ads) == 0x160 && offsetof(ads, rgid_rip) == 0x80);
static_assert(sizeof(qpc) == 0x740 && offsetof(qpc, primary_address_path) == 0xc0);
static_assert(offsetof(qpc, log_ack_req_freq) == 0x380 && offsetof(qpc, dbr_umem_id) == 0x720);
static_assert(sizeof(create_qp_in) == 0x880 && offsetof(create_qp_in, wq_umem_offset) == 0x800);
static_assert(sizeof(modify_qp_in) == 0x880 && offsetof(modify_qp_in, qp_context) == 0xc0);
static_assert(sizeof(query_qp_out) == 0x8c0);

// Commands by name: opcode, layouts and a printable name in one place.
struct CreateCq {
  using In = create_cq_in;
  using Out = create_cq_out;
  static constexpr uint16_t kOpcode = kCreateCq;
};
struct DestroyCq {
  using In = destroy_cq_in;
  using Out = mbox_out;
  static constexpr uint16_t kOpcode = kDestroyCq;
};
struct QueryCq {
  using In = query_cq_in;
  using Out = query_cq_out;
  static constexpr uint16_t kOpcode = kQueryCq;
};
struct CreateQp {
  using In = create_qp_in;
  using Out = create_qp_out;
  static constexpr uint16_t kOpcode = kCreateQp;
};
struct DestroyQp {
  using In = destroy_qp_in;
  using Out = mbox_out;
  static constexpr uint16_t kOpcode = kDestroyQp;
};
struct CreateDct {
  using In = create_dct_in;
  using Out = create_dct_out;
  static constexpr uint16_t kOpcode = kCreateDct;
};
struct DestroyDct {
  using In = destroy_dct_in;
  using Out = mbox_out;
  static constexpr uint16_t kOpcode = kDestroyDct;
};
struct Rst2Init {
  using In = modify_qp_in;
  using Out = modify_qp_out;
  static constexpr uint16_t kOpcode = kRst2InitQp;
};
struct Init2Rtr {
  using In = modify_qp_in;
  using Out = modify_qp_out;
  static constexpr uint16_t kOpcode = kInit2RtrQp;
};
struct Rtr2Rts {
  using In = modify_qp_in;
  using Out = modify_qp_out;
  static constexpr uint16_t kOpcode = kRtr2RtsQp;
};
struct Qp2Err {
  using In = qp_2err_in;
  using Out = mbox_out;
  static constexpr uint16_t kOpcode = kQp2Err;
};
struct Qp2Rst {
  using In = qp_2rst_in;
  using Out = mbox_out;
  static constexpr uint16_t kOpcode = kQp2Rst;
};
struct QueryQp {
  using In = query_qp_in;
  using Out = query_qp_out;
  static constexpr uint16_t kOpcode = kQueryQp;
};

}  // namespace doorbell::prm
