// NVSHMEM 3.4.5's IBGDA device state over the post rig's rings (gpu/post_rig.h), filled the
// way its host transport fills it for RC QPs with NIC buffers in GPU memory: PE 0 posts to
// PE 1, PE-major QPs (PE 0's exist but are never used: a PE has no RC QP to itself), the
// keys and ibufs of post_rig.h, no DCIs. Include it after NVSHMEM's headers and the
// including file's own `nvshmemi_ibgda_device_state_d` (without relocatable device code
// both device states are per-file constants, and this copies into that file's).
#pragma once

#include <cstring>
#include <vector>

#include "core/ibgda/state.h"
#include "gpu/cuda_check.h"
#include "gpu/post_rig.h"

namespace doorbell::post_rig {

// `map`: NVSHMEM's rc_map_type (which QP a thread's CTA or warp gets); `may_skip_cst`: the
// GPU orders PCIe writes (no CST after READs and fetches). Returns the device allocations,
// for the caller to free once nothing runs on them.
// `dc`: no RC QPs; `nrc` shared DCIs instead (QP q over ring q) and a DCT per PE
// (post_rig.h's dctn and lid, NVSHMEM's key), whose half AV each WQE carries.
inline std::vector<void*> nvshmem_rig_state(const Rings& r, uint32_t nrc, nvshmemi_ibgda_device_qp_map_type_t map,
                                            bool may_skip_cst = true, bool dc = false) {
  const uint32_t npes = 2;
  nvshmemi_device_host_state_t dev{};
  nvshmemi_ibgda_device_state_t st{};
  std::vector<void*> peer_bases = {r.heap[0], r.heap[1]};
  void** dpeer = dcopy(peer_bases);
  dev.mype = 0, dev.npes = int(npes), dev.node_mype = 0, dev.node_npes = int(npes);
  dev.heap_base = r.heap[0], dev.heap_size = kHeapBytes, dev.peer_heap_base_remote = dpeer;
  dev.symmetric_heap_kind = 0, dev.enable_rail_opt = 0;

  // (Plain arrays: nvcc 13 fails on std::vector of NVSHMEM's anonymous-struct typedefs.)
  const uint32_t n = dc ? nrc : npes * nrc;
  auto* qps = new nvshmemi_ibgda_device_qp_t[n]();
  auto* cqs = new nvshmemi_ibgda_device_cq_t[n]();
  nvshmemi_ibgda_device_qp_t* dqps = dalloc<nvshmemi_ibgda_device_qp_t>(n);
  nvshmemi_ibgda_device_cq_t* dcqs = dalloc<nvshmemi_ibgda_device_cq_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t q = i % nrc;  // both PEs' QP q share ring q; only PE 1's are posted to
    nvshmemi_ibgda_device_qp_t& qp = qps[i];
    nvshmemi_init_ibgda_device_qp(qp);
    qp.qp_type = dc ? NVSHMEMI_IBGDA_DEVICE_QP_TYPE_DCI : NVSHMEMI_IBGDA_DEVICE_QP_TYPE_RC;
    qp.qpn = 0x100 + q;
    qp.dev_idx = 0;
    qp.ibuf.nslots = kIbufSlots;
    qp.ibuf.buf = r.ibuf + size_t(q) * kIbufBytes;
    qp.ibuf.lkey = qp.ibuf.rkey = htobe32(ibuf_key(q));
    qp.tx_wq.nwqes = kDepth;
    qp.tx_wq.wqe = r.wq + size_t(q) * kDepth * 64;
    qp.tx_wq.dbrec = reinterpret_cast<__be32*>(r.dbr + q * 8) + 1;  // send counter
    qp.tx_wq.bf = r.bf + q * 8;
    qp.tx_wq.cq = dcqs + i;
    std::memset(&qp.mvars, 0, sizeof(qp.mvars));
    qp.mvars.version = (1 << 16) + sizeof(nvshmemi_ibgda_device_qp_management_t);
    qp.tx_wq.prod_idx = &dqps[i].mvars.tx_wq.prod_idx;
    nvshmemi_ibgda_device_cq_t& cq = cqs[i];
    nvshmemi_init_ibgda_device_cq(cq);
    cq.qp_type = qp.qp_type;
    cq.cqe = r.cqe + q * 64;
    cq.prod_idx = &dqps[i].mvars.tx_wq.prod_idx;
    cq.cons_idx = &dqps[i].mvars.tx_wq.cons_idx;
    cq.resv_head = &dqps[i].mvars.tx_wq.resv_head;
    cq.ready_head = &dqps[i].mvars.tx_wq.ready_head;
    cq.cqn = 0x200 + q, cq.ncqes = kDepth, cq.qpn = qp.qpn;
    cq.dbrec = nullptr;
  }
  CHECK(cudaMemcpy(dqps, qps, n * sizeof(qps[0]), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dcqs, cqs, n * sizeof(cqs[0]), cudaMemcpyHostToDevice));
  delete[] qps;
  delete[] cqs;

  nvshmemi_init_ibgda_device_state(st);
  st.num_shared_dcis = 0, st.num_exclusive_dcis = 0, st.ndcts_per_pe = 0;
  st.num_qp_groups = nrc, st.num_dct_groups = 0;
  st.num_rc_per_pe = nrc;
  st.rc_map_type = map;
  st.num_requests_in_batch = kBatch;
  st.log2_cumem_granularity = 21;
  st.num_devices_initialized = 1;
  st.nic_buf_on_gpumem = true;
  st.support_half_av_seg = false;
  st.may_skip_cst = may_skip_cst;
  st.use_async_postsend = false;
  st.constmem.lkeys[0] = {htobe32(heap_key(0)), uint64_t(r.heap[0]) + kHeapBytes};  // absolute end
  st.constmem.rkeys[1] = {htobe32(heap_key(1)), kHeapBytes};                         // offset end, PE 1
  st.globalmem.qp_group_switches = dalloc<uint8_t>(nrc);
  st.globalmem.cqs = dcqs;
  st.globalmem.rcs = dqps;
  if (dc) {
    st.num_rc_per_pe = 0, st.globalmem.rcs = nullptr, st.globalmem.dcis = dqps;
    st.num_shared_dcis = nrc, st.dci_map_type = map;
    st.ndcts_per_pe = 1, st.num_dct_groups = 1;
    st.support_half_av_seg = true;
    for (uint32_t p = 0; p < npes; ++p) {
      nvshmemi_ibgda_device_dct_t& av = st.constmem.dcts[p];  // dct id pe * ndcts_per_pe
      std::memset(&av, 0, sizeof av);
      av.key.dc_key = htobe64(ibgda::kDcKey);
      av.dqp_dct = htobe32(dctn(p));  // ext 0: the half AV
      av.rlid = htobe16(lid(p));
    }
  }
  CHECK(cudaMemcpyToSymbol(nvshmemi_device_state_d, &dev, sizeof(dev)));
  CHECK(cudaMemcpyToSymbol(nvshmemi_ibgda_device_state_d, &st, sizeof(st)));
  return {dqps, dcqs, dpeer, st.globalmem.qp_group_switches};
}

}  // namespace doorbell::post_rig
