// Compiles the wire-format headers as device code (sm_90): a kernel that builds an
// RDMA_WRITE WQE the way GPU threads do in IBGDA. Used by the GPU checks; in CI it proves the
// headers stay device-clean.
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"

namespace doorbell::mlx5 {

__global__ void build_rdma_write_wqe(uint8_t* wq, uint16_t pi, uint32_t qpn, uint64_t laddr, uint32_t lkey,
                                     uint64_t raddr, uint32_t rkey, uint32_t len, uint64_t* doorbell_out) {
  auto* ctrl = reinterpret_cast<WqeCtrlSeg*>(wq);
  set_ctrl_seg(ctrl, pi, WqeOpcode::kRdmaWrite, 0, qpn, kCtrlCqUpdate, 3);
  set_raddr_seg(reinterpret_cast<WqeRaddrSeg*>(wq + 16), raddr, rkey);
  set_data_seg(reinterpret_cast<WqeDataSeg*>(wq + 32), len, lkey, laddr);
  *doorbell_out = doorbell_word(*ctrl);
}

}  // namespace doorbell::mlx5
