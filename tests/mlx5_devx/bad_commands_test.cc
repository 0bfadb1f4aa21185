// Bad PRM commands get the PRM status and the model's syndrome — never a crash — and the
// driver turns them into errors that name opcode, op_mod, status and syndrome.
#include <gtest/gtest.h>

#include <vector>

#include <cstring>

#include "hw/mlx5_devx/command_status.h"
#include "hw/mlx5_devx/driver.h"
#include "tests/mlx5_devx/model_rig.h"

namespace doorbell::testing {
namespace {

using namespace doorbell::prm;
using devx::Driver;
using mock_nic::DevxSyndrome;

struct BadCommands : ::testing::Test {
  DevxRig rig;
  devx::Umem umem{};
  void* region = nullptr;
  void SetUp() override {
    region = *rig.devx->alloc(1 << 16, true);
    umem = *rig.devx->umem_reg(region, 1 << 16, 1);
  }
  devx::CqSpec cq_spec() const {
    devx::CqSpec c;
    c.log_size = 6;
    c.buf_umem = umem.id;
    c.buf_offset = 0;
    c.dbr_umem = umem.id;
    c.dbr_offset = 8192;
    c.uar_page = rig.uar.page_id;
    return c;
  }
  devx::RcQpSpec qp_spec(uint32_t cqn) const {
    devx::RcQpSpec q;
    q.pdn = rig.pdn;
    q.log_sq_size = 6;
    q.wq_umem = umem.id;
    q.wq_offset = 16384;
    q.dbr_umem = umem.id;
    q.dbr_offset = 8256;
    q.send_cqn = cqn;
    q.uar_page = rig.uar.page_id;
    return q;
  }
  // Run a create command through the seam; return the reply's status and syndrome.
  template <class InBuf>
  std::pair<uint8_t, uint32_t> create(const InBuf& in, size_t inlen = 0) {
    Buf<create_qp_out> out{};
    (void)rig.devx->obj_create(in.data(), inlen ? inlen : in.size(), out.data(), out.size());
    return {uint8_t(DB_GET(mbox_out, out.data(), status)), uint32_t(DB_GET(mbox_out, out.data(), syndrome))};
  }
};

std::pair<uint8_t, uint32_t> want(uint8_t st, DevxSyndrome s) { return {st, uint32_t(s)}; }

TEST_F(BadCommands, UnknownOpcode) {
  Buf<create_cq_in> in = Driver::build_create_cq(cq_spec());
  DB_SET(mbox_in, in.data(), opcode, 0x999);
  EXPECT_EQ(create(in), want(kStatBadOp, DevxSyndrome::kUnknownOpcode));
  // Through the driver's one error-mapping place.
  Buf<create_cq_out> out{};
  Result<devx::Obj> r = rig.devx->obj_create(in.data(), in.size(), out.data(), out.size());
  Status st = devx::command_error(in.data(), out.data(), r.status(), rig.devx.get());
  EXPECT_EQ(st.code(), Errc::kNotSupported);
  EXPECT_NE(st.message().find("UNKNOWN_OPCODE (op_mod 0x0) failed: status BAD_OP (0x2), syndrome 0x0d0b0001 (opcode not implemented)"),
            std::string::npos)
      << st.message();
}

TEST_F(BadCommands, ShortInputAndOutput) {
  Buf<create_cq_in> in = Driver::build_create_cq(cq_spec());
  EXPECT_EQ(create(in, 64), want(kStatBadInputLen, DevxSyndrome::kInputTooShort));
  uint8_t tiny[8] = {};  // not even room for status + syndrome: refused, nothing written past it
  Result<devx::Obj> r = rig.devx->obj_create(in.data(), in.size(), tiny, sizeof tiny);
  EXPECT_EQ(r.status().code(), Errc::kBadParam);
  // A destroy too short to hold its header (found by fuzz/devx_fuzz: the error path read it).
  std::vector<uint8_t> stub(2, 0);
  Status d = rig.devx->obj_destroy(devx::Obj{1, 0}, stub.data(), stub.size());
  EXPECT_EQ(d.code(), Errc::kBadParam);
  EXPECT_NE(d.message().find("destroy"), std::string::npos) << d.message();
}

TEST_F(BadCommands, UnknownUmemId) {
  devx::CqSpec c = cq_spec();
  c.buf_umem = 4242;
  EXPECT_EQ(create(Driver::build_create_cq(c)), want(kStatBadParam, DevxSyndrome::kUnknownUmem));
  Result<devx::Obj> r = Driver(*rig.devx).create_cq(c);
  EXPECT_EQ(r.status().code(), Errc::kBadParam);
  EXPECT_NE(r.status().message().find("CREATE_CQ"), std::string::npos);
  EXPECT_NE(r.status().message().find("umem id not registered"), std::string::npos) << r.status().message();
}

TEST_F(BadCommands, OutOfRangeOffsets) {
  devx::CqSpec c = cq_spec();
  c.buf_offset = (1 << 16) - 64 * 63;  // 64 CQEs do not fit in what is left
  EXPECT_EQ(create(Driver::build_create_cq(c)), want(kStatBadParam, DevxSyndrome::kUmemRange));
  c = cq_spec();
  c.dbr_offset = (1 << 16) - 4;
  EXPECT_EQ(create(Driver::build_create_cq(c)), want(kStatBadParam, DevxSyndrome::kUmemRange));
  c = cq_spec();
  c.dbr_offset = 8195;
  EXPECT_EQ(create(Driver::build_create_cq(c)), want(kStatBadParam, DevxSyndrome::kMisaligned));
  const uint32_t cqn = Driver(*rig.devx).create_cq(cq_spec())->id;
  devx::RcQpSpec q = qp_spec(cqn);
  q.wq_offset = (1 << 16) - 64;
  EXPECT_EQ(create(Driver::build_create_rc_qp(q)), want(kStatBadParam, DevxSyndrome::kUmemRange));
}

TEST_F(BadCommands, IllegalStateTransitions) {
  Driver drv(*rig.devx);
  const uint32_t cqn = drv.create_cq(cq_spec())->id;
  devx::Obj qp = *drv.create_rc_qp(qp_spec(cqn));
  devx::RtrSpec r;
  r.remote_qpn = qp.id;
  r.dlid = 1;
  Status st = drv.init2rtr(qp, r);  // still in RST
  EXPECT_EQ(st.code(), Errc::kBadState);
  EXPECT_NE(st.message().find("INIT2RTR_QP (op_mod 0x0) failed: status BAD_RES_STATE (0x9)"), std::string::npos) << st.message();
  EXPECT_EQ(drv.rtr2rts(qp, {}).code(), Errc::kBadState);
  ASSERT_TRUE(drv.rst2init(qp, {}).is_ok());
  EXPECT_EQ(drv.rst2init(qp, {}).code(), Errc::kBadState);  // INIT is not RST
  EXPECT_EQ(*drv.query_qp_state(qp), kQpcInit);
  ASSERT_TRUE(drv.to_error(qp).is_ok());
  EXPECT_EQ(*drv.query_qp_state(qp), kQpcErr);
  ASSERT_TRUE(drv.to_reset(qp).is_ok());
  EXPECT_EQ(*drv.query_qp_state(qp), kQpcRst);
}

TEST_F(BadCommands, QpOnACqOfAnotherContext) {
  mock_nic::ModelDevx other(*rig.nic);  // a second process on the same device
  void* r2 = *other.alloc(1 << 16, true);
  devx::Umem u2 = *other.umem_reg(r2, 1 << 16, 1);
  devx::Uar uar2 = *other.alloc_uar();
  devx::CqSpec c = cq_spec();
  c.buf_umem = c.dbr_umem = u2.id;
  c.uar_page = uar2.page_id;
  const uint32_t foreign_cq = Driver(other).create_cq(c)->id;
  EXPECT_EQ(create(Driver::build_create_rc_qp(qp_spec(foreign_cq))), want(kStatBadRes, DevxSyndrome::kCqOtherContext));
  EXPECT_EQ(create(Driver::build_create_rc_qp(qp_spec(0x7777))), want(kStatBadRes, DevxSyndrome::kUnknownCq));
  // Nor may it use the other context's umem, UAR or PD.
  EXPECT_EQ(create(Driver::build_create_cq(c)), want(kStatBadRes, DevxSyndrome::kUnknownUar));
  devx::RcQpSpec q = qp_spec(Driver(*rig.devx).create_cq(cq_spec())->id);
  q.pdn = *other.alloc_pd();
  EXPECT_EQ(create(Driver::build_create_rc_qp(q)), want(kStatBadRes, DevxSyndrome::kUnknownPd));
}

TEST_F(BadCommands, UnsupportedContextFields) {
  Buf<create_cq_in> cq = Driver::build_create_cq(cq_spec());
  DB_SET(create_cq_in, cq.data(), cq_context.cqe_sz, 1);  // 128-byte CQEs
  EXPECT_EQ(create(cq), want(kStatBadParam, DevxSyndrome::kCqeSizeUnsupported));
  cq = Driver::build_create_cq(cq_spec());
  DB_SET(create_cq_in, cq.data(), cq_umem_valid, 0);
  EXPECT_EQ(create(cq), want(kStatBadParam, DevxSyndrome::kUmemNotValid));
  const uint32_t cqn = Driver(*rig.devx).create_cq(cq_spec())->id;
  Buf<create_qp_in> qp = Driver::build_create_rc_qp(qp_spec(cqn));
  DB_SET(create_qp_in, qp.data(), qp_context.st, 0x1);  // UC
  EXPECT_EQ(create(qp), want(kStatBadParam, DevxSyndrome::kQpTypeUnsupported));
  qp = Driver::build_create_rc_qp(qp_spec(cqn));
  DB_SET(create_qp_in, qp.data(), qp_context.rq_type, kRqTypeRegular);
  EXPECT_EQ(create(qp), want(kStatBadParam, DevxSyndrome::kRqTypeUnsupported));
  qp = Driver::build_create_rc_qp(qp_spec(cqn));
  DB_SET(create_qp_in, qp.data(), qp_context.rq_type, kRqTypeSrq);
  DB_SET(create_qp_in, qp.data(), qp_context.srqn_rmpn_xrqn, 0x1234);
  EXPECT_EQ(create(qp), want(kStatBadRes, DevxSyndrome::kUnknownSrq));
}

TEST_F(BadCommands, ModifyChecksTheObjectAndFields) {
  Driver drv(*rig.devx);
  const uint32_t cqn = drv.create_cq(cq_spec())->id;
  devx::Obj qp = *drv.create_rc_qp(qp_spec(cqn));
  Buf<modify_qp_in> in = Driver::build_rst2init(qp.id + 1, {});  // names another QP
  Buf<mbox_out> out{};
  (void)rig.devx->obj_modify(qp, in.data(), in.size(), out.data(), out.size());
  EXPECT_EQ(DB_GET(mbox_out, out.data(), syndrome), uint64_t(DevxSyndrome::kQpnMismatch));
  devx::InitSpec bad_port;
  bad_port.port = 3;
  EXPECT_EQ(drv.rst2init(qp, bad_port).code(), Errc::kBadParam);
  ASSERT_TRUE(drv.rst2init(qp, {}).is_ok());
  devx::RtrSpec r;
  r.remote_qpn = qp.id;
  r.mtu = 0;
  EXPECT_EQ(drv.init2rtr(qp, r).code(), Errc::kBadParam);
  EXPECT_EQ(drv.query_qp_state(devx::Obj{0x5555, 0x5555}).status().code(), Errc::kNotFound);
}

TEST_F(BadCommands, DestroyOfACqInUseIsRefused) {
  Driver drv(*rig.devx);
  devx::Obj cq = *drv.create_cq(cq_spec());
  devx::Obj qp = *drv.create_rc_qp(qp_spec(cq.id));
  Status st = drv.destroy_cq(cq);
  EXPECT_EQ(st.code(), Errc::kBadState);
  EXPECT_NE(st.message().find("DESTROY_CQ"), std::string::npos) << st.message();
  EXPECT_TRUE(drv.destroy_qp(qp).is_ok());
  EXPECT_TRUE(drv.destroy_cq(cq).is_ok());
  EXPECT_EQ(drv.destroy_cq(cq).code(), Errc::kNotFound);
}

}  // namespace
}  // namespace doorbell::testing
