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
struct Qp {  // a DCT (mlx5dv_create_qp): numbered and moved through states, not executed
  ibv_qp qp;
};

// Errors: errno and NULL / an errno value, as libibverbs returns them; the first line of why
// goes to stderr once per kind when DOORBELL_SHIM_VERBOSE is set.
void say(const std::string& what);

}  // namespace doorbell::shim
