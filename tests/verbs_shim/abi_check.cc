// The verbs / mlx5dv shim's C ABI, called the way NVSHMEM 3.4's IBGDA transport calls it
// (its ibgda.cpp and transport_ib_common.cpp: facts, not code): libibverbs.so.1 is opened
// with dlopen and its 23 names taken with dlsym; libmlx5.so.1 is linked, so its versioned
// imports (MLX5_1.2 / 1.3 / 1.7 / 1.19) must resolve at load. Then the set-up in NVSHMEM's
// order: the device, QUERY_HCA_CAP (general and atomic pages), the port, the host-memory
// umem probe, the SRQ / CQ / parent domain / AH / DCT NVSHMEM makes for DC, then collapsed
// DEVX CQs, RC and DCI QPs moved to RTS, and the data path of its CPU-assisted mode: WQEs in
// host memory, the doorbell record and the BlueFlame word written as its CPU proxy writes
// them, completions read from the collapsed CQE's wqe_counter; memory registered with
// ibv_reg_mr (and ibv_reg_dmabuf_mr's errors: its success needs the CUDA Dma); two QPs
// ringing back to back on one UAR page. A bad rkey gets an error CQE; a WRITE on the DCI
// reaches the DCT on this port (NVSHMEM's send to itself); the shim's counters match.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "host/verbs_shim/shim_api.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/prm/hca_caps.h"
#include "hw/mlx5/prm/layouts.h"

namespace {

using namespace doorbell;

// NVSHMEM's table of libibverbs functions, filled by dlsym.
struct Ibv {
  void* lib = nullptr;
  decltype(&ibv_get_device_list) get_device_list;
  decltype(&ibv_free_device_list) free_device_list;
  decltype(&ibv_get_device_name) get_device_name;
  decltype(&ibv_open_device) open_device;
  decltype(&ibv_close_device) close_device;
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*);  // the exported (compat) symbol
  decltype(&ibv_query_device) query_device;
  decltype(&ibv_query_gid) query_gid;
  decltype(&ibv_alloc_pd) alloc_pd;
  decltype(&ibv_dealloc_pd) dealloc_pd;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  decltype(&ibv_dereg_mr) dereg_mr;
  decltype(&ibv_create_cq) create_cq;
  decltype(&ibv_destroy_cq) destroy_cq;
  decltype(&ibv_create_srq) create_srq;
  decltype(&ibv_destroy_srq) destroy_srq;
  decltype(&ibv_create_ah) create_ah;
  decltype(&ibv_destroy_ah) destroy_ah;
  decltype(&ibv_modify_qp) modify_qp;
  decltype(&ibv_destroy_qp) destroy_qp;
};

template <class F>
void load(void* lib, F* f, const char* name) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  ASSERT_NE(*f, nullptr) << name;
}

template <class L>
struct Cmd {  // a PRM command buffer and its reply
  prm::Buf<L> in{};
  std::vector<uint8_t> out = std::vector<uint8_t>(4112);
};

constexpr uint32_t kDepth = 64;  // WQEBBs per QP (a power of two, as NVSHMEM rounds QP_DEPTH)

class ShimAbi : public ::testing::Test {
 protected:
  Ibv v;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint32_t pdn = 0;
  uint16_t lid = 0;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;

