// Target 6: the verbs / mlx5dv / DEVX entry points of the shim (host/verbs_shim), called as a
// client might: PDs, MRs, CQs, SRQs, AHs, umems, UARs and DEVX objects made and destroyed in
// any order over the objects that exist, with arbitrary lengths, access flags, port and GID
// numbers, and PRM command boxes (raw bytes, or a CREATE / MODIFY / QUERY / DESTROY opcode
// with the rest arbitrary) exactly as long as claimed. Checked: no sanitizer report; rdma-core's
// conventions — a call that makes an object returns it or NULL with errno set, one that
// returns int returns 0 or a positive errno (ibv_* / DEVX) — and every object is released.
#include <fuzzer/FuzzedDataProvider.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/check.h"
#include "host/verbs_shim/shim_api.h"
#include "hw/mlx5/prm/layouts.h"

namespace {

namespace prm = doorbell::prm;

ibv_context* context() {
  static ibv_context* ctx = [] {
    setenv("DOORBELL_SHIM_QUIET", "1", 1);
    setenv("DOORBELL_SHIM_CHECKS", "0", 1);  // no queue is run here; the exit status stays libFuzzer's
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    FUZZ_CHECK(list != nullptr && n == 1, "the shim has one device (got %d, errno %d)", n, errno);
    ibv_context* c = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    FUZZ_CHECK(c != nullptr, "open_device: errno %d", errno);
    return c;
  }();
  return ctx;
}

// A destroy that the shim refused (the object is in use: EBUSY) keeps the object.
template <class T, class F>
void destroy(std::vector<T*>& v, T* p, F f, const char* what) {
  const int rc = f(p);
  FUZZ_CHECK(rc >= 0, "%s returned %d", what, rc);
  if (rc != 0) v.push_back(p);
}

// A made object, or NULL with errno set.
template <class T>
T* made(T* p, const char* what) {
  if (p == nullptr) FUZZ_CHECK(errno > 0, "%s returned NULL with errno %d", what, errno);
  return p;
}
// 0, or a positive errno.
void status(int rc, const char* what) { FUZZ_CHECK(rc >= 0, "%s returned %d", what, rc); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ibv_context* ctx = context();
  alignas(4096) static uint8_t arena[1 << 16];  // what MRs and umems register (never touched by the NIC here)
  std::vector<ibv_pd*> pds;
  std::vector<ibv_mr*> mrs;
  std::vector<ibv_cq*> cqs;
  std::vector<ibv_srq*> srqs;
  std::vector<ibv_ah*> ahs;
  std::vector<mlx5dv_devx_umem*> umems;
  std::vector<mlx5dv_devx_uar*> uars;
  std::vector<mlx5dv_devx_obj*> objs;
  auto pick = [&](auto& v) -> decltype(v.front()) {
    static typename std::remove_reference_t<decltype(v)>::value_type none{};
    return v.empty() ? none : v[in.ConsumeIntegralInRange<size_t>(0, v.size() - 1)];
  };
  auto take = [&](auto& v) {  // removes and returns one (null if none); a refused destroy puts it back
    typename std::remove_reference_t<decltype(v)>::value_type p{};
    if (v.empty()) return p;
    const size_t i = in.ConsumeIntegralInRange<size_t>(0, v.size() - 1);
    p = v[i], v[i] = v.back(), v.pop_back();
    return p;
  };
  auto box = [&](size_t max) {  // a command box: its length, then its bytes
    std::vector<uint8_t> b(in.ConsumeIntegralInRange<size_t>(0, max));
    const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(b.size());
    if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
    if (b.size() >= 2 && in.ConsumeBool()) {  // a real opcode, so the interpreter goes past its first check
      static constexpr uint16_t kOps[] = {prm::kCreateCq, prm::kCreateQp, prm::kRst2InitQp, prm::kInit2RtrQp, prm::kRtr2RtsQp,
                                          prm::kQueryQp,  prm::kQueryCq,  prm::kDestroyQp,  prm::kDestroyCq,  0x100 /* QUERY_HCA_CAP */};
      const uint16_t op = kOps[in.ConsumeIntegralInRange<size_t>(0, std::size(kOps) - 1)];
      b[0] = uint8_t(op >> 8), b[1] = uint8_t(op);
    }
    return b;
  };
  for (int steps = 0; in.remaining_bytes() > 0 && steps < 48; ++steps) {
    errno = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 17)) {
      case 0:
        if (ibv_pd* p = made(ibv_alloc_pd(ctx), "alloc_pd")) pds.push_back(p);
        break;
      case 1:
        if (ibv_pd* p = take(pds)) destroy(pds, p, ibv_dealloc_pd, "dealloc_pd");
        break;
      case 2: {
        ibv_pd* p = pick(pds);
        if (p == nullptr) break;
        const size_t off = in.ConsumeIntegralInRange<size_t>(0, sizeof arena - 1);
        const size_t len = in.ConsumeIntegralInRange<size_t>(0, sizeof arena - off);
        if (ibv_mr* m = made(ibv_reg_mr(p, arena + off, len, in.ConsumeIntegral<int>()), "reg_mr")) mrs.push_back(m);
        break;
      }
      case 3:
        if (ibv_mr* m = take(mrs)) destroy(mrs, m, ibv_dereg_mr, "dereg_mr");
        break;
      case 4:
        if (ibv_cq* c = made(ibv_create_cq(ctx, in.ConsumeIntegralInRange<int>(-4, 1 << 16), nullptr, nullptr, in.ConsumeIntegral<int>()), "create_cq"))
          cqs.push_back(c);
        break;
      case 5:
        if (ibv_cq* c = take(cqs)) destroy(cqs, c, ibv_destroy_cq, "destroy_cq");
        break;
      case 6: {
        const size_t off = in.ConsumeIntegralInRange<size_t>(0, sizeof arena - 1);
        const size_t len = in.ConsumeIntegralInRange<size_t>(0, sizeof arena - off);
        if (mlx5dv_devx_umem* u = made(mlx5dv_devx_umem_reg(ctx, arena + off, len, in.ConsumeIntegral<uint32_t>()), "umem_reg"))
          umems.push_back(u);
        break;
      }
      case 7:
        if (mlx5dv_devx_umem* u = take(umems)) destroy(umems, u, mlx5dv_devx_umem_dereg, "umem_dereg");
        break;
      case 8:
        if (mlx5dv_devx_uar* u = made(mlx5dv_devx_alloc_uar(ctx, in.ConsumeIntegral<uint32_t>()), "alloc_uar")) uars.push_back(u);
        break;
      case 9:
        if (mlx5dv_devx_uar* u = take(uars)) mlx5dv_devx_free_uar(u);
        break;
      case 10: {
        std::vector<uint8_t> cmd = box(512), out(in.ConsumeIntegralInRange<size_t>(0, 4096));
        status(mlx5dv_devx_general_cmd(ctx, cmd.data(), cmd.size(), out.data(), out.size()), "devx_general_cmd");
        break;
      }
      case 11: {
        std::vector<uint8_t> cmd = box(1024), out(in.ConsumeIntegralInRange<size_t>(0, 512));
        if (mlx5dv_devx_obj* o = made(mlx5dv_devx_obj_create(ctx, cmd.data(), cmd.size(), out.data(), out.size()), "devx_obj_create"))
          objs.push_back(o);
        break;
      }
      case 12: {
        mlx5dv_devx_obj* o = pick(objs);
        if (o == nullptr) break;
        std::vector<uint8_t> cmd = box(1024), out(in.ConsumeIntegralInRange<size_t>(0, 1024));
        if (in.ConsumeBool()) status(mlx5dv_devx_obj_modify(o, cmd.data(), cmd.size(), out.data(), out.size()), "devx_obj_modify");
        else status(mlx5dv_devx_obj_query(o, cmd.data(), cmd.size(), out.data(), out.size()), "devx_obj_query");
        break;
      }
      case 13:
        if (mlx5dv_devx_obj* o = take(objs)) destroy(objs, o, mlx5dv_devx_obj_destroy, "devx_obj_destroy");
        break;
      case 14: {
        ibv_port_attr pa{};
        status(ibv_query_port(ctx, in.ConsumeIntegral<uint8_t>(), &pa), "query_port");
        ibv_gid gid{};
        const int g = ibv_query_gid(ctx, in.ConsumeIntegral<uint8_t>(), in.ConsumeIntegral<int>(), &gid);  // 0, or -1 with errno
        FUZZ_CHECK(g == 0 || (g == -1 && errno > 0), "query_gid returned %d, errno %d", g, errno);
        uint32_t eqn = 0;
        status(mlx5dv_devx_query_eqn(ctx, in.ConsumeIntegral<uint32_t>(), &eqn), "query_eqn");
        break;
      }
      case 15: {
        ibv_pd* p = pick(pds);
        if (p == nullptr) break;
        ibv_srq_init_attr sa{};
        sa.attr.max_wr = in.ConsumeIntegral<uint32_t>(), sa.attr.max_sge = in.ConsumeIntegral<uint32_t>();
        if (ibv_srq* s = made(ibv_create_srq(p, &sa), "create_srq")) srqs.push_back(s);
        break;
      }
      case 16: {
        ibv_pd* p = pick(pds);
        if (p == nullptr) break;
        ibv_ah_attr aa{};
        aa.dlid = in.ConsumeIntegral<uint16_t>(), aa.port_num = in.ConsumeIntegral<uint8_t>(), aa.is_global = in.ConsumeBool();
        if (ibv_ah* a = made(ibv_create_ah(p, &aa), "create_ah")) ahs.push_back(a);
        break;
      }
      case 17:
        if (ibv_srq* s = take(srqs)) destroy(srqs, s, ibv_destroy_srq, "destroy_srq");
        if (ibv_ah* a = take(ahs)) destroy(ahs, a, ibv_destroy_ah, "destroy_ah");
        break;
    }
  }
  // Everything the input made goes, objects before what they may name; DEVX objects in
  // rounds (a CQ a QP names is busy until the QP goes).
  for (size_t round = 0; !objs.empty() && round < 64; ++round) {
    std::vector<mlx5dv_devx_obj*> left;
    for (mlx5dv_devx_obj* o : objs) destroy(left, o, mlx5dv_devx_obj_destroy, "devx_obj_destroy");
    objs.swap(left);
  }
  FUZZ_CHECK(objs.empty(), "%zu DEVX objects could not be destroyed", objs.size());
  // With nothing left that names them, none may be refused.
  auto gone = [](int rc, const char* what) { FUZZ_CHECK(rc == 0, "%s returned %d with nothing using the object", what, rc); };
  for (ibv_ah* a : ahs) gone(ibv_destroy_ah(a), "destroy_ah");
  for (ibv_srq* s : srqs) gone(ibv_destroy_srq(s), "destroy_srq");
  for (ibv_cq* c : cqs) gone(ibv_destroy_cq(c), "destroy_cq");
  for (ibv_mr* m : mrs) gone(ibv_dereg_mr(m), "dereg_mr");
  for (mlx5dv_devx_umem* u : umems) gone(mlx5dv_devx_umem_dereg(u), "umem_dereg");
  for (mlx5dv_devx_uar* u : uars) mlx5dv_devx_free_uar(u);
  for (ibv_pd* p : pds) gone(ibv_dealloc_pd(p), "dealloc_pd");
  return 0;
}
