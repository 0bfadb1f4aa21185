// libibverbs.so.1 of the shim: the verbs calls NVSHMEM's IB transports make (device list,
// open, queries, PD, MR, CQ, SRQ, AH, and DCTs through mlx5dv_create_qp), answered by the
// process's NIC model. Every exported name keeps rdma-core's prototype (verbs.h) and symbol
// version (libibverbs.map); what is not modelled fails with EOPNOTSUPP, never silently.
#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <set>
#include <thread>

#include "host/verbs_shim/objects.h"
#include "hw/mlx5_devx/driver.h"
#include "host/verbs_shim/shim_api.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace doorbell;
using namespace doorbell::shim;

namespace doorbell::shim {

void say(const std::string& what) {
  static std::set<std::string> said;
  if (std::getenv("DOORBELL_SHIM_VERBOSE") != nullptr && said.insert(what.substr(0, what.find(':'))).second)
    std::fprintf(stderr, "doorbell verbs shim: %s\n", what.c_str());
}

}  // namespace doorbell::shim

namespace {

constexpr int kMaxCqe = 1 << 22;  // what query_device reports

template <class T>
T* fail(int err, const std::string& why) {
  say(why);
  errno = err;
  return nullptr;
}
int fail_code(int err, const std::string& why) {
  say(why);
  return err;
}

ibv_device* the_device() {
  static ibv_device dev = [] {
    ibv_device d{};
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(d.name, sizeof d.name, "mlx5_0");
    std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs0");
    std::snprintf(d.dev_path, sizeof d.dev_path, "/sys/class/infiniband_verbs/uverbs0");
    std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "/sys/class/infiniband/mlx5_0");
    return d;
  }();
  return &dev;
}

int query_port_ex(ibv_context* ctx, uint8_t port, ibv_port_attr* a, size_t size) {
  if (port != 1) return fail_code(EINVAL, "query_port: the model has one port (1)");
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = 1;  // one GID: nothing to choose, no sysfs GID types to read
  p.max_msg_sz = 1u << 30;
  p.pkey_tbl_len = 1;
  p.lid = context_of(ctx)->model->nic().lid();
  p.active_width = 2;  // 4x
  p.active_speed = 32; // NDR-ish; informational
  p.phys_state = 5;    // LinkUp
  p.link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::memcpy(a, &p, std::min(size, sizeof p));
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  if (attr == nullptr || attr->pd == nullptr) return fail<ibv_pd>(EINVAL, "alloc_parent_domain: no PD");
  auto* p = new Pd{};
  p->pd.context = ctx;
  p->pd.handle = attr->pd->handle;
  p->pdn = reinterpret_cast<Pd*>(attr->pd)->pdn;  // a parent domain is its PD for the model
  return &p->pd;
}

}  // namespace

extern "C" {

int ibv_fork_init(void) { return 0; }

ibv_device** ibv_get_device_list(int* num) {
  static ibv_device* list[2];
  std::string why;
  if (Model::get(&why) == nullptr) {
    std::fprintf(stderr, "%s\n", why.c_str());  // no device, and why
    if (num != nullptr) *num = 0;
    list[0] = nullptr;
    return list;
  }
  list[0] = the_device(), list[1] = nullptr;
  if (num != nullptr) *num = 1;
  return list;
}

void ibv_free_device_list(ibv_device**) {}
const char* ibv_get_device_name(ibv_device* d) { return d != nullptr ? d->name : nullptr; }
__be64 ibv_get_device_guid(ibv_device*) { return htobe64(0x0002c90300000000ull | 1); }

ibv_context* ibv_open_device(ibv_device* d) {
  std::string why;
  Model* m = Model::get(&why);
  if (m == nullptr || d != the_device()) return fail<ibv_context>(ENODEV, "open_device: " + why);
  auto* c = new Context{};
  {
    std::lock_guard<std::mutex> lock(m->mu);
    c->devx = std::make_unique<mock_nic::ModelDevx>(m->nic(), "mlx5_0");
  }
  c->model = m;
  std::memset(&c->vctx, 0, sizeof c->vctx);
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.query_port = query_port_ex;
  c->vctx.alloc_parent_domain = alloc_parent_domain;
  c->vctx.context.device = d;
  c->vctx.context.cmd_fd = -1;
  c->vctx.context.async_fd = -1;
  c->vctx.context.num_comp_vectors = 1;
  c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  return &c->vctx.context;
}

int ibv_close_device(ibv_context* ctx) {
  Context* c = context_of(ctx);
  {
    std::lock_guard<std::mutex> lock(c->model->mu);
    c->devx.reset();
  }
  delete c;
  return 0;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  const mock_nic::ModelDevx& x = *context_of(ctx)->devx;
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "doorbell-model");
  a->node_guid = ibv_get_device_guid(ctx->device);
  a->vendor_id = 0x02c9;  // Mellanox
  a->vendor_part_id = 4129;
  a->max_mr_size = ~0ull;
  a->page_size_cap = 0xfffff000;
  a->max_qp = int(x.info().max_qp);
  a->max_qp_wr = int(x.info().max_qp_wr);
  a->max_sge = 30;
  a->max_cq = int(x.info().max_cq);
  a->max_cqe = kMaxCqe;
  a->max_mr = int(x.info().max_mr);
  a->max_pd = 1 << 24;
  a->max_qp_rd_atom = a->max_qp_init_rd_atom = 16;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_srq = 1 << 16;
  a->max_srq_wr = 1 << 15;
  a->max_srq_sge = 1;
  a->max_pkeys = 1;
  a->phys_port_cnt = 1;
  return 0;
}

