// The rdma-core backend of the DEVX seam: verbs for PD / MR / SRQ / CQ, libmlx5's DEVX calls
// for umem, UAR and PRM objects. Built and linked in CI; exercised only where an mlx5 device
// exists (there is none on the CI or development machines).
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "hw/mlx5_devx/discovery.h"

namespace doorbell::devx {

std::string pci_path_of(const std::string& dev);

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class RdmaCoreDevx final : public DevxContext {
 public:
  RdmaCoreDevx(ibv_context* ctx, DeviceInfo info, std::string no_devx_reason)
      : ctx_(ctx), info_(std::move(info)), no_devx_(std::move(no_devx_reason)) {}
  ~RdmaCoreDevx() override {
    for (auto& [n, s] : srqs_) ibv_destroy_srq(s);
    for (auto& [n, c] : vcqs_) ibv_destroy_cq(c);
    for (auto& [n, p] : pds_) ibv_dealloc_pd(p);
    ibv_close_device(ctx_);
  }

  const DeviceInfo& info() const override { return info_; }

  Result<PortInfo> query_port(uint8_t port) override {
    ibv_port_attr a{};
    if (ibv_query_port(ctx_, port, &a) != 0) return Status(Errc::kInternal, errno_text("ibv_query_port"));
    PortInfo p;
    p.port = port;
    p.up = a.state == IBV_PORT_ACTIVE;
    p.ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET;
    p.lid = a.lid;
    p.active_mtu = uint8_t(a.active_mtu);
    ibv_gid g{};
    if (ibv_query_gid(ctx_, port, 0, &g) == 0) std::memcpy(p.gid.data(), g.raw, 16);
    return p;
  }

  Result<uint32_t> query_eqn() override {
    if (Status s = need_devx("query_eqn"); !s) return s;
    uint32_t eqn = 0;
    if (mlx5dv_devx_query_eqn(ctx_, 0, &eqn) != 0) return Status(Errc::kInternal, errno_text("mlx5dv_devx_query_eqn"));
    return eqn;
  }

  Result<uint32_t> alloc_pd() override {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    if (pd == nullptr) return Status(Errc::kNoResource, errno_text("ibv_alloc_pd"));
    mlx5dv_pd dv{};
    mlx5dv_obj o{};
    o.pd.in = pd;
    o.pd.out = &dv;
    if (mlx5dv_init_obj(&o, MLX5DV_OBJ_PD) != 0) {
      ibv_dealloc_pd(pd);
      return Status(Errc::kNotSupported, "PD number not available: " + no_devx_);
    }
    pds_[dv.pdn] = pd;
    return dv.pdn;
  }

  Status dealloc_pd(uint32_t pdn) override {
    auto it = pds_.find(pdn);
    if (it == pds_.end()) return Status(Errc::kNotFound, "dealloc_pd: unknown PD");
    if (ibv_dealloc_pd(it->second) != 0) return Status(Errc::kBadState, errno_text("ibv_dealloc_pd"));
    pds_.erase(it);
    return {};
  }

  Result<Umem> umem_reg(void* addr, size_t size, uint32_t access) override {
    if (Status s = need_devx("umem_reg"); !s) return s;
    mlx5dv_devx_umem* u = mlx5dv_devx_umem_reg(ctx_, addr, size, access);
    if (u == nullptr) return Status(Errc::kBadParam, errno_text("mlx5dv_devx_umem_reg"));
    return Umem{u->umem_id, reinterpret_cast<uint64_t>(u)};
  }

  Status umem_dereg(const Umem& u) override {
    if (mlx5dv_devx_umem_dereg(reinterpret_cast<mlx5dv_devx_umem*>(u.handle)) != 0)
      return Status(Errc::kBadState, errno_text("mlx5dv_devx_umem_dereg"));
    return {};
  }

  Result<Uar> alloc_uar() override {
    if (Status s = need_devx("alloc_uar"); !s) return s;
    mlx5dv_devx_uar* u = mlx5dv_devx_alloc_uar(ctx_, MLX5DV_UAR_ALLOC_TYPE_BF);
    if (u == nullptr) return Status(Errc::kNoResource, errno_text("mlx5dv_devx_alloc_uar"));
    return Uar{u->page_id, reinterpret_cast<uint64_t>(u->reg_addr), reinterpret_cast<uint64_t>(u)};
  }

  Status free_uar(const Uar& u) override {
    mlx5dv_devx_free_uar(reinterpret_cast<mlx5dv_devx_uar*>(u.handle));
    return {};
  }

  Result<Mr> reg_mr(uint32_t pdn, void* addr, size_t len, uint32_t access) override {
    auto it = pds_.find(pdn);
    if (it == pds_.end()) return Status(Errc::kNotFound, "reg_mr: unknown PD");
    ibv_mr* mr = ibv_reg_mr(it->second, addr, len, int(access));
    if (mr == nullptr) return Status(Errc::kBadParam, errno_text("ibv_reg_mr"));
    return Mr{mr->lkey, mr->rkey, reinterpret_cast<uint64_t>(mr)};
  }

  Status dereg_mr(const Mr& m) override {
    if (ibv_dereg_mr(reinterpret_cast<ibv_mr*>(m.handle)) != 0) return Status(Errc::kBadState, errno_text("ibv_dereg_mr"));
    return {};
  }

  Result<Obj> create_srq(uint32_t pdn, uint32_t max_wr) override {
    auto it = pds_.find(pdn);
    if (it == pds_.end()) return Status(Errc::kNotFound, "create_srq: unknown PD");
    ibv_srq_init_attr a{};
    a.attr.max_wr = max_wr;
    a.attr.max_sge = 1;
    ibv_srq* s = ibv_create_srq(it->second, &a);
    if (s == nullptr) return Status(Errc::kNoResource, errno_text("ibv_create_srq"));
    mlx5dv_srq dv{};
    dv.comp_mask = MLX5DV_SRQ_MASK_SRQN;
    mlx5dv_obj o{};
    o.srq.in = s;
    o.srq.out = &dv;
    if (mlx5dv_init_obj(&o, MLX5DV_OBJ_SRQ) != 0) {
      ibv_destroy_srq(s);
      return Status(Errc::kNotSupported, "SRQ number not available: " + no_devx_);
    }
    srqs_[dv.srqn] = s;
    return Obj{dv.srqn, reinterpret_cast<uint64_t>(s)};
  }

  Result<Obj> create_verbs_cq(uint32_t cqe) override {
    ibv_cq* c = ibv_create_cq(ctx_, int(cqe), nullptr, nullptr, 0);
    if (c == nullptr) return Status(Errc::kNoResource, errno_text("ibv_create_cq"));
    mlx5dv_cq dv{};
    mlx5dv_obj o{};
    o.cq.in = c;
    o.cq.out = &dv;
    if (mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ) != 0) {
      ibv_destroy_cq(c);
      return Status(Errc::kNotSupported, "CQ number not available: " + no_devx_);
    }
    vcqs_[dv.cqn] = c;
    return Obj{dv.cqn, reinterpret_cast<uint64_t>(c)};
  }
  Status destroy_verbs_cq(const Obj& cq) override {
    auto it = vcqs_.find(cq.id);
    if (it == vcqs_.end()) return Status(Errc::kNotFound, "destroy_verbs_cq: not a CQ of this context");
    if (ibv_destroy_cq(it->second) != 0) return Status(Errc::kBadState, errno_text("ibv_destroy_cq"));
    vcqs_.erase(it);
    return {};
  }