  void SetUp() override {
    v.lib = dlopen("libibverbs.so.1", RTLD_LAZY);
    ASSERT_NE(v.lib, nullptr) << dlerror();
    for (const char* n : {"ibv_fork_init", "ibv_create_qp", "ibv_reg_mr_iova"}) EXPECT_NE(dlsym(v.lib, n), nullptr) << n;
    reg_dmabuf_mr = reinterpret_cast<decltype(reg_dmabuf_mr)>(dlsym(v.lib, "ibv_reg_dmabuf_mr"));  // NVSHMEM's path for GPU memory
    ASSERT_NE(reg_dmabuf_mr, nullptr);
    load(v.lib, &v.get_device_list, "ibv_get_device_list");
    load(v.lib, &v.free_device_list, "ibv_free_device_list");
    load(v.lib, &v.get_device_name, "ibv_get_device_name");
    load(v.lib, &v.open_device, "ibv_open_device");
    load(v.lib, &v.close_device, "ibv_close_device");
    load(v.lib, &v.query_port, "ibv_query_port");
    load(v.lib, &v.query_device, "ibv_query_device");
    load(v.lib, &v.query_gid, "ibv_query_gid");
    load(v.lib, &v.alloc_pd, "ibv_alloc_pd");
    load(v.lib, &v.dealloc_pd, "ibv_dealloc_pd");
    load(v.lib, &v.reg_mr, "ibv_reg_mr");
    load(v.lib, &v.dereg_mr, "ibv_dereg_mr");
    load(v.lib, &v.create_cq, "ibv_create_cq");
    load(v.lib, &v.destroy_cq, "ibv_destroy_cq");
    load(v.lib, &v.create_srq, "ibv_create_srq");
    load(v.lib, &v.destroy_srq, "ibv_destroy_srq");
    load(v.lib, &v.create_ah, "ibv_create_ah");
    load(v.lib, &v.destroy_ah, "ibv_destroy_ah");
    load(v.lib, &v.modify_qp, "ibv_modify_qp");
    load(v.lib, &v.destroy_qp, "ibv_destroy_qp");
    // The optional mlx5dv names NVSHMEM takes with dlvsym.
    void* mlx5 = dlopen("libmlx5.so.1", RTLD_LAZY);
    ASSERT_NE(mlx5, nullptr) << dlerror();
    EXPECT_NE(dlvsym(mlx5, "mlx5dv_is_supported", "MLX5_1.8"), nullptr);
    EXPECT_EQ(dlvsym(mlx5, "mlx5dv_get_data_direct_sysfs_path", "MLX5_1.25"), nullptr) << "no data-direct path: NVSHMEM keeps its sysfs route";

    int n = 0;
    ibv_device** list = v.get_device_list(&n);
    ASSERT_EQ(n, 1);
    ASSERT_NE(std::strstr(v.get_device_name(list[0]), "mlx5"), nullptr);  // NVSHMEM_HCA_PREFIX
    ctx = v.open_device(list[0]);
    v.free_device_list(list);
    ASSERT_NE(ctx, nullptr);
    ibv_device_attr da{};
    ASSERT_EQ(v.query_device(ctx, &da), 0);
    EXPECT_EQ(da.phys_port_cnt, 1);
    EXPECT_GT(da.max_qp_rd_atom, 0);
    ibv_port_attr pa{};
    ASSERT_EQ(v.query_port(ctx, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
    EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
    EXPECT_EQ(pa.gid_tbl_len, 1);
    lid = pa.lid;
    ASSERT_NE(lid, 0);
    ibv_gid gid{};
    ASSERT_EQ(v.query_gid(ctx, 1, 0, &gid), 0);
    pd = v.alloc_pd(ctx);
    ASSERT_NE(pd, nullptr);
    mlx5dv_pd dpd{};
    mlx5dv_obj o{};
    o.pd.in = pd, o.pd.out = &dpd;
    ASSERT_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_PD), 0);
    pdn = dpd.pdn;
  }
  void TearDown() override {
    if (pd != nullptr) {
      EXPECT_EQ(v.dealloc_pd(pd), 0);
    }
    if (ctx != nullptr) {
      EXPECT_EQ(v.close_device(ctx), 0);
    }
  }

  // QUERY_HCA_CAP of page `cap`: the capability bytes.
  std::vector<uint8_t> hca_cap(uint16_t cap) {
    Cmd<prm::query_hca_cap_in> c;
    DB_SET(query_hca_cap_in, c.in.data(), opcode, prm::kQueryHcaCap);
    DB_SET(query_hca_cap_in, c.in.data(), op_mod, (cap << 1) | 1);
    EXPECT_EQ(mlx5dv_devx_general_cmd(ctx, c.in.data(), c.in.size(), c.out.data(), c.out.size()), 0);
    return {c.out.begin() + 16, c.out.end()};
  }
};

TEST_F(ShimAbi, CapabilitiesAreWhatNvshmemRequires) {
  std::vector<uint8_t> gen = hca_cap(prm::kHcaCapGeneral);
  EXPECT_EQ(DB_GET(cmd_hca_cap, gen.data(), cqe_version), 1u);  // NVSHMEM: fatal otherwise
  std::vector<uint8_t> at = hca_cap(prm::kHcaCapAtomic);
  EXPECT_EQ(DB_GET(atomic_caps, at.data(), atomic_operations), 0xfu);  // CAS, FA, masked CAS, masked FA
  EXPECT_EQ(DB_GET(atomic_caps, at.data(), atomic_size_qp) & 0xc, 0xcu);
  EXPECT_EQ(DB_GET(atomic_caps, at.data(), atomic_size_dc) & 0xc, 0xcu);
  EXPECT_EQ(DB_GET(atomic_caps, at.data(), supported_atomic_req_8B_endianness_mode_1), 1u);
  // An unknown general command is refused with a PRM status, not ignored.
  Cmd<prm::query_hca_cap_in> bad;
  DB_SET(query_hca_cap_in, bad.in.data(), opcode, 0x7ff);
  EXPECT_NE(mlx5dv_devx_general_cmd(ctx, bad.in.data(), bad.in.size(), bad.out.data(), bad.out.size()), 0);
  EXPECT_NE(DB_GET(mbox_out, bad.out.data(), status), 0u);
}