int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* a) {
  return query_port_ex(ctx, port, reinterpret_cast<ibv_port_attr*>(a), sizeof(ibv_port_attr));
}

int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index != 0) return errno = EINVAL, say("query_gid: one port, one GID (index 0)"), -1;  // rdma-core: -1 and errno
  const auto g = context_of(ctx)->model->nic().gid();
  std::memcpy(gid->raw, g.data(), 16);
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) return errno = EINVAL, -1;
  *pkey = htobe16(0xffff);
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Result<uint32_t> pdn = c->devx->alloc_pd();
  if (!pdn) return fail<ibv_pd>(ENOMEM, "alloc_pd: " + pdn.status().to_string());
  auto* p = new Pd{};
  p->pd.context = ctx;
  p->pd.handle = *pdn;
  p->pdn = *pdn;
  return &p->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  Pd* p = reinterpret_cast<Pd*>(pd);
  delete p;  // the model's PD lives as long as its context (a parent domain shares it)
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned int access) {
  Context* c = context_of(pd->context);
  if (iova != reinterpret_cast<uint64_t>(addr)) return fail<ibv_mr>(EOPNOTSUPP, "reg_mr: an iova other than the address is not modelled");
  std::lock_guard<std::mutex> lock(c->model->mu);
  if (Status st = c->model->map(addr, len); !st) return fail<ibv_mr>(EINVAL, "reg_mr: " + st.to_string());
  const uint32_t acc = access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  Result<devx::Mr> r = c->devx->reg_mr(reinterpret_cast<Pd*>(pd)->pdn, addr, len, acc);  // IBV_ACCESS_* bits are the model's
  if (!r) {
    c->model->unmap(addr);
    return fail<ibv_mr>(EINVAL, "reg_mr: " + r.status().to_string());
  }
  auto* m = new Mr{};
  m->mr.context = pd->context, m->mr.pd = pd, m->mr.addr = addr, m->mr.length = len;
  m->mr.handle = r->lkey, m->mr.lkey = r->lkey, m->mr.rkey = r->rkey;
  return &m->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return ibv_reg_mr_iova2(pd, addr, len, reinterpret_cast<uint64_t>(addr), unsigned(access));
}
ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t len, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, len, iova, unsigned(access));
}