  Result<Obj> obj_create(const void* in, size_t inlen, void* out, size_t outlen) override {
    if (Status s = need_devx("obj_create"); !s) return s;
    mlx5dv_devx_obj* o = mlx5dv_devx_obj_create(ctx_, in, inlen, out, outlen);
    if (o == nullptr) return Status(Errc::kInternal, errno_text("mlx5dv_devx_obj_create"));
    // CREATE_CQ and CREATE_QP both report the new object's number in bits 0x48..0x60.
    const auto* w = static_cast<const uint8_t*>(out);
    const uint32_t id = (uint32_t(w[9]) << 16) | (uint32_t(w[10]) << 8) | w[11];
    return Obj{id, reinterpret_cast<uint64_t>(o)};
  }

  Status obj_modify(const Obj& o, const void* in, size_t inlen, void* out, size_t outlen) override {
    if (Status s = need_devx("obj_modify"); !s) return s;
    if (mlx5dv_devx_obj_modify(reinterpret_cast<mlx5dv_devx_obj*>(o.handle), in, inlen, out, outlen) != 0)
      return Status(Errc::kInternal, errno_text("mlx5dv_devx_obj_modify"));
    return {};
  }

  Status obj_query(const Obj& o, const void* in, size_t inlen, void* out, size_t outlen) override {
    if (Status s = need_devx("obj_query"); !s) return s;
    if (mlx5dv_devx_obj_query(reinterpret_cast<mlx5dv_devx_obj*>(o.handle), in, inlen, out, outlen) != 0)
      return Status(Errc::kInternal, errno_text("mlx5dv_devx_obj_query"));
    return {};
  }

