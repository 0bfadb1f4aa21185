// The host set-up path on the NIC model, purely through the driver's PRM commands: a queue
// set (collapsed CQs, RC QPs, umem-registered regions), QPs connected by LID and by GID,
// WQEs written into the WQ buffer, DBR + BlueFlame doorbell, completions observed.
#include "hw/mlx5_devx/driver.h"

#include <gtest/gtest.h>

#include <cstring>

#include "hw/mlx5/wqe.h"
#include "tests/mlx5_devx/model_rig.h"

namespace doorbell::testing {
namespace {

using namespace doorbell::mlx5;
using devx::Driver;

void connect(Driver& da, const devx::Obj& a, const devx::Obj& b, const devx::PortInfo& pb, bool by_gid) {
  ASSERT_TRUE(da.rst2init(a, {}).is_ok());
  devx::RtrSpec r;
  r.remote_qpn = b.id;
  r.use_gid = by_gid;
  r.dlid = pb.lid;
  r.dgid = pb.gid;
  Status st = da.init2rtr(a, r);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE(da.rtr2rts(a, {}).is_ok());
}

// Write one RDMA WRITE WQE at `pi` of queue i and ring: DBR first, then the BlueFlame register.
void post_write(mock_nic::Nic& nic, const devx::QueueSet& q, uint32_t i, const devx::Uar& uar, uint16_t pi, uint32_t lkey,
                void* src, uint32_t rkey, void* dst, uint32_t len) {
  auto* w = q.wq(i) + (pi % (1u << q.spec().log_sq_size)) * kWqebb;
  auto* ctrl = reinterpret_cast<WqeCtrlSeg*>(w);
  set_ctrl_seg(ctrl, pi, WqeOpcode::kRdmaWrite, 0, q.qp(i).id, kCtrlCqUpdate, 3);
  set_raddr_seg(reinterpret_cast<WqeRaddrSeg*>(w + 16), reinterpret_cast<uint64_t>(dst), rkey);
  set_data_seg(reinterpret_cast<WqeDataSeg*>(w + 32), len, lkey, reinterpret_cast<uint64_t>(src));
  q.qp_dbr(i)->snd.set(uint16_t(pi + 1));
  ASSERT_TRUE(nic.mmio_write64(uar.reg_addr, doorbell_word(*ctrl)));
}

TEST(DevxOnModel, QueueSetThenLoopbackWriteCompletes) {
  DevxRig rig;
  auto qs = devx::QueueSet::create(*rig.devx, *rig.devx, rig.spec(2));
  ASSERT_TRUE(qs.is_ok()) << qs.status().to_string();
  devx::QueueSet& q = **qs;
  // SPEC §3 memory: CQ buffers start invalid (0xff), one region per kind, GPU memory.
  EXPECT_EQ(q.cq_buf(1)->op_own, 0xff);
  EXPECT_EQ(rig.mem.find(reinterpret_cast<uint64_t>(q.wq(0)))->kind, mem::MemKind::kGpu);
  EXPECT_EQ(q.wq(1) - q.wq(0), int64_t(q.wq_stride()));

  Driver drv(*rig.devx);
  Result<devx::PortInfo> port = rig.devx->query_port(1);
  ASSERT_TRUE(port.is_ok());
  connect(drv, q.qp(0), q.qp(1), *port, false);
  connect(drv, q.qp(1), q.qp(0), *port, true);
  EXPECT_EQ(*drv.query_qp_state(q.qp(0)), prm::kQpcRts);

  void* buf = *rig.devx->alloc(8192, true);
  std::memset(buf, 0x5c, 4096);
  Result<devx::Mr> mr = rig.devx->reg_mr(rig.pdn, buf, 8192, 0xf);
  ASSERT_TRUE(mr.is_ok()) << mr.status().to_string();
  auto* bytes = static_cast<uint8_t*>(buf);
  for (uint16_t pi = 0; pi < 200; ++pi) {  // wraps the 64-entry ring three times
    post_write(*rig.nic, q, 0, rig.uar, pi, mr->lkey, bytes + pi, mr->rkey, bytes + 4096 + pi * 8, 8);
    while (rig.nic->progress() != 0) {
    }
    const Cqe64* c = q.cq_buf(0);  // collapsed: always slot 0
    ASSERT_EQ(c->opcode(), uint8_t(CqeOpcode::kReq)) << "pi " << pi;
    ASSERT_EQ(c->wqe_counter.get(), pi);
  }
  EXPECT_EQ(bytes[4096 + 199 * 8], 0x5c);
  EXPECT_TRUE(rig.devx->dereg_mr(*mr).is_ok());
}

TEST(DevxOnModel, TwoNicsConnectedByGidAcrossAFabric) {
  DevxRig a(1);
  // Both NIC models share one address space so each can reach the other's memory by address.
  mock_nic::Nic nb(a.mem, mock_nic::NicConfig{.lid = 2});
  mock_nic::ModelDevx db(nb);
  mock_nic::Fabric fabric;
  ASSERT_TRUE(fabric.attach(*a.nic).is_ok());
  ASSERT_TRUE(fabric.attach(nb).is_ok());
  const uint32_t pdb = *db.alloc_pd();
  const devx::Uar uarb = *db.alloc_uar();
  auto qa = devx::QueueSet::create(*a.devx, *a.devx, a.spec(1));
  devx::QueueSetSpec sb = a.spec(1);
  sb.pdn = pdb;
  sb.uar_page = uarb.page_id;
  sb.gpu_memory = false;  // host memory option
  auto qb = devx::QueueSet::create(db, db, sb);
  ASSERT_TRUE(qa.is_ok() && qb.is_ok());
  Driver da(*a.devx), dbd(db);
  connect(da, (*qa)->qp(0), (*qb)->qp(0), *db.query_port(1), true);
  connect(dbd, (*qb)->qp(0), (*qa)->qp(0), *a.devx->query_port(1), true);
  void* src = *a.devx->alloc(4096, true);
  void* dst = *db.alloc(4096, true);
  std::memset(src, 0x42, 4096);
  auto ms = a.devx->reg_mr(a.pdn, src, 4096, 0xf);
  auto md = db.reg_mr(pdb, dst, 4096, 0xf);
  post_write(*a.nic, **qa, 0, a.uar, 0, ms->lkey, src, md->rkey, dst, 4096);
  ASSERT_TRUE(fabric.run_until_idle());
  EXPECT_EQ(static_cast<uint8_t*>(dst)[4095], 0x42);
  EXPECT_EQ((*qa)->cq_buf(0)->opcode(), uint8_t(CqeOpcode::kReq));
}

TEST(DevxOnModel, QpAccessFlagsFromRst2InitAreEnforced) {
  DevxRig rig;
  auto qs = devx::QueueSet::create(*rig.devx, *rig.devx, rig.spec(2));
  ASSERT_TRUE(qs.is_ok());
  Driver drv(*rig.devx);
  devx::PortInfo port = *rig.devx->query_port(1);
  connect(drv, (*qs)->qp(0), (*qs)->qp(1), port, false);
  devx::InitSpec no_write;
  no_write.remote_write = false;
  ASSERT_TRUE(drv.rst2init((*qs)->qp(1), no_write).is_ok());
  devx::RtrSpec r;
  r.remote_qpn = (*qs)->qp(0).id;
  r.dlid = port.lid;
  ASSERT_TRUE(drv.init2rtr((*qs)->qp(1), r).is_ok());
  void* buf = *rig.devx->alloc(4096, true);
  auto mr = rig.devx->reg_mr(rig.pdn, buf, 4096, 0xf);
  post_write(*rig.nic, **qs, 0, rig.uar, 0, mr->lkey, buf, mr->rkey, static_cast<uint8_t*>(buf) + 64, 8);
  while (rig.nic->progress() != 0) {
  }
  const auto* e = reinterpret_cast<const ErrCqe64*>((*qs)->cq_buf(0));
  EXPECT_EQ(e->syndrome, uint8_t(CqeSyndrome::kRemoteAccessErr));
}

TEST(DevxOnModel, SrqAndReceiveCqThroughTheSeam) {
  DevxRig rig;
  Result<devx::Obj> srq = rig.devx->create_srq(rig.pdn, 16);
  Result<devx::Obj> rcq = rig.devx->create_verbs_cq(16);
  ASSERT_TRUE(srq.is_ok() && rcq.is_ok());
  devx::QueueSetSpec s = rig.spec(2);
  s.srqn = srq->id;
  s.recv_cqn = rcq->id;
  auto qs = devx::QueueSet::create(*rig.devx, *rig.devx, s);
  ASSERT_TRUE(qs.is_ok()) << qs.status().to_string();
  EXPECT_EQ(rig.nic->qp((*qs)->qp(1).id)->attr.srqn, srq->id);
}

}  // namespace
}  // namespace doorbell::testing
