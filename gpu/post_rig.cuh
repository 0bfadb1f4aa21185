// The device side of gpu/post_rig.h: the rings in GPU memory, an instant fake NIC that
// completes whatever a QP's doorbell record announces, doorbell's device state over the
// rings, and a run that starts the NIC, launches a post kernel beside it and stops the NIC.
// Shared by the post-path benchmark and the WQE comparison; NVSHMEM's state over the same
// rings is gpu/nvshmem_rig.cuh.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/ibgda/dev_state_builder.h"
#include "gpu/cuda_check.h"
#include "gpu/post_rig.h"
#include "hw/cuda/gpu_caps.h"
#include "hw/mlx5/cqe.h"

namespace doorbell::post_rig {

// Thread q serves QP q. A new DBR value completes everything below it at once (one CQE for
// the newest WQE, as a collapsed CQ shows it); no bytes move. `stop` is host memory.
// (static: each file that includes it has its own; an anonymous namespace here trips nvcc's
// stubs when the includer has one too.)
static __global__ void fake_nic(Rings r, uint32_t nqps, const volatile uint32_t* stop) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= nqps) return;
  const volatile uint64_t* dbr = reinterpret_cast<const volatile uint64_t*>(r.dbr + q * 8);
  volatile uint64_t* tail = reinterpret_cast<volatile uint64_t*>(r.cqe + q * 64 + 56);
  uint16_t seen = 0;
  for (uint32_t idle = 0;; ++idle) {
    const uint16_t pi = mlx5::dbr_send(*dbr);
    if (pi != seen) {
      seen = pi, idle = 0;
      // The CQE of WQE pi - 1, of the first pass of a one-entry CQ: its last word only.
      *tail = mlx5::cqe_words(mlx5::requester_completion(0, uint16_t(pi - 1), 0, 0, 0, 0), 0, 0).w7;
    } else if ((idle & 1023) == 1023 && *stop != 0) {
      return;
    }
  }
}

// doorbell's device state over the rings: PE 0 posts to PE 1 on nqps QPs (QP-major), both
// PEs' QP q over ring q, the keys of post_rig.h; with `dc` every QP is a DCI and each PE has
// its DCT (dctn, lid). `allocs` gets its device allocations, for the caller to free once the
// fake NIC has stopped.
inline ibgda::DevState doorbell_rig_state(const Rings& r, uint32_t nqps, std::vector<void*>& allocs, bool dc = false) {
  const uint32_t npes = 2, log_depth = uint32_t(__builtin_ctz(kDepth));
  ibgda::Mvars* mvars = dalloc<ibgda::Mvars>(npes * nqps);
  ibgda::DevStateBuilder b({0, npes, nqps, 1, ibgda::QpLayout::kQpMajor, log_depth, kIbufSlots, kHeapBytes, false});
  for (uint32_t q = 0; q < nqps; ++q)
    for (uint32_t pe = 0; pe < npes; ++pe) {
      ibgda::QpRing g;
      g.qpn = 0x100 + q;
      g.wq = r.wq + size_t(q) * kDepth * 64;
      g.dbr = r.dbr + q * 8;
      g.bf = r.bf + q * 8;
      g.cqe = reinterpret_cast<const mlx5::Cqe64*>(r.cqe + q * 64);
      g.mv = mvars + b.slot(q, pe);
      g.ibuf = r.ibuf + size_t(q) * kIbufBytes, g.ibuf_lkey = ibuf_key(q);
      g.dci = dc;
      b.set_qp(false, q, pe, g);
    }
  std::vector<uint64_t> bases = {uint64_t(r.heap[0]), uint64_t(r.heap[1])};
  ibgda::ChunkReg regs[2];
  for (uint32_t p = 0; p < npes; ++p) regs[p].addr = bases[p], regs[p].keys[0] = heap_key(p);
  b.set_chunk(0, regs, kHeapBytes);
  ibgda::DevState s = b.placed([](const auto& v) { return dcopy(v); });
  s.group_switches = dalloc<uint64_t>(ibgda::kQpPools);
  s.opt.num_requests_in_batch = kBatch;
  s.opt.nic_buf_on_gpumem = true;  // as NVSHMEM's state says: rings and DBRs are GPU memory
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  s.opt.may_skip_cst = cuda_exec::gpu_direct_writes_ordered(dev);  // Hopper: ordered, no CSTs
  s.heap_bases = dcopy(bases);
  s.error = dalloc<uint64_t>(1);
  allocs = {mvars, s.qps, s.group_switches, s.heap_bases, s.error};
  if (dc) {
    ibgda::DcTarget* t = dcopy(std::vector<ibgda::DcTarget>{{ibgda::kDcKey, dctn(0), lid(0)}, {ibgda::kDcKey, dctn(1), lid(1)}});
    s.dcts = t;
    allocs.push_back(t);
  }
  return s;
}

