// The NVSHMEM 3.4.5 peer of the post-path benchmark: NVSHMEM's own IBGDA device code
// (non_abi/device/pt-to-pt/ibgda_device.cuh, its thread-scope RMA path `ibgda_rma_thread`
// and `ibgda_quiet`) runs against the same rings and fake NIC as doorbell, its device state
// gpu/nvshmem_rig.cuh's. Built only with -DDOORBELL_WITH_NVSHMEM and NVSHMEM's include directory.
#include "bench/post_bench.h"

#include <vector>

#include "gpu/cuda_check.h"

namespace doorbell::postbench {

#ifndef DOORBELL_WITH_NVSHMEM
void nvshmem_prepare(const Rings&, const Shape&) {}
void nvshmem_launch(const Shape&, cudaStream_t) {}
void nvshmem_phases(uint32_t, unsigned long long*, cudaStream_t) {}
void nvshmem_release() {}
const char* nvshmem_missing() { return "built without NVSHMEM headers (gpu/run-post-bench finds them)"; }
}  // namespace doorbell::postbench
#else
const char* nvshmem_missing() { return nullptr; }
}  // namespace doorbell::postbench

#include "device/nvshmem_device_macros.h"
#include "device_host_transport/nvshmem_common_ibgda.h"
// Without relocatable device code NVSHMEM's headers leave the IBGDA state to the includer
// (its device library defines it); the generic device state is a per-file constant.
static __constant__ nvshmemi_ibgda_device_state_t nvshmemi_ibgda_device_state_d;
#include "non_abi/device/pt-to-pt/ibgda_device.cuh"
#include "gpu/nvshmem_rig.cuh"

namespace doorbell::postbench {
namespace {

// NVSHMEM declares its device functions for the device pass only.
#ifdef __CUDA_ARCH__
__device__ nvshmemi_ibgda_device_qp_t* peer_qp(uint32_t id) {
  nvshmemi_ibgda_device_state_t* s = ibgda_get_state();
  return &s->globalmem.rcs[1 * s->num_rc_per_pe + id % s->num_rc_per_pe];  // PE-major, PE 1
}

#endif

// One thread's puts, NVSHMEM's thread path (ibgda_rma_thread without a warp to coalesce)
// cut into its phases.
__global__ void nvshmem_phase_kernel(uint32_t iters, unsigned long long* out) {
#ifdef __CUDA_ARCH__
  const uint64_t local = uint64_t(nvshmemi_device_state_d.heap_base);
  unsigned long long sum[kPhases] = {};
  for (uint32_t i = 0; i < iters; ++i) {
    long long t0 = clock64();
    bool shared;
    nvshmemi_ibgda_device_qp_t* qp = ibgda_get_qp(1, &shared);
    __be32 lkey, rkey;
    size_t lchunk, rchunk;
    bool sysmem;
    uint64_t raddr;
    ibgda_get_lkey(local, &lkey, &lchunk, &sysmem, qp->dev_idx);
    ibgda_get_raddr_rkey(local, 1, 1, &raddr, &rkey, &rchunk, qp->dev_idx);
    long long t1 = clock64();
    const uint64_t idx = ibgda_reserve_wqe_slots(qp, 1, shared);
    long long t2 = clock64();
    void* wqes[2] = {ibgda_get_wqe_ptr(qp, idx), ibgda_get_wqe_ptr(qp, idx + 1)};
    ibgda_write_rdma_write_wqe<false>(qp, nullptr, local, lkey, raddr, rkey, kPutBytes, idx, MLX5_WQE_CTRL_CQ_UPDATE, wqes);
    long long t3 = clock64();
    ibgda_submit_requests<true>(qp, idx, 1);
    long long t4 = clock64();
    sum[0] += t1 - t0, sum[1] += t2 - t1, sum[2] += t3 - t2, sum[3] += t4 - t3;
  }
  ibgda_quiet(peer_qp(0));
  for (int k = 0; k < kPhases; ++k) out[k] = sum[k];
#endif
}

template <Posting kPosting>
__global__ void nvshmem_kernel(uint32_t iters) {
#ifdef __CUDA_ARCH__
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t off = ((uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPutBytes) % kHeapBytes;
  const uint64_t local = uint64_t(nvshmemi_device_state_d.heap_base) + off;
  for (uint32_t i = 0; i < iters; ++i) {
    if constexpr (kPosting == Posting::kWarp) {
      ibgda_rma_thread<NVSHMEMI_OP_PUT, true, false>(local, local, kPutBytes, 1, 1);
    } else if constexpr (kPosting == Posting::kLane0) {
      if (lane == 0) ibgda_rma_thread<NVSHMEMI_OP_PUT, true, false>(local, local, kPutBytes, 1, 1);
    } else {
      for (uint32_t k = 0; k < 32; ++k)
        if (lane == k) ibgda_rma_thread<NVSHMEMI_OP_PUT, true, false>(local, local, kPutBytes, 1, 1);
    }
  }
  ibgda_quiet(peer_qp(kPosting != Posting::kInTurn ? blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32 : blockIdx.x));
#endif
}

// Device allocations of the prepared state, freed by nvshmem_release.
std::vector<void*> g_allocs;

}  // namespace

void nvshmem_prepare(const Rings& r, const Shape& sh) {
  g_allocs = nvshmem_rig_state(r, sh.nqps, sh.by_warp() ? NVSHMEMI_IBGDA_DEVICE_QP_MAP_TYPE_WARP : NVSHMEMI_IBGDA_DEVICE_QP_MAP_TYPE_CTA);
  // An empty launch (nothing posted, quiet returns at once): a first launch may resize local
  // memory, which waits for an idle device, and the running fake NIC never lets it.
  nvshmem_launch(Shape{sh.name, sh.ctas, sh.warps, sh.nqps, sh.posting, 0}, 0);
  CHECK(cudaDeviceSynchronize());
}

void nvshmem_release() {
  for (void* p : g_allocs) CHECK(cudaFree(p));
  g_allocs.clear();
}

void nvshmem_phases(uint32_t iters, unsigned long long* out, cudaStream_t stream) {
  nvshmem_phase_kernel<<<1, 1, 0, stream>>>(iters, out);
  CHECK(cudaGetLastError());
}

void nvshmem_launch(const Shape& sh, cudaStream_t stream) {
  if (sh.posting == Posting::kWarp) nvshmem_kernel<Posting::kWarp><<<sh.ctas, sh.warps * 32, 0, stream>>>(sh.iters);
  else if (sh.posting == Posting::kLane0) nvshmem_kernel<Posting::kLane0><<<sh.ctas, sh.warps * 32, 0, stream>>>(sh.iters);
  else nvshmem_kernel<Posting::kInTurn><<<sh.ctas, sh.warps * 32, 0, stream>>>(sh.iters);
  CHECK(cudaGetLastError());
}

}  // namespace doorbell::postbench
#endif
