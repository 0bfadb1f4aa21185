// The verbs objects the shim hands out: rdma-core's public structs (their layouts are the
// ABI programs compiled against rdma-core read) first, the model's handles after.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>

#include "host/verbs_shim/model.h"

namespace doorbell::shim {

struct Context {
  std::unique_ptr<mock_nic::ModelDevx> devx;  // this context's DEVX uid
  Model* model = nullptr;
  verbs_context vctx;  // ends with the ibv_context programs see
};
inline Context* context_of(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(Context, vctx) - offsetof(verbs_context, context));
}

struct Pd {
  ibv_pd pd;
  uint32_t pdn = 0;
};
struct Mr {
  ibv_mr mr;
};
struct Cq {
  ibv_cq cq;
  uint32_t cqn = 0;
};
struct Srq {
  ibv_srq srq;
  uint32_t srqn = 0;
};
struct Ah {
  ibv_ah ah;
  mlx5_wqe_av av;  // what a DC WQE carries for this destination
};
// A DCT (mlx5dv_create_qp). As rdma-core does, the NIC's DCT is made when the QP enters
// RTR (CREATE_DCT, with the access flags INIT set); its number is then the QP's number.
struct Qp {
  ibv_qp qp;
  uint32_t pdn = 0, srqn = 0, cqn = 0;
  uint64_t dc_key = 0;
  unsigned access = 0;  // IBV_ACCESS_* from INIT
  uint8_t mtu = 5, min_rnr = 12;
  devx::Obj dct{};
  bool made = false;
};

// Errors: errno and NULL / an errno value, as libibverbs returns them; the first line of why
// goes to stderr once per kind when DOORBELL_SHIM_VERBOSE is set.
void say(const std::string& what);

}  // namespace doorbell::shim