// POST_TRACE=1: each step of a run on stderr (to find where a run hangs).
inline void trace(const char* who, const char* what) {
  static const bool on = std::getenv("POST_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "[%s] %s\n", who, what);
}

struct PostRig {
  Rings r;
  volatile uint32_t* stop = nullptr;
  cudaStream_t nic_stream, work_stream;
  cudaEvent_t begin, end, nic_done;

  PostRig() {
    r.wq = dalloc<uint8_t>(size_t(kMaxQps) * kDepth * 64);
    r.dbr = dalloc<uint64_t>(kMaxQps * 8);
    r.cqe = dalloc<uint8_t>(kMaxQps * 64);
    r.bf = dalloc<uint64_t>(kMaxQps * 8);
    r.heap[0] = dalloc<uint8_t>(kHeapBytes);
    r.heap[1] = dalloc<uint8_t>(kHeapBytes);
    r.ibuf = dalloc<uint8_t>(size_t(kMaxQps) * kIbufBytes);
    CHECK(cudaHostAlloc(const_cast<uint32_t**>(&stop), 4, cudaHostAllocMapped));
    CHECK(cudaStreamCreateWithFlags(&nic_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&work_stream, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&begin));
    CHECK(cudaEventCreate(&end));
    CHECK(cudaEventCreate(&nic_done));
  }

  // Wait for `e` at most 20 s: a post path that hangs (NVSHMEM's waits have no timeout)
  // must not hang the program.
  static void wait(cudaEvent_t e, const char* who, const char* what, const char* label) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    cudaError_t r;
    while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("%s: hung %s on \"%s\" (20 s); stopping\n", who, what, label);
        std::fflush(stdout);
        std::_Exit(3);
      }
    }
    CHECK(r);
  }

  // Fresh rings (WQEBBs filled with `wq_fill`), the fake NIC started on nqps QPs, `launch`
  // timed on the work stream; returns its ms. Nothing here may synchronise the device while
  // the NIC runs (no cudaMalloc / cudaFree), and a kernel launched here must have been
  // launched once before (a first launch may resize local memory, which waits for an idle
  // device that the running NIC never gives it).
  template <class Launch>
  float run(uint32_t nqps, const char* who, const char* label, Launch launch, int wq_fill = 0) {
    trace(who, "rings");
    CHECK(cudaMemset(r.wq, wq_fill, size_t(kMaxQps) * kDepth * 64));
    CHECK(cudaMemset(r.dbr, 0, kMaxQps * 8 * 8));
    CHECK(cudaMemset(r.cqe, 0xff, kMaxQps * 64));  // no CQE yet: wqe_counter 0xffff
    CHECK(cudaMemset(r.ibuf, 0, size_t(kMaxQps) * kIbufBytes));
    CHECK(cudaDeviceSynchronize());
    *stop = 0;
    fake_nic<<<(nqps + 127) / 128, 128, 0, nic_stream>>>(r, nqps, stop);
    CHECK(cudaGetLastError());
    trace(who, "nic started");
    CHECK(cudaEventRecord(begin, work_stream));
    launch();
    CHECK(cudaEventRecord(end, work_stream));
    trace(who, "launched");
    wait(end, who, "posting", label);
    trace(who, "posted");
    *stop = 1;
    CHECK(cudaEventRecord(nic_done, nic_stream));
    wait(nic_done, who, "stopping the fake NIC", label);
    trace(who, "nic stopped");
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    return ms;
  }
};

}  // namespace doorbell::post_rig
