// The queues of one NIC for IBGDA-style use (SPEC §3): N RC QPs, each with its own send CQ,
// laid out as one contiguous allocation per kind — all CQ buffers (initialised to 0xff:
// invalid owner), all doorbell records, all WQ buffers — each registered once as a umem, with
// per-object offsets. Memory comes from GPU memory (default, as NVSHMEM does) or host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hw/mlx5/cqe.h"
#include "hw/mlx5_devx/driver.h"

namespace doorbell::devx {

// Where queue memory comes from.
class QueueMemory {
 public:
  virtual ~QueueMemory() = default;
  // Page-aligned, zeroed bytes in GPU memory (gpu) or host memory.
  virtual Result<void*> alloc(size_t bytes, bool gpu) = 0;
  virtual void free(void* p) = 0;
  // Set n bytes at p (device memory cannot be written with a host memset).
  virtual Status fill(void* p, uint8_t byte, size_t n);
};

// Page-aligned host memory; GPU memory needs a CUDA-aware provider.
class HostQueueMemory : public QueueMemory {
 public:
  Result<void*> alloc(size_t bytes, bool gpu) override;
  void free(void* p) override;
};

struct QueueSetSpec {
  uint32_t num_qps = 1;
  uint32_t log_sq_size = 6;  // WQEBBs per QP; each send CQ gets as many CQEs
  bool collapsed_cq = true;
  bool gpu_memory = true;
  uint32_t pdn = 0;
  uint32_t uar_page = 0;
  uint32_t srqn = 0, recv_cqn = 0;
  uint32_t eqn = 0;
  std::vector<bool> dci;  // QP i is a DC initiator where dci[i] (RC where the mask is short)
};

class QueueSet {
 public:
  static Result<std::unique_ptr<QueueSet>> create(DevxContext& ctx, QueueMemory& mem, const QueueSetSpec& spec);
  ~QueueSet();
  QueueSet(const QueueSet&) = delete;
  QueueSet& operator=(const QueueSet&) = delete;

  uint32_t size() const { return spec_.num_qps; }
  const QueueSetSpec& spec() const { return spec_; }
  const Obj& qp(uint32_t i) const { return qps_[i]; }
  const Obj& cq(uint32_t i) const { return cqs_[i]; }
  uint8_t* wq(uint32_t i) const { return wq_ + uint64_t(i) * wq_stride_; }
  mlx5::QpDoorbellRecord* qp_dbr(uint32_t i) const;
  mlx5::Cqe64* cq_buf(uint32_t i) const;
  mlx5::CqDoorbellRecord* cq_dbr(uint32_t i) const;

  // Region geometry (what was allocated and registered).
  static constexpr uint64_t kDbrStride = 64;
  uint64_t wq_stride() const { return wq_stride_; }

 private:
  QueueSet(DevxContext& ctx, QueueMemory& mem, const QueueSetSpec& s) : ctx_(ctx), mem_(mem), spec_(s) {}
  Status build();

  DevxContext& ctx_;
  QueueMemory& mem_;
  QueueSetSpec spec_;
  uint8_t *cq_mem_ = nullptr, *dbr_mem_ = nullptr, *wq_ = nullptr;
  uint64_t cq_bytes_ = 0, dbr_bytes_ = 0, wq_bytes_ = 0, wq_stride_ = 0;
  Umem cq_umem_, dbr_umem_, wq_umem_;
  std::vector<Obj> cqs_, qps_;
};

}  // namespace doorbell::devx