// A dma-buf registration (NVSHMEM's choice for GPU memory where CUDA exports dma-bufs): the
// model reaches device memory by its virtual address through the CUDA Dma, so it registers
// `iova` — the address the program exported the dma-buf from (cuMemGetHandleForAddressRange) —
// and checks only that the fd is open (the fd's pages are not readable from the CPU).
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  if (fcntl(fd, F_GETFD) == -1) return fail<ibv_mr>(EBADF, "reg_dmabuf_mr: fd " + std::to_string(fd) + " is not open");
  if (!context_of(pd->context)->model->has_dma())  // device memory the engine could not touch
    return fail<ibv_mr>(EOPNOTSUPP, "reg_dmabuf_mr: device memory needs DOORBELL_SHIM_DMA=cuda");
  (void)offset;  // the offset into the dma-buf matches iova's offset into the allocation
  return ibv_reg_mr_iova2(pd, reinterpret_cast<void*>(iova), len, iova, unsigned(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  Context* c = context_of(mr->context);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Status st = c->devx->dereg_mr(devx::Mr{mr->lkey, mr->rkey, mr->handle});
  if (!st) return fail_code(EINVAL, "dereg_mr: " + st.to_string());
  c->model->unmap(mr->addr);
  delete reinterpret_cast<Mr*>(mr);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  if (cqe <= 0 || cqe > kMaxCqe) return fail<ibv_cq>(EINVAL, "create_cq: " + std::to_string(cqe) + " entries, not in 1.." + std::to_string(kMaxCqe));
  Context* c = context_of(ctx);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Result<devx::Obj> o = c->devx->create_verbs_cq(uint32_t(cqe));
  if (!o) return fail<ibv_cq>(ENOMEM, "create_cq: " + o.status().to_string());
  auto* q = new Cq{};
  q->cq.context = ctx, q->cq.channel = channel, q->cq.cq_context = cq_context, q->cq.cqe = cqe, q->cq.handle = o->id;
  q->cqn = o->id;
  return &q->cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
  auto* q = reinterpret_cast<Cq*>(cq);
  Context* c = context_of(cq->context);
  std::lock_guard<std::mutex> lock(c->model->mu);
  if (Status st = c->devx->destroy_verbs_cq(devx::Obj{q->cqn, 0}); !st)
    return fail_code(st.code() == Errc::kNotFound ? EINVAL : EBUSY, "destroy_cq: " + st.to_string());
  delete q;
  return 0;
}

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  Context* c = context_of(pd->context);
  std::lock_guard<std::mutex> lock(c->model->mu);
  Result<devx::Obj> o = c->devx->create_srq(reinterpret_cast<Pd*>(pd)->pdn, attr != nullptr ? attr->attr.max_wr : 1);
  if (!o) return fail<ibv_srq>(ENOMEM, "create_srq: " + o.status().to_string());
  auto* s = new Srq{};
  s->srq.context = pd->context, s->srq.pd = pd, s->srq.handle = o->id;
  s->srq.srq_context = attr != nullptr ? attr->srq_context : nullptr;
  s->srqn = o->id;
  return &s->srq;
}

int ibv_destroy_srq(ibv_srq* srq) {
  delete reinterpret_cast<Srq*>(srq);
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (attr->is_global) return fail<ibv_ah>(EOPNOTSUPP, "create_ah: global routing (RoCE) is not modelled; the port is InfiniBand");
  auto* a = new Ah{};
  a->ah.context = pd->context, a->ah.pd = pd;
  std::memset(&a->av, 0, sizeof a->av);
  a->av.rlid = htobe16(attr->dlid);
  a->av.stat_rate_sl = uint8_t(attr->sl & 0xf);
  return &a->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  delete reinterpret_cast<Ah*>(ah);
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd*, ibv_qp_init_attr*) {
  return fail<ibv_qp>(EOPNOTSUPP, "create_qp: verbs QPs are not modelled (DEVX QPs are)");
}

// A DCT: INIT takes its access flags, RTR makes the NIC's DCT (its number becomes qp_num).
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  auto* q = reinterpret_cast<Qp*>(qp);
  if (mask & IBV_QP_ACCESS_FLAGS) q->access = attr->qp_access_flags;
  if (mask & IBV_QP_PATH_MTU) q->mtu = uint8_t(attr->path_mtu);
  if (mask & IBV_QP_MIN_RNR_TIMER) q->min_rnr = attr->min_rnr_timer;
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR && !q->made) {
    Context* c = context_of(qp->context);
    std::lock_guard<std::mutex> lock(c->model->mu);
    devx::DctSpec s;
    s.pdn = q->pdn, s.cqn = q->cqn, s.srqn = q->srqn, s.dc_key = q->dc_key;
    s.remote_write = (q->access & IBV_ACCESS_REMOTE_WRITE) != 0;
    s.remote_read = (q->access & IBV_ACCESS_REMOTE_READ) != 0;
    s.remote_atomic = (q->access & IBV_ACCESS_REMOTE_ATOMIC) != 0;
    s.mtu = q->mtu >= 1 && q->mtu <= 5 ? q->mtu : 5, s.min_rnr_nak = q->min_rnr;
    Result<devx::Obj> d = devx::Driver(*c->devx).create_dct(s);
    if (!d) return say("modify_qp: CREATE_DCT: " + d.status().to_string()), EINVAL;
    q->dct = *d, q->made = true;
    qp->qp_num = qp->handle = d->id;
  }
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = qp->state;
  if (init != nullptr) std::memset(init, 0, sizeof *init);
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  auto* q = reinterpret_cast<Qp*>(qp);
  if (q->made) {
    Context* c = context_of(qp->context);
    std::lock_guard<std::mutex> lock(c->model->mu);
    if (Status st = devx::Driver(*c->devx).destroy_dct(q->dct); !st) return say("destroy_qp: " + st.to_string()), EBUSY;
  }
  delete q;
  return 0;
}

// The model raises no asynchronous events a program can read: a thread waiting for one waits.
int ibv_get_async_event(ibv_context*, ibv_async_event*) {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
void ibv_ack_async_event(ibv_async_event*) {}
const char* ibv_wc_status_str(ibv_wc_status) { return "unknown"; }

}  // extern "C"
