// The mlx5dv half of the shim (libmlx5.so.1 forwards here): DEVX commands go to the model's
// PRM interpreter (ModelDevx) as they would to firmware; UARs are pages of real memory the
// engine thread watches; umems and MRs map program memory into the model by identity.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "host/verbs_shim/objects.h"
#include "host/verbs_shim/shim_api.h"
#include "hw/mlx5/prm/layouts.h"
#include "hw/mlx5/wqe.h"

using namespace doorbell;
using namespace doorbell::shim;

namespace {

struct DevxObj {  // struct mlx5dv_devx_obj is opaque to programs
  Context* c;
  devx::Obj o;
  uint16_t create_op;
};
struct Uar {
  mlx5dv_devx_uar pub;
  Context* c;
  devx::Uar model;
  Model::UarPage* page;
};
struct Umem {
  mlx5dv_devx_umem pub;
  Context* c;
  devx::Umem model;
  void* addr;
};

// A command's outcome as rdma-core's DEVX calls give it: 0, or an errno with the PRM status
// and syndrome in the reply (programs read them there).
int devx_errno(const Status& st, const std::string& what) {
  if (st) return 0;
  say(what + ": " + st.to_string());
  return st.code() == Errc::kNotFound ? ENOENT : EINVAL;
}

}  // namespace