TEST_F(ShimAbi, NvshmemSetUpThenItsCpuAssistedDataPath) {
  // The host-memory probe: an 8-byte umem, registered and released.
  void* probe = nullptr;
  ASSERT_EQ(posix_memalign(&probe, 65536, 8), 0);
  mlx5dv_devx_umem* pu = mlx5dv_devx_umem_reg(ctx, probe, 8, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(pu, nullptr);
  ASSERT_EQ(mlx5dv_devx_umem_dereg(pu), 0);
  std::free(probe);

  // DC set-up NVSHMEM always does: SRQ, receive CQ, parent domain, AH to itself, a DCT.
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 1024, sa.attr.max_sge = 1;
  ibv_srq* srq = v.create_srq(pd, &sa);
  ASSERT_NE(srq, nullptr);
  mlx5dv_srq dsrq{};
  dsrq.comp_mask = MLX5DV_SRQ_MASK_SRQN;
  mlx5dv_obj o{};
  o.srq.in = srq, o.srq.out = &dsrq;
  ASSERT_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_SRQ), 0);
  ASSERT_NE(dsrq.srqn, 0u);
  ibv_cq* rcq = v.create_cq(ctx, 1024, nullptr, nullptr, 0);
  ASSERT_NE(rcq, nullptr);
  mlx5dv_cq dcq{};
  o = {};
  o.cq.in = rcq, o.cq.out = &dcq;
  ASSERT_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ), 0);
  ibv_parent_domain_init_attr pda{};
  pda.pd = pd;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx, &pda);  // inline in verbs.h: the verbs_context op
  ASSERT_NE(parent, nullptr);
  ibv_ah_attr aa{};
  aa.dlid = lid, aa.port_num = 1;
  ibv_ah* ah = v.create_ah(parent, &aa);
  ASSERT_NE(ah, nullptr);
  mlx5dv_ah dah{};
  o = {};
  o.ah.in = ah, o.ah.out = &dah;
  ASSERT_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_AH), 0);
  ASSERT_NE(dah.av, nullptr);
  EXPECT_EQ(be16toh(dah.av->rlid), lid);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_DRIVER, qa.comp_mask = IBV_QP_INIT_ATTR_PD, qa.pd = parent, qa.srq = srq, qa.send_cq = rcq, qa.recv_cq = rcq;
  mlx5dv_qp_init_attr dva{};
  dva.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC, dva.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT, dva.dc_init_attr.dct_access_key = 0x5623CEAF;
  ibv_qp* dct = mlx5dv_create_qp(ctx, &qa, &dva);
  ASSERT_NE(dct, nullptr);
  ibv_qp_attr qattr{};
  qattr.qp_state = IBV_QPS_INIT;
  qattr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_EQ(v.modify_qp(dct, &qattr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  qattr.qp_state = IBV_QPS_RTR;
  qattr.path_mtu = IBV_MTU_4096, qattr.min_rnr_timer = 12;
  ASSERT_EQ(v.modify_qp(dct, &qattr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER), 0);
  ASSERT_NE(dct->qp_num, 0u) << "the DCT's number comes at RTR (CREATE_DCT)";

  // Send side, all in host memory: one collapsed CQ per QP, one WQ buffer and one DBR buffer
  // for every QP (two RC QPs connected to each other, and a DCI).
  constexpr int kQps = 3;
  uint32_t eqn = 99;
  ASSERT_EQ(mlx5dv_devx_query_eqn(ctx, 0, &eqn), 0);
  mlx5dv_devx_uar* uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
  ASSERT_NE(uar, nullptr);
  void *wq = nullptr, *cqmem = nullptr;  // page-aligned, as NVSHMEM allocates them
  ASSERT_EQ(posix_memalign(&wq, 4096, kQps * kDepth * 64), 0);
  ASSERT_EQ(posix_memalign(&cqmem, 4096, kQps * kDepth * 64), 0);
  std::memset(wq, 0, kQps * kDepth * 64);
  std::memset(cqmem, 0xff, kQps * kDepth * 64);  // every CQE invalid until the NIC writes it
  const auto* cqbuf = static_cast<const uint8_t*>(cqmem);
  // The doorbell records too: the shim's engine reads them until the QPs are destroyed, so they
  // live until the teardown, whichever way the test ends.
  void *cqdbrmem = nullptr, *qpdbrmem = nullptr;
  ASSERT_EQ(posix_memalign(&cqdbrmem, 64, kQps * 8), 0);
  ASSERT_EQ(posix_memalign(&qpdbrmem, 64, kQps * 8), 0);
  std::span<uint64_t> cqdbr(static_cast<uint64_t*>(cqdbrmem), kQps), qpdbr(static_cast<uint64_t*>(qpdbrmem), kQps);
  std::fill(cqdbr.begin(), cqdbr.end(), 0), std::fill(qpdbr.begin(), qpdbr.end(), 0);
  mlx5dv_devx_umem* u_cq = mlx5dv_devx_umem_reg(ctx, cqmem, kQps * kDepth * 64, IBV_ACCESS_LOCAL_WRITE);
  mlx5dv_devx_umem* u_cqdbr = mlx5dv_devx_umem_reg(ctx, cqdbr.data(), cqdbr.size() * 8, IBV_ACCESS_LOCAL_WRITE);
  mlx5dv_devx_umem_in uin{};
  uin.addr = wq, uin.size = kQps * kDepth * 64, uin.access = IBV_ACCESS_LOCAL_WRITE, uin.pgsz_bitmap = 4096;
  mlx5dv_devx_umem* u_wq = mlx5dv_devx_umem_reg_ex(ctx, &uin);
  mlx5dv_devx_umem* u_qpdbr = mlx5dv_devx_umem_reg(ctx, qpdbr.data(), qpdbr.size() * 8, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(u_cq && u_cqdbr && u_wq && u_qpdbr);
  mlx5dv_devx_obj *cq[kQps], *qp[kQps];
  uint32_t cqn[kQps], qpn[kQps];
  for (int i = 0; i < kQps; ++i) {
    Cmd<prm::create_cq_in> c;
    void* in = c.in.data();
    DB_SET(create_cq_in, in, opcode, prm::kCreateCq);
    DB_SET(create_cq_in, in, cq_umem_id, u_cq->umem_id);
    DB_SET(create_cq_in, in, cq_umem_valid, 1);
    DB_SET(create_cq_in, in, cq_umem_offset, uint64_t(i) * kDepth * 64);
    DB_SET(create_cq_in, in, cq_context.dbr_umem_valid, 1);
    DB_SET(create_cq_in, in, cq_context.dbr_umem_id, u_cqdbr->umem_id);
    DB_SET(create_cq_in, in, cq_context.dbr_addr, uint64_t(i) * 8);
    DB_SET(create_cq_in, in, cq_context.cqe_sz, 0);
    DB_SET(create_cq_in, in, cq_context.cc, 1);
    DB_SET(create_cq_in, in, cq_context.oi, 1);
    DB_SET(create_cq_in, in, cq_context.log_cq_size, 6);
    DB_SET(create_cq_in, in, cq_context.uar_page, uar->page_id);
    DB_SET(create_cq_in, in, cq_context.c_eqn, eqn);
    DB_SET(create_cq_in, in, cq_context.log_page_size, 4);
    cq[i] = mlx5dv_devx_obj_create(ctx, in, c.in.size(), c.out.data(), 16);
    ASSERT_NE(cq[i], nullptr) << "CREATE_CQ " << i;
    cqn[i] = uint32_t(DB_GET(create_cq_out, c.out.data(), cqn));
  }
  for (int i = 0; i < kQps; ++i) {
    Cmd<prm::create_qp_in> c;
    void* in = c.in.data();
    DB_SET(create_qp_in, in, opcode, prm::kCreateQp);
    DB_SET(create_qp_in, in, wq_umem_id, u_wq->umem_id);
    DB_SET(create_qp_in, in, wq_umem_offset, uint64_t(i) * kDepth * 64);
    DB_SET(create_qp_in, in, wq_umem_valid, 1);
    DB_SET(create_qp_in, in, qp_context.st, i < 2 ? prm::kQpcStRc : prm::kQpcStDci);
    DB_SET(create_qp_in, in, qp_context.pm_state, prm::kQpcPmMigrated);
    DB_SET(create_qp_in, in, qp_context.pd, pdn);
    DB_SET(create_qp_in, in, qp_context.uar_page, uar->page_id);
    DB_SET(create_qp_in, in, qp_context.rq_type, prm::kRqTypeSrq);
    DB_SET(create_qp_in, in, qp_context.srqn_rmpn_xrqn, dsrq.srqn);
    DB_SET(create_qp_in, in, qp_context.cqn_snd, cqn[i]);
    DB_SET(create_qp_in, in, qp_context.cqn_rcv, dcq.cqn);
    DB_SET(create_qp_in, in, qp_context.log_sq_size, 6);
    DB_SET(create_qp_in, in, qp_context.dbr_umem_valid, 1);
    DB_SET(create_qp_in, in, qp_context.dbr_addr, uint64_t(i) * 8);
    DB_SET(create_qp_in, in, qp_context.dbr_umem_id, u_qpdbr->umem_id);
    DB_SET(create_qp_in, in, qp_context.user_index, uint32_t(i));
    qp[i] = mlx5dv_devx_obj_create(ctx, in, c.in.size(), c.out.data(), 16);
    ASSERT_NE(qp[i], nullptr) << "CREATE_QP " << i;
    qpn[i] = uint32_t(DB_GET(create_qp_out, c.out.data(), qpn));
  }
  for (int i = 0; i < kQps; ++i) {  // RST2INIT, INIT2RTR (RC: to the other RC QP, on this port's LID), RTR2RTS
    for (uint16_t op : {prm::kRst2InitQp, prm::kInit2RtrQp, prm::kRtr2RtsQp}) {
      Cmd<prm::modify_qp_in> c;
      void* in = c.in.data();
      DB_SET(modify_qp_in, in, opcode, op);
      DB_SET(modify_qp_in, in, qpn, qpn[i]);
      if (op == prm::kRst2InitQp) {
        DB_SET(modify_qp_in, in, qp_context.primary_address_path.vhca_port_num, 1);
        DB_SET(modify_qp_in, in, qp_context.pm_state, prm::kQpcPmMigrated);
        if (i < 2) {
          DB_SET(modify_qp_in, in, qp_context.rwe, 1);
          DB_SET(modify_qp_in, in, qp_context.rre, 1);
          DB_SET(modify_qp_in, in, qp_context.rae, 1);
          DB_SET(modify_qp_in, in, qp_context.atomic_mode, 3);
        }
      } else if (op == prm::kInit2RtrQp) {
        DB_SET(modify_qp_in, in, qp_context.mtu, 5);
        DB_SET(modify_qp_in, in, qp_context.log_msg_max, 30);
        if (i < 2) {
          DB_SET(modify_qp_in, in, qp_context.remote_qpn, qpn[1 - i]);
          DB_SET(modify_qp_in, in, qp_context.min_rnr_nak, 12);
          DB_SET(modify_qp_in, in, qp_context.primary_address_path.rlid, lid);
        }
      } else {
        DB_SET(modify_qp_in, in, qp_context.retry_count, 7);
        DB_SET(modify_qp_in, in, qp_context.rnr_retry, 7);
        DB_SET(modify_qp_in, in, qp_context.primary_address_path.ack_timeout, 20);
      }
      ASSERT_EQ(mlx5dv_devx_obj_modify(qp[i], in, c.in.size(), c.out.data(), 16), 0) << prm::opcode_name(op) << " of QP " << i;
    }
  }

  // Memory: a source, a destination, an atomics block and a result block, all registered.
  std::vector<uint8_t> src(4096), dst(4096, 0);
  std::vector<uint64_t> words(4, 0), results(4, ~0ull);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
  words[1] = 0x0000000100000002ull;  // a 4-byte masked fetch-add target in its low half
  const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ibv_mr* msrc = v.reg_mr(pd, src.data(), src.size(), all);
  // A dma-buf registration (NVSHMEM's for GPU memory): a closed fd is EBADF; device memory
  // without the shim's CUDA Dma (DOORBELL_SHIM_DMA=cuda; the GPU demo runs it) is EOPNOTSUPP,
  // not memory the engine would then crash on.
  const int dmabuf = memfd_create("doorbell-abi-dmabuf", 0);
  ASSERT_GE(dmabuf, 0);
  EXPECT_EQ(reg_dmabuf_mr(pd, 0, dst.size(), reinterpret_cast<uint64_t>(dst.data()), -1, all), nullptr);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(reg_dmabuf_mr(pd, 0, dst.size(), reinterpret_cast<uint64_t>(dst.data()), dmabuf, all), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(dmabuf);
  ibv_mr* mdst = v.reg_mr(pd, dst.data(), dst.size(), all);
  ibv_mr* mw = v.reg_mr(pd, words.data(), 32, all);
  ibv_mr* mres = v.reg_mr(pd, results.data(), 32, all);
  ASSERT_TRUE(msrc && mdst && mw && mres);

  // WQEs on RC QP 0 as NVSHMEM's device code builds them; only the last asks for a CQE.
  auto* ring = static_cast<uint8_t*>(wq);
  uint32_t pi[kQps] = {0, 0, 0};
  auto post = [&](int q, uint8_t opcode, uint8_t opmod, uint8_t ds, uint8_t fm_ce_se, auto fill) {
    uint8_t* w = ring + uint64_t(q) * kDepth * 64 + (pi[q] % kDepth) * 64;
    std::memset(w, 0, 64 * ((ds * 16 + 63) / 64));
    mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(w), uint16_t(pi[q]), opcode, opmod, qpn[q], fm_ce_se, ds, 0, 0);
    fill(w + 16);
    const uint32_t idx = pi[q];
    pi[q] += (ds * 16 + 63) / 64;
    return idx;
  };
  auto raddr = [](uint8_t* at, const void* addr, uint32_t rkey) {
    auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(at);
    r->raddr = htobe64(reinterpret_cast<uint64_t>(addr)), r->rkey = htobe32(rkey);
  };
  auto data = [](uint8_t* at, const void* addr, uint32_t len, uint32_t lkey) {
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(at), len, lkey, reinterpret_cast<uintptr_t>(addr));
  };
  post(0, MLX5_OPCODE_RDMA_WRITE, 0, 3, 0, [&](uint8_t* s) { raddr(s, dst.data(), mdst->rkey), data(s + 16, src.data(), 256, msrc->lkey); });
  post(0, MLX5_OPCODE_RDMA_WRITE, 0, 3, 0, [&](uint8_t* s) {  // nvshmem_p: inline
    raddr(s, dst.data() + 1024, mdst->rkey);
    *reinterpret_cast<uint32_t*>(s + 16) = htobe32(8 | MLX5_INLINE_SEG);
    std::memcpy(s + 20, "p-inline", 8);
  });
  post(0, MLX5_OPCODE_RDMA_READ, 0, 3, 0, [&](uint8_t* s) { raddr(s, src.data() + 512, msrc->rkey), data(s + 16, dst.data() + 2048, 128, mdst->lkey); });
  post(0, MLX5_OPCODE_ATOMIC_FA, 0, 4, 0, [&](uint8_t* s) {  // 8-byte fetch-add
    raddr(s, &words[0], mw->rkey);
    reinterpret_cast<mlx5_wqe_atomic_seg*>(s + 16)->swap_add = htobe64(5);
    data(s + 32, &results[0], 8, mres->lkey);
  });
  post(0, 0x15 /* MASKED_FA */, 0x08 /* 4 bytes */, 4, 0, [&](uint8_t* s) {  // 4-byte fetch-add
    raddr(s, &words[1], mw->rkey);
    *reinterpret_cast<uint32_t*>(s + 16) = htobe32(40);  // add
    data(s + 32, &results[1], 4, mres->lkey);
  });
  post(0, 0x14 /* MASKED_CS */, 0x09 /* 8 bytes */, 5, 0, [&](uint8_t* s) {  // put-with-signal SET: two atomic segments
    raddr(s, &words[2], mw->rkey);
    auto* a = reinterpret_cast<uint64_t*>(s + 16);
    a[0] = htobe64(77), a[1] = 0, a[2] = htobe64(~0ull), a[3] = 0;  // swap, compare, swap_mask, compare_mask
    data(s + 48, &results[2], 8, mres->lkey);
  });
  const uint32_t last = post(0, MLX5_OPCODE_NOP, 0, 1, MLX5_WQE_CTRL_CQ_UPDATE, [](uint8_t*) {});

  // NVSHMEM's CPU proxy rings: the SQ doorbell record (big-endian, low 16 bits), a release
  // fence, then the 8-byte BlueFlame store {be32(prod << 8), be32(qpn << 8)}.
  auto ring_doorbell = [&](int q) {
    auto* dbr = reinterpret_cast<uint32_t*>(&qpdbr[q]);
    __atomic_store_n(&dbr[1], htobe32(pi[q] & 0xffff), __ATOMIC_RELEASE);
    const uint64_t bf = uint64_t(htobe32(pi[q] << 8)) | uint64_t(htobe32(qpn[q] << 8)) << 32;
    __atomic_store_n(static_cast<uint64_t*>(uar->reg_addr), bf, __ATOMIC_RELEASE);
  };
  // NVSHMEM's quiet: the collapsed CQE's wqe_counter reaches the WQE that asked for a CQE.
  // DOORBELL_ABI_WAIT_S: how long a CQE is waited for (10 s; the fault ctests wait less).
  const char* wait_s = std::getenv("DOORBELL_ABI_WAIT_S");
  const auto patience = std::chrono::seconds(wait_s != nullptr ? std::atoi(wait_s) : 10);
  auto wait_cqe = [&](int q, uint32_t idx) -> const mlx5::Cqe64* {
    const auto* c = reinterpret_cast<const mlx5::Cqe64*>(cqbuf + uint64_t(q) * kDepth * 64);
    for (auto end = std::chrono::steady_clock::now() + patience; std::chrono::steady_clock::now() < end;) {
      const uint8_t op = __atomic_load_n(&c->op_own, __ATOMIC_ACQUIRE) >> 4;
      if (op != 0xf && c->wqe_counter.get() == uint16_t(idx)) return c;
      std::this_thread::yield();
    }
    return nullptr;
  };
  ring_doorbell(0);
  const mlx5::Cqe64* c = wait_cqe(0, last);
  ASSERT_NE(c, nullptr) << "no CQE for the NOP: the shim did not see the doorbell, or the model did not run";
  ASSERT_EQ(c->opcode(), uint8_t(mlx5::CqeOpcode::kReq)) << "syndrome 0x" << std::hex << int(reinterpret_cast<const mlx5::ErrCqe64*>(c)->syndrome);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 256), 0);
  EXPECT_EQ(std::memcmp(dst.data() + 1024, "p-inline", 8), 0);
  EXPECT_EQ(std::memcmp(dst.data() + 2048, src.data() + 512, 128), 0);
  EXPECT_EQ(words[0], 5u);
  EXPECT_EQ(results[0], 0u);  // 8-byte results land in host order
  EXPECT_EQ(words[1] & 0xffffffffu, 42u);
  EXPECT_EQ(words[1] >> 32, 1u);  // the 4-byte add did not carry into the next word
  EXPECT_EQ(be32toh(uint32_t(results[1])), 2u);  // 4-byte results land big-endian
  EXPECT_EQ(words[2], 77u);
  EXPECT_EQ(results[2], 0u);

  // Two QPs on one UAR page ringing back to back: the page's BlueFlame word holds only the
  // second doorbell, and both QPs' WQEs still run (each has its doorbell record).
  const uint32_t w0 = post(0, MLX5_OPCODE_RDMA_WRITE, 0, 3, MLX5_WQE_CTRL_CQ_UPDATE,
                           [&](uint8_t* s) { raddr(s, dst.data() + 3072, mdst->rkey), data(s + 16, src.data() + 3072, 64, msrc->lkey); });
  ring_doorbell(0);
  const uint32_t w1 = post(1, MLX5_OPCODE_NOP, 0, 1, MLX5_WQE_CTRL_CQ_UPDATE, [](uint8_t*) {});
  ring_doorbell(1);
  ASSERT_NE(wait_cqe(0, w0), nullptr) << "the first of two doorbells on one page was lost";
  ASSERT_NE(wait_cqe(1, w1), nullptr);
  EXPECT_EQ(std::memcmp(dst.data() + 3072, src.data() + 3072, 64), 0);

  auto checks = reinterpret_cast<decltype(&doorbell_shim_checks)>(dlsym(v.lib, "doorbell_shim_checks"));
  ASSERT_NE(checks, nullptr);
  // DOORBELL_ABI_PLANT=stale_wqe (ctest verbs_shim_checks_*): the same client rings past a WQE
  // it reserved but did not write; the shim reports it and the process exits 3 (the ctest
  // checks the line and the status).
  if (const char* plant = std::getenv("DOORBELL_ABI_PLANT"); plant != nullptr && std::strcmp(plant, "stale_wqe") == 0) {
    pi[0] += 1;  // reserved by "another thread", never written: the slot holds zeros
    const uint32_t after = post(0, MLX5_OPCODE_NOP, 0, 1, MLX5_WQE_CTRL_CQ_UPDATE, [](uint8_t*) {});
    ring_doorbell(0);
    // The engine stops at the unwritten WQE with an error CQE; the QP is in ERR, so the NOP
    // behind it completes only as flushed (WR_FLUSH_ERR), never as done.
    if (const mlx5::Cqe64* f = wait_cqe(0, after); f != nullptr) {
      EXPECT_EQ(f->opcode(), uint8_t(mlx5::CqeOpcode::kReqErr));
      EXPECT_EQ(reinterpret_cast<const mlx5::ErrCqe64*>(f)->syndrome, uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
    }
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10); checks(0, nullptr, 0) == 0 && std::chrono::steady_clock::now() < end;)
      std::this_thread::yield();
    char line[320] = {};
    ASSERT_EQ(checks(0, line, sizeof line), 1u);
    EXPECT_NE(std::strstr(line, "is not a whole WQE: its QPN field names another QP"), nullptr) << line;
  } else {  // the rest of the program runs only unplanted
    // A bad rkey: an error CQE, REMOTE_ACCESS_ERR (NVSHMEM treats opcode 13 as fatal).
    const uint32_t bad = post(1, MLX5_OPCODE_RDMA_WRITE, 0, 3, MLX5_WQE_CTRL_CQ_UPDATE,
                              [&](uint8_t* s) { raddr(s, dst.data(), mdst->rkey ^ 0x80), data(s + 16, src.data(), 64, msrc->lkey); });
    ring_doorbell(1);
    c = wait_cqe(1, bad);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->opcode(), uint8_t(mlx5::CqeOpcode::kReqErr));
    EXPECT_EQ(reinterpret_cast<const mlx5::ErrCqe64*>(c)->syndrome, uint8_t(mlx5::CqeSyndrome::kRemoteAccessErr));

    // A WRITE on the DCI to the DCT on this port, as NVSHMEM sends to itself: the AH's half
    // address vector with the DC key and the DCT's number, then raddr and data (ds 4).
    const uint32_t dci = post(2, MLX5_OPCODE_RDMA_WRITE, 0, 4, MLX5_WQE_CTRL_CQ_UPDATE, [&](uint8_t* s) {
      std::memcpy(s, dah.av, 16);
      reinterpret_cast<mlx5_wqe_av*>(s)->key.dc_key = htobe64(0x5623CEAF);
      reinterpret_cast<mlx5_wqe_av*>(s)->dqp_dct = htobe32(dct->qp_num);
      raddr(s + 16, dst.data() + 3584, mdst->rkey), data(s + 32, src.data() + 3584, 64, msrc->lkey);
    });
    ring_doorbell(2);
    c = wait_cqe(2, dci);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->opcode(), uint8_t(mlx5::CqeOpcode::kReq)) << "syndrome 0x" << std::hex << int(reinterpret_cast<const mlx5::ErrCqe64*>(c)->syndrome);
    EXPECT_EQ(std::memcmp(dst.data() + 3584, src.data() + 3584, 64), 0);

    // The harness's queue checks (on by default) found nothing wrong in all of the above: an
    // error CQE is the NIC's answer to a bad key, not a broken queue.
    EXPECT_EQ(checks(0, nullptr, 0), 0u);
    // The shim's counters: three doorbells, every WQE executed.
    auto stats = reinterpret_cast<decltype(&doorbell_shim_get_stats)>(dlsym(v.lib, "doorbell_shim_get_stats"));
    ASSERT_NE(stats, nullptr);
    doorbell_shim_stats s{};
    ASSERT_EQ(stats(&s), 0);
    EXPECT_EQ(s.wqes, 11u);  // 8 on QP 0, 2 on QP 1, 1 on the DCI
    EXPECT_GE(s.doorbells, 4u);  // five rings; the back-to-back two may be seen as one change
    EXPECT_LE(s.doorbells, 5u);
  }

  // Teardown in NVSHMEM's order.
  for (ibv_mr* m : {msrc, mdst, mw, mres}) EXPECT_EQ(v.dereg_mr(m), 0);
  for (int i = 0; i < kQps; ++i) EXPECT_EQ(mlx5dv_devx_obj_destroy(qp[i]), 0);
  for (int i = 0; i < kQps; ++i) EXPECT_EQ(mlx5dv_devx_obj_destroy(cq[i]), 0);
  for (mlx5dv_devx_umem* u : {u_cq, u_cqdbr, u_wq, u_qpdbr}) EXPECT_EQ(mlx5dv_devx_umem_dereg(u), 0);
  mlx5dv_devx_free_uar(uar);
  std::free(wq);
  std::free(cqmem);
  std::free(cqdbrmem);
  std::free(qpdbrmem);
  EXPECT_EQ(v.destroy_qp(dct), 0);
  EXPECT_EQ(v.destroy_ah(ah), 0);
  EXPECT_EQ(v.dealloc_pd(parent), 0);
  EXPECT_EQ(v.destroy_cq(rcq), 0);
  EXPECT_EQ(v.destroy_srq(srq), 0);
}

}  // namespace