  Status obj_destroy(const Obj& o, const void* /*destroy_in: the kernel keeps its own*/, size_t) override {
    if (Status s = need_devx("obj_destroy"); !s) return s;
    if (mlx5dv_devx_obj_destroy(reinterpret_cast<mlx5dv_devx_obj*>(o.handle)) != 0)
      return Status(Errc::kBadState, errno_text("mlx5dv_devx_obj_destroy"));
    return {};
  }

 private:
  Status need_devx(const char* op) const {
    if (info_.devx) return {};
    return Status(Errc::kNotSupported, std::string(op) + ": " + no_devx_);
  }

  ibv_context* ctx_;
  DeviceInfo info_;
  std::string no_devx_;
  std::map<uint32_t, ibv_pd*> pds_;
  std::map<uint32_t, ibv_srq*> srqs_;
  std::map<uint32_t, ibv_cq*> vcqs_;
};

}  // namespace

Result<std::unique_ptr<DevxContext>> open_device(const std::string& name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return Status(Errc::kNotFound, "no RDMA device found (ibv_get_device_list failed: " + std::string(std::strerror(errno)) + ")");
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i)
    if (name == ibv_get_device_name(list[i])) dev = list[i];
  if (dev == nullptr) {
    ibv_free_device_list(list);
    return Status(Errc::kNotFound, "no RDMA device named " + name);
  }
  DeviceInfo info;
  info.name = name;
  info.pci_path = pci_path_of(name);
  const bool mlx5 = mlx5dv_is_supported(dev);
  // The provider: mlx5, or the device name without its instance number (rxe0 -> rxe).
  info.provider = mlx5 ? "mlx5" : name.substr(0, name.find_last_not_of("0123456789") + 1);
  std::string no_devx;
  ibv_context* ctx = nullptr;
  if (mlx5) {
    mlx5dv_context_attr a{};
    a.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
    ctx = mlx5dv_open_device(dev, &a);
    info.devx = ctx != nullptr;
    if (ctx == nullptr) no_devx = "DEVX could not be enabled on " + name + " (" + std::strerror(errno) + ")";
  }
  if (ctx == nullptr) ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (ctx == nullptr) return Status(Errc::kInternal, "cannot open " + name + ": " + std::strerror(errno));
  if (!mlx5) no_devx = "DEVX is not supported by provider " + info.provider + " (device " + name + ")";
  ibv_device_attr a{};
  if (ibv_query_device(ctx, &a) == 0) {
    info.max_qp = uint32_t(a.max_qp);
    info.max_cq = uint32_t(a.max_cq);
    info.max_qp_wr = uint32_t(a.max_qp_wr);
    info.max_mr = uint32_t(a.max_mr);
    info.atomics = a.atomic_cap != IBV_ATOMIC_NONE;
    info.ports = a.phys_port_cnt;
  }
  return std::unique_ptr<DevxContext>(new RdmaCoreDevx(ctx, std::move(info), std::move(no_devx)));
}

}  // namespace doorbell::devx
