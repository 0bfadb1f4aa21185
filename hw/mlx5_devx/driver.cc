#include "hw/mlx5_devx/driver.h"

#include "hw/mlx5_devx/command_status.h"

namespace doorbell::devx {

using namespace prm;

namespace {
void header(void* b, uint16_t opcode) { DB_SET(mbox_in, b, opcode, opcode); }
}  // namespace

// ---- builders ----

Buf<create_cq_in> Driver::build_create_cq(const CqSpec& s) {
  Buf<create_cq_in> b{};
  header(b.data(), kCreateCq);
  void* p = b.data();
  DB_SET(create_cq_in, p, cq_context.cqe_sz, 0);  // 64-byte CQEs
  DB_SET(create_cq_in, p, cq_context.cc, s.collapsed ? 1 : 0);
  DB_SET(create_cq_in, p, cq_context.oi, s.overrun_ignore ? 1 : 0);
  DB_SET(create_cq_in, p, cq_context.log_cq_size, s.log_size);
  DB_SET(create_cq_in, p, cq_context.uar_page, s.uar_page);
  DB_SET(create_cq_in, p, cq_context.c_eqn, s.eqn);
  DB_SET(create_cq_in, p, cq_context.dbr_umem_valid, 1);
  DB_SET(create_cq_in, p, cq_context.dbr_umem_id, s.dbr_umem);
  DB_SET(create_cq_in, p, cq_context.dbr_addr, s.dbr_offset);
  DB_SET(create_cq_in, p, cq_umem_valid, 1);
  DB_SET(create_cq_in, p, cq_umem_id, s.buf_umem);
  DB_SET(create_cq_in, p, cq_umem_offset, s.buf_offset);
  return b;
}

Buf<create_qp_in> Driver::build_create_rc_qp(const RcQpSpec& s) {
  Buf<create_qp_in> b{};
  header(b.data(), kCreateQp);
  void* p = b.data();
  DB_SET(create_qp_in, p, qp_context.st, s.dci ? kQpcStDci : kQpcStRc);
  DB_SET(create_qp_in, p, qp_context.pm_state, kQpcPmMigrated);
  DB_SET(create_qp_in, p, qp_context.pd, s.pdn);
  DB_SET(create_qp_in, p, qp_context.uar_page, s.uar_page);
  DB_SET(create_qp_in, p, qp_context.log_sq_size, s.log_sq_size);
  DB_SET(create_qp_in, p, qp_context.no_sq, 0);
  DB_SET(create_qp_in, p, qp_context.cqn_snd, s.send_cqn);
  if (s.srqn != 0) {
    DB_SET(create_qp_in, p, qp_context.rq_type, kRqTypeSrq);
    DB_SET(create_qp_in, p, qp_context.srqn_rmpn_xrqn, s.srqn);
    DB_SET(create_qp_in, p, qp_context.cqn_rcv, s.recv_cqn);
  } else {
    DB_SET(create_qp_in, p, qp_context.rq_type, kRqTypeZeroSize);
  }
  DB_SET(create_qp_in, p, qp_context.dbr_umem_valid, 1);
  DB_SET(create_qp_in, p, qp_context.dbr_umem_id, s.dbr_umem);
  DB_SET(create_qp_in, p, qp_context.dbr_addr, s.dbr_offset);
  DB_SET(create_qp_in, p, wq_umem_valid, 1);
  DB_SET(create_qp_in, p, wq_umem_id, s.wq_umem);
  DB_SET(create_qp_in, p, wq_umem_offset, s.wq_offset);
  return b;
}

Buf<modify_qp_in> Driver::build_rst2init(uint32_t qpn, const InitSpec& s) {
  Buf<modify_qp_in> b{};
  header(b.data(), kRst2InitQp);
  void* p = b.data();
  DB_SET(modify_qp_in, p, qpn, qpn);
  DB_SET(modify_qp_in, p, qp_context.pm_state, kQpcPmMigrated);
  DB_SET(modify_qp_in, p, qp_context.primary_address_path.vhca_port_num, s.port);
  DB_SET(modify_qp_in, p, qp_context.primary_address_path.pkey_index, s.pkey_index);
  DB_SET(modify_qp_in, p, qp_context.rwe, s.remote_write);
  DB_SET(modify_qp_in, p, qp_context.rre, s.remote_read);
  DB_SET(modify_qp_in, p, qp_context.rae, s.remote_atomic);
  DB_SET(modify_qp_in, p, qp_context.atomic_mode, s.atomic_mode);
  return b;
}

Buf<modify_qp_in> Driver::build_init2rtr(uint32_t qpn, const RtrSpec& s) {
  Buf<modify_qp_in> b{};
  header(b.data(), kInit2RtrQp);
  void* p = b.data();
  DB_SET(modify_qp_in, p, qpn, qpn);
  DB_SET(modify_qp_in, p, qp_context.mtu, s.mtu);
  DB_SET(modify_qp_in, p, qp_context.log_msg_max, 30);
  DB_SET(modify_qp_in, p, qp_context.remote_qpn, s.remote_qpn);
  DB_SET(modify_qp_in, p, qp_context.next_rcv_psn, s.rq_psn);
  DB_SET(modify_qp_in, p, qp_context.min_rnr_nak, s.min_rnr_nak);
  DB_SET(modify_qp_in, p, qp_context.log_rra_max, s.log_rra_max);
  DB_SET(modify_qp_in, p, qp_context.primary_address_path.vhca_port_num, s.port);
  if (s.use_gid) {
    DB_SET(modify_qp_in, p, qp_context.primary_address_path.grh, 1);
    DB_SET(modify_qp_in, p, qp_context.primary_address_path.src_addr_index, s.sgid_index);
    DB_SET(modify_qp_in, p, qp_context.primary_address_path.hop_limit, s.hop_limit);
    uint8_t* gid = DB_BYTES(modify_qp_in, p, qp_context.primary_address_path.rgid_rip);
    for (int i = 0; i < 16; ++i) gid[i] = s.dgid[size_t(i)];
  } else {
    DB_SET(modify_qp_in, p, qp_context.primary_address_path.rlid, s.dlid);
  }
  return b;
}

Buf<modify_qp_in> Driver::build_rtr2rts(uint32_t qpn, const RtsSpec& s) {
  Buf<modify_qp_in> b{};
  header(b.data(), kRtr2RtsQp);
  void* p = b.data();
  DB_SET(modify_qp_in, p, qpn, qpn);
  DB_SET(modify_qp_in, p, qp_context.primary_address_path.ack_timeout, s.ack_timeout);
  DB_SET(modify_qp_in, p, qp_context.retry_count, s.retry_count);
  DB_SET(modify_qp_in, p, qp_context.rnr_retry, s.rnr_retry);
  DB_SET(modify_qp_in, p, qp_context.next_send_psn, s.sq_psn);
  DB_SET(modify_qp_in, p, qp_context.log_sra_max, s.log_sra_max);
  return b;
}

Buf<qp_by_number_in> Driver::build_qp_cmd(uint16_t opcode, uint32_t qpn) {
  Buf<qp_by_number_in> b{};
  header(b.data(), opcode);
  DB_SET(qp_by_number_in, b.data(), qpn, qpn);
  return b;
}

Buf<cq_by_number_in> Driver::build_cq_cmd(uint16_t opcode, uint32_t cqn) {
  Buf<cq_by_number_in> b{};
  header(b.data(), opcode);
  DB_SET(cq_by_number_in, b.data(), cqn, cqn);
  return b;
}

// ---- execution ----

namespace {
// Create an object from a built command; the reply layout sizes the reply buffer.
template <class OutLayout, class InBuf>
Result<Obj> create(DevxContext& ctx, const InBuf& in) {
  Buf<OutLayout> out{};
  Result<Obj> r = ctx.obj_create(in.data(), in.size(), out.data(), out.size());
  if (Status e = command_error(in.data(), out.data(), r.status(), &ctx); !e) return e;
  return r;
}
}  // namespace

Result<Obj> Driver::create_cq(const CqSpec& s) { return create<create_cq_out>(ctx_, build_create_cq(s)); }
Result<Obj> Driver::create_rc_qp(const RcQpSpec& s) { return create<create_qp_out>(ctx_, build_create_rc_qp(s)); }
Result<Obj> Driver::create_dct(const DctSpec& s) { return create<create_dct_out>(ctx_, build_create_dct(s)); }

Buf<create_dct_in> Driver::build_create_dct(const DctSpec& s) {
  Buf<create_dct_in> b{};
  header(b.data(), kCreateDct);
  void* p = b.data();
  DB_SET(create_dct_in, p, dct_context_entry.pd, s.pdn);
  DB_SET(create_dct_in, p, dct_context_entry.cqn, s.cqn);
  DB_SET(create_dct_in, p, dct_context_entry.srqn_xrqn, s.srqn);
  DB_SET(create_dct_in, p, dct_context_entry.dc_access_key, s.dc_key);
  DB_SET(create_dct_in, p, dct_context_entry.rwe, s.remote_write);
  DB_SET(create_dct_in, p, dct_context_entry.rre, s.remote_read);
  DB_SET(create_dct_in, p, dct_context_entry.rae, s.remote_atomic);
  DB_SET(create_dct_in, p, dct_context_entry.atomic_mode, s.atomic_mode);
  DB_SET(create_dct_in, p, dct_context_entry.port, s.port);
  DB_SET(create_dct_in, p, dct_context_entry.mtu, s.mtu);
  DB_SET(create_dct_in, p, dct_context_entry.min_rnr_nak, s.min_rnr_nak);
  return b;
}

namespace {
template <class InBuf>
Status modify(DevxContext& ctx, const Obj& qp, const InBuf& in) {
  Buf<mbox_out> out{};
  return command_error(in.data(), out.data(), ctx.obj_modify(qp, in.data(), in.size(), out.data(), out.size()), &ctx);
}
}  // namespace

Status Driver::rst2init(const Obj& qp, const InitSpec& s) { return modify(ctx_, qp, build_rst2init(qp.id, s)); }
Status Driver::init2rtr(const Obj& qp, const RtrSpec& s) { return modify(ctx_, qp, build_init2rtr(qp.id, s)); }
Status Driver::rtr2rts(const Obj& qp, const RtsSpec& s) { return modify(ctx_, qp, build_rtr2rts(qp.id, s)); }
Status Driver::to_error(const Obj& qp) { return modify(ctx_, qp, build_qp_cmd(kQp2Err, qp.id)); }
Status Driver::to_reset(const Obj& qp) { return modify(ctx_, qp, build_qp_cmd(kQp2Rst, qp.id)); }

Result<QpQuery> Driver::query_qp(const Obj& qp) {
  auto in = build_qp_cmd(kQueryQp, qp.id);
  Buf<query_qp_out> out{};
  if (Status e = command_error(in.data(), out.data(), ctx_.obj_query(qp, in.data(), in.size(), out.data(), out.size()), &ctx_);
      !e)
    return e;
  QpQuery q;
  q.state = QpcState(DB_GET(query_qp_out, out.data(), qp_context.state));
  q.next_rcv_psn = uint32_t(DB_GET(query_qp_out, out.data(), qp_context.next_rcv_psn));
  q.remote_qpn = uint32_t(DB_GET(query_qp_out, out.data(), qp_context.remote_qpn));
  q.hw_sq_wqebb_counter = uint16_t(DB_GET(query_qp_out, out.data(), qp_context.hw_sq_wqebb_counter));
  q.sw_sq_wqebb_counter = uint16_t(DB_GET(query_qp_out, out.data(), qp_context.sw_sq_wqebb_counter));
  return q;
}

Result<QpcState> Driver::query_qp_state(const Obj& qp) {
  Result<QpQuery> q = query_qp(qp);
  if (!q) return q.status();
  return q->state;
}

Status Driver::destroy_qp(const Obj& qp) {
  auto in = build_qp_cmd(kDestroyQp, qp.id);
  return ctx_.obj_destroy(qp, in.data(), in.size());
}

Status Driver::destroy_cq(const Obj& cq) {
  auto in = build_cq_cmd(kDestroyCq, cq.id);
  return ctx_.obj_destroy(cq, in.data(), in.size());
}

Status Driver::destroy_dct(const Obj& dct) {
  Buf<destroy_dct_in> in{};
  header(in.data(), kDestroyDct);
  DB_SET(destroy_dct_in, in.data(), dctn, dct.id);
  return ctx_.obj_destroy(dct, in.data(), in.size());
}

}  // namespace doorbell::devx
