#include "hw/mlx5_devx/queue_set.h"

#include <cstdlib>
#include <cstring>

namespace doorbell::devx {

namespace {
constexpr uint64_t kPage = 4096;
constexpr uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr uint32_t kUmemAccess = 1;  // IBV_ACCESS_LOCAL_WRITE: the NIC writes CQEs and reads WQEs
}  // namespace

Result<void*> HostQueueMemory::alloc(size_t bytes, bool gpu) {
  if (gpu) return Status(Errc::kNotSupported, "GPU memory for NIC queues needs the CUDA memory provider; use host memory");
  void* p = nullptr;
  if (posix_memalign(&p, kPage, round_up(bytes, kPage)) != 0) return Status(Errc::kNoResource, "out of host memory");
  std::memset(p, 0, bytes);
  return p;
}

void HostQueueMemory::free(void* p) { std::free(p); }

Status QueueMemory::fill(void* p, uint8_t byte, size_t n) {
  std::memset(p, byte, n);
  return {};
}

mlx5::QpDoorbellRecord* QueueSet::qp_dbr(uint32_t i) const {
  return reinterpret_cast<mlx5::QpDoorbellRecord*>(dbr_mem_ + (uint64_t(spec_.num_qps) + i) * kDbrStride);
}
mlx5::Cqe64* QueueSet::cq_buf(uint32_t i) const {
  return reinterpret_cast<mlx5::Cqe64*>(cq_mem_ + (uint64_t(64) << spec_.log_sq_size) * i);
}
mlx5::CqDoorbellRecord* QueueSet::cq_dbr(uint32_t i) const {
  return reinterpret_cast<mlx5::CqDoorbellRecord*>(dbr_mem_ + uint64_t(i) * kDbrStride);
}

Result<std::unique_ptr<QueueSet>> QueueSet::create(DevxContext& ctx, QueueMemory& mem, const QueueSetSpec& spec) {
  if (spec.num_qps == 0) return Status(Errc::kBadParam, "queue set: no QPs");
  if (spec.log_sq_size < 2 || spec.log_sq_size > 15) return Status(Errc::kBadParam, "queue set: log_sq_size out of 2..15");
  std::unique_ptr<QueueSet> q(new QueueSet(ctx, mem, spec));
  if (Status st = q->build(); !st) return st;
  return q;
}

Status QueueSet::build() {
  const uint32_t n = spec_.num_qps;
  // Regions: CQ buffers (one CQE per WQEBB), DBRs (CQs first, then QPs), WQ buffers.
  cq_bytes_ = round_up((uint64_t(64) << spec_.log_sq_size) * n, kPage);
  dbr_bytes_ = round_up(kDbrStride * 2 * n, kPage);
  wq_stride_ = round_up(uint64_t(mlx5::kWqebb) << spec_.log_sq_size, kPage);
  wq_bytes_ = wq_stride_ * n;
  for (auto [ptr, bytes] : {std::pair{&cq_mem_, cq_bytes_}, {&dbr_mem_, dbr_bytes_}, {&wq_, wq_bytes_}}) {
    Result<void*> m = mem_.alloc(bytes, spec_.gpu_memory);
    if (!m) return m.status();
    *ptr = static_cast<uint8_t*>(*m);
  }
  if (Status st = mem_.fill(cq_mem_, 0xff, cq_bytes_); !st) return st;  // every CQE invalid until written
  for (auto [umem, ptr, bytes] : {std::tuple{&cq_umem_, cq_mem_, cq_bytes_}, {&dbr_umem_, dbr_mem_, dbr_bytes_}, {&wq_umem_, wq_, wq_bytes_}}) {
    Result<Umem> u = ctx_.umem_reg(ptr, bytes, kUmemAccess);
    if (!u) return u.status();
    *umem = *u;
  }
  Driver drv(ctx_);
  for (uint32_t i = 0; i < n; ++i) {
    CqSpec c;
    c.log_size = spec_.log_sq_size;
    c.collapsed = spec_.collapsed_cq;
    c.buf_umem = cq_umem_.id;
    c.buf_offset = uint64_t(reinterpret_cast<uint8_t*>(cq_buf(i)) - cq_mem_);
    c.dbr_umem = dbr_umem_.id;
    c.dbr_offset = uint64_t(reinterpret_cast<uint8_t*>(cq_dbr(i)) - dbr_mem_);
    c.uar_page = spec_.uar_page;
    c.eqn = spec_.eqn;
    Result<Obj> cq = drv.create_cq(c);
    if (!cq) return cq.status();
    cqs_.push_back(*cq);

    RcQpSpec s;
    s.pdn = spec_.pdn;
    s.log_sq_size = spec_.log_sq_size;
    s.wq_umem = wq_umem_.id;
    s.wq_offset = uint64_t(i) * wq_stride_;
    s.dbr_umem = dbr_umem_.id;
    s.dbr_offset = uint64_t(reinterpret_cast<uint8_t*>(qp_dbr(i)) - dbr_mem_);
    s.send_cqn = cq->id;
    s.srqn = spec_.srqn;
    s.recv_cqn = spec_.recv_cqn;
    s.uar_page = spec_.uar_page;
    s.dci = i < spec_.dci.size() && spec_.dci[i];
    Result<Obj> qp = drv.create_rc_qp(s);
    if (!qp) return qp.status();
    qps_.push_back(*qp);
  }
  return {};
}

QueueSet::~QueueSet() {
  Driver drv(ctx_);
  for (const Obj& q : qps_) (void)drv.destroy_qp(q);
  for (const Obj& c : cqs_) (void)drv.destroy_cq(c);
  for (Umem* u : {&cq_umem_, &dbr_umem_, &wq_umem_})
    if (u->id != 0) (void)ctx_.umem_dereg(*u);
  for (uint8_t* p : {cq_mem_, dbr_mem_, wq_})
    if (p != nullptr) mem_.free(p);
}

}  // namespace doorbell::devx