extern "C" {

int doorbell_shim_get_stats(doorbell_shim_stats* out) {
  Model* m = Model::get();
  if (m == nullptr) return ENODEV;
  const Stats s = m->stats();
  *out = {s.doorbells, s.wqes, s.actions, s.remote_calls, s.remote_served};
  return 0;
}

uint64_t doorbell_shim_checks(uint64_t i, char* buf, size_t len) {
  Model* m = Model::get();
  if (m == nullptr) return 0;
  std::lock_guard<std::mutex> lock(m->mu);
  const std::vector<std::string>& lines = m->nic().audit();
  if (buf != nullptr && len != 0 && i < lines.size()) std::snprintf(buf, len, "%s", lines[i].c_str());
  return lines.size();
}

size_t doorbell_shim_profile(char* buf, size_t len, int restart) {
  Model* m = Model::get();
  if (m == nullptr) return 0;
  const std::string p = m->profile(restart != 0);
  if (buf != nullptr && len != 0) std::snprintf(buf, len, "%s", p.c_str());
  return p.size();
}

bool doorbell_shim_is_supported(ibv_device* d) { return d != nullptr && std::strcmp(d->name, "mlx5_0") == 0; }

int doorbell_shim_init_obj(mlx5dv_obj* obj, uint64_t type) {
  if (type & MLX5DV_OBJ_PD) obj->pd.out->pdn = reinterpret_cast<Pd*>(obj->pd.in)->pdn, obj->pd.out->comp_mask = 0;
  if (type & MLX5DV_OBJ_CQ) {
    std::memset(obj->cq.out, 0, sizeof *obj->cq.out);
    obj->cq.out->cqn = reinterpret_cast<Cq*>(obj->cq.in)->cqn;
    obj->cq.out->cqe_size = 64;
    obj->cq.out->cqe_cnt = uint32_t(obj->cq.in->cqe);
  }
  if (type & MLX5DV_OBJ_SRQ) {
    const uint64_t want = obj->srq.out->comp_mask;
    std::memset(obj->srq.out, 0, sizeof *obj->srq.out);
    if (want & MLX5DV_SRQ_MASK_SRQN) obj->srq.out->srqn = reinterpret_cast<Srq*>(obj->srq.in)->srqn, obj->srq.out->comp_mask = MLX5DV_SRQ_MASK_SRQN;
  }
  if (type & MLX5DV_OBJ_AH) obj->ah.out->av = &reinterpret_cast<Ah*>(obj->ah.in)->av, obj->ah.out->comp_mask = 0;
  if (type & (MLX5DV_OBJ_QP | MLX5DV_OBJ_RWQ | MLX5DV_OBJ_DM)) {
    say("init_obj: verbs QPs, RWQs and DM are not modelled");
    return EOPNOTSUPP;
  }
  return 0;
}

// A DCT: its PD, SRQ, receive CQ and key now; the NIC's DCT at RTR (ibv_modify_qp).
ibv_qp* doorbell_shim_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr, mlx5dv_qp_init_attr* dv) {
  if (dv == nullptr || !(dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) || dv->dc_init_attr.dc_type != MLX5DV_DCTYPE_DCT) {
    say("create_qp: only DCTs are made through mlx5dv_create_qp here (RC and DCI QPs through DEVX)");
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (attr->pd == nullptr || attr->srq == nullptr || attr->recv_cq == nullptr) {
    say("create_qp: a DCT needs a PD, an SRQ and a receive CQ");
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new Qp{};
  q->qp.context = ctx, q->qp.pd = attr->pd, q->qp.send_cq = attr->send_cq, q->qp.recv_cq = attr->recv_cq, q->qp.srq = attr->srq;
  q->qp.qp_type = attr->qp_type, q->qp.state = IBV_QPS_RESET;
  q->pdn = reinterpret_cast<Pd*>(attr->pd)->pdn, q->srqn = reinterpret_cast<Srq*>(attr->srq)->srqn;
  q->cqn = reinterpret_cast<Cq*>(attr->recv_cq)->cqn, q->dc_key = dv->dc_init_attr.dct_access_key;
  return &q->qp;
}

mlx5dv_devx_uar* doorbell_shim_alloc_uar(ibv_context* ctx, uint32_t) {  // BF, NC or NC_DEDICATED: one kind of page here
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Result<devx::Uar> u = c->devx->alloc_uar();
  if (!u) return errno = ENOMEM, nullptr;
  auto* r = new Uar{};
  r->c = c, r->model = *u, r->page = c->model->add_uar(u->page_id);
  r->pub.base_addr = r->page->mem;
  r->pub.reg_addr = r->page->mem + mlx5::kBfOffset;
  r->pub.page_id = u->page_id;
  return &r->pub;
}

void doorbell_shim_free_uar(mlx5dv_devx_uar* uar) {
  auto* r = reinterpret_cast<Uar*>(uar);
  std::lock_guard<std::mutex> lock(r->c->model->mu);
  (void)r->c->devx->free_uar(r->model);
  r->c->model->remove_uar(r->page);
  delete r;
}

int doorbell_shim_general_cmd(ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen) {
#ifdef DOORBELL_PLANT  // planted for fuzz/shim_fuzz: a reply box shorter than the status header taken as 16 bytes
  outlen = outlen < 16 ? 16 : outlen;
#endif
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  return devx_errno(c->devx->general_cmd(in, inlen, out, outlen), "devx_general_cmd");
}

mlx5dv_devx_obj* doorbell_shim_obj_create(ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen) {
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Result<devx::Obj> o = c->devx->obj_create(in, inlen, out, outlen);
  if (!o) return errno = devx_errno(o.status(), "devx_obj_create"), nullptr;
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  if (op == prm::kCreateQp) c->model->count_qp(o->id);
  if (op == prm::kCreateCq) c->model->count_cq(o->id);
  return reinterpret_cast<mlx5dv_devx_obj*>(new DevxObj{c, *o, op});
}

int doorbell_shim_obj_modify(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  auto* d = reinterpret_cast<DevxObj*>(obj);
  std::lock_guard<std::mutex> lock(d->c->model->mu);
  return devx_errno(d->c->devx->obj_modify(d->o, in, inlen, out, outlen), "devx_obj_modify");
}

int doorbell_shim_obj_query(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  auto* d = reinterpret_cast<DevxObj*>(obj);
  std::lock_guard<std::mutex> lock(d->c->model->mu);
  return devx_errno(d->c->devx->obj_query(d->o, in, inlen, out, outlen), "devx_obj_query");
}

// The destroy command the object's kind takes (the kernel builds it from the create).
int doorbell_shim_obj_destroy(mlx5dv_devx_obj* obj) {
  auto* d = reinterpret_cast<DevxObj*>(obj);
  prm::Buf<prm::qp_by_number_in> cmd{};
  if (d->create_op == prm::kCreateQp) {
    DB_SET(qp_by_number_in, cmd.data(), opcode, prm::kDestroyQp);
    DB_SET(qp_by_number_in, cmd.data(), qpn, d->o.id);
  } else {
    DB_SET(cq_by_number_in, cmd.data(), opcode, prm::kDestroyCq);
    DB_SET(cq_by_number_in, cmd.data(), cqn, d->o.id);
  }
  std::lock_guard<std::mutex> lock(d->c->model->mu);
  if (d->create_op == prm::kCreateQp) d->c->model->retire_qp(d->o.id);
  const int rc = devx_errno(d->c->devx->obj_destroy(d->o, cmd.data(), cmd.size()), "devx_obj_destroy");
  if (rc == 0) delete d;
  return rc;
}

int doorbell_shim_query_eqn(ibv_context*, uint32_t, uint32_t* eqn) {
  *eqn = 0;  // completion events are not modelled: one EQ number for every CQ
  return 0;
}

mlx5dv_devx_umem* doorbell_shim_umem_reg(ibv_context* ctx, void* addr, size_t size, uint32_t access) {
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  if (Status st = c->model->map(addr, size); !st) return errno = devx_errno(st, "devx_umem_reg"), nullptr;
  Result<devx::Umem> u = c->devx->umem_reg(addr, size, access);
  if (!u) {
    c->model->unmap(addr);
    return errno = devx_errno(u.status(), "devx_umem_reg"), nullptr;
  }
  auto* r = new Umem{};
  r->pub.umem_id = u->id, r->c = c, r->model = *u, r->addr = addr;
  return &r->pub;
}

int doorbell_shim_umem_dereg(mlx5dv_devx_umem* umem) {
  auto* r = reinterpret_cast<Umem*>(umem);
  std::lock_guard<std::mutex> lock(r->c->model->mu);
  if (int rc = devx_errno(r->c->devx->umem_dereg(r->model), "devx_umem_dereg"); rc != 0) return rc;
  r->c->model->unmap(r->addr);
  delete r;
  return 0;
}

}  // extern "C"
