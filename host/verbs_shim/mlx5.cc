// libmlx5.so.1 of the shim: rdma-core's mlx5dv names with their symbol versions
// (libmlx5.map), each forwarding to the model in the shim's libibverbs.so.1.
#include <errno.h>

#include "host/verbs_shim/shim_api.h"

extern "C" {

int mlx5dv_init_obj(struct mlx5dv_obj* obj, uint64_t type) { return doorbell_shim_init_obj(obj, type); }
struct ibv_qp* mlx5dv_create_qp(struct ibv_context* ctx, struct ibv_qp_init_attr_ex* attr, struct mlx5dv_qp_init_attr* dv) {
  return doorbell_shim_create_qp(ctx, attr, dv);
}
bool mlx5dv_is_supported(struct ibv_device* d) { return doorbell_shim_is_supported(d); }
struct mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(struct ibv_context* ctx, uint32_t flags) { return doorbell_shim_alloc_uar(ctx, flags); }
void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar* uar) { doorbell_shim_free_uar(uar); }
int mlx5dv_devx_general_cmd(struct ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen) {
  return doorbell_shim_general_cmd(ctx, in, inlen, out, outlen);
}
struct mlx5dv_devx_obj* mlx5dv_devx_obj_create(struct ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen) {
  return doorbell_shim_obj_create(ctx, in, inlen, out, outlen);
}
int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  return doorbell_shim_obj_modify(obj, in, inlen, out, outlen);
}
int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  return doorbell_shim_obj_query(obj, in, inlen, out, outlen);
}
int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj* obj) { return doorbell_shim_obj_destroy(obj); }
int mlx5dv_devx_query_eqn(struct ibv_context* ctx, uint32_t vector, uint32_t* eqn) { return doorbell_shim_query_eqn(ctx, vector, eqn); }
struct mlx5dv_devx_umem* mlx5dv_devx_umem_reg(struct ibv_context* ctx, void* addr, size_t size, uint32_t access) {
  return doorbell_shim_umem_reg(ctx, addr, size, access);
}
struct mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(struct ibv_context* ctx, struct mlx5dv_devx_umem_in* in) {
  if (in->comp_mask & MLX5DV_UMEM_MASK_DMABUF) return errno = EOPNOTSUPP, nullptr;  // dma-buf umems are not modelled
  return doorbell_shim_umem_reg(ctx, in->addr, in->size, in->access);
}
int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem* umem) { return doorbell_shim_umem_dereg(umem); }

}  // extern "C"
