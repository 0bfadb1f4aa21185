// The mlx5 DEVX driver: builds PRM commands for collapsed CQs, RC QPs and their state
// transitions, runs them through a DevxContext (rdma-core or the NIC model: one code path),
// and maps a rejected command to an error in one place, naming opcode, op_mod, status and
// syndrome. The builders are public so tests can decode exactly what is sent.
#pragma once

#include <array>
#include <cstdint>

#include "hw/mlx5/prm/layouts.h"
#include "hw/mlx5_devx/devx_context.h"

namespace doorbell::devx {

struct CqSpec {
  uint32_t log_size = 6;
  bool collapsed = true;  // IBGDA send CQs: every CQE in slot 0
  uint32_t buf_umem = 0;
  uint64_t buf_offset = 0;
  uint32_t dbr_umem = 0;
  uint64_t dbr_offset = 0;
  uint32_t uar_page = 0;
  uint32_t eqn = 0;
  // cqc.oi: the device never checks the consumer index. A collapsed CQ whose consumer index
  // nobody advances needs it, or it overruns after 2^log_size CQEs and its QPs go fatal.
  bool overrun_ignore = true;
};

struct RcQpSpec {
  uint32_t pdn = 0;
  uint32_t log_sq_size = 6;   // WQEBBs
  uint32_t wq_umem = 0;
  uint64_t wq_offset = 0;
  uint32_t dbr_umem = 0;
  uint64_t dbr_offset = 0;
  uint32_t send_cqn = 0;
  uint32_t recv_cqn = 0;      // with an SRQ
  uint32_t srqn = 0;          // 0: zero-size receive queue
  uint32_t uar_page = 0;
  bool dci = false;           // a DC initiator (st DCI): each WQE names its DCT in an address vector
};

// A DC target (CREATE_DCT): active once created; answers DCIs whose AV carries dc_key.
struct DctSpec {
  uint32_t pdn = 0;
  uint32_t cqn = 0;           // receive completions
  uint32_t srqn = 0;          // receives (a DCT always takes them from an SRQ)
  uint64_t dc_key = 0;
  bool remote_write = true, remote_read = true, remote_atomic = true;
  uint8_t atomic_mode = 3;
  uint8_t port = 1;
  uint8_t mtu = 5;
  uint8_t min_rnr_nak = 12;
};

struct InitSpec {
  uint8_t port = 1;
  uint16_t pkey_index = 0;
  bool remote_write = true, remote_read = true, remote_atomic = true;
  uint8_t atomic_mode = 3;  // qpc.atomic_mode: 3 = extended atomics up to 8 bytes (as NVSHMEM sets)
};

struct RtrSpec {
  uint32_t remote_qpn = 0;
  uint8_t port = 1;
  uint8_t mtu = 5;              // IB MTU enum (5 = 4096)
  bool use_gid = false;         // RoCE / global routing: address by GID
  uint16_t dlid = 0;
  std::array<uint8_t, 16> dgid{};
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint32_t rq_psn = 0;
  uint8_t min_rnr_nak = 12;
  uint8_t log_rra_max = 4;      // responder resources for READ / atomics
};

struct RtsSpec {
  uint8_t ack_timeout = 14;     // 4.096 us * 2^timeout
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
  uint32_t sq_psn = 0;
  uint8_t log_sra_max = 4;      // outstanding READ / atomics as initiator
};

// What recovery reads back from a QP (QUERY_QP).
struct QpQuery {
  prm::QpcState state{};
  uint32_t next_rcv_psn = 0;           // responder: the PSN it expects next (24 bits)
  uint32_t remote_qpn = 0;             // the QP it is connected to
  uint16_t hw_sq_wqebb_counter = 0;    // the device's send queue position
  uint16_t sw_sq_wqebb_counter = 0;    // the doorbell record's
};

class Driver {
 public:
  explicit Driver(DevxContext& ctx) : ctx_(ctx) {}

  Result<Obj> create_cq(const CqSpec& s);
  Result<Obj> create_rc_qp(const RcQpSpec& s);
  Status rst2init(const Obj& qp, const InitSpec& s);
  Status init2rtr(const Obj& qp, const RtrSpec& s);
  Status rtr2rts(const Obj& qp, const RtsSpec& s);
  Status to_error(const Obj& qp);
  Status to_reset(const Obj& qp);
  Result<prm::QpcState> query_qp_state(const Obj& qp);
  Result<QpQuery> query_qp(const Obj& qp);
  Status destroy_qp(const Obj& qp);
  Status destroy_cq(const Obj& cq);
  Result<Obj> create_dct(const DctSpec& s);
  Status destroy_dct(const Obj& dct);

  static prm::Buf<prm::create_cq_in> build_create_cq(const CqSpec& s);
  static prm::Buf<prm::create_qp_in> build_create_rc_qp(const RcQpSpec& s);
  static prm::Buf<prm::modify_qp_in> build_rst2init(uint32_t qpn, const InitSpec& s);
  static prm::Buf<prm::modify_qp_in> build_init2rtr(uint32_t qpn, const RtrSpec& s);
  static prm::Buf<prm::modify_qp_in> build_rtr2rts(uint32_t qpn, const RtsSpec& s);
  static prm::Buf<prm::qp_by_number_in> build_qp_cmd(uint16_t opcode, uint32_t qpn);
  static prm::Buf<prm::cq_by_number_in> build_cq_cmd(uint16_t opcode, uint32_t cqn);
  static prm::Buf<prm::create_dct_in> build_create_dct(const DctSpec& s);

 private:
  DevxContext& ctx_;
};

}  // namespace doorbell::devx
