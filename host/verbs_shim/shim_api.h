// What libibverbs.so.1 of the shim exports beside verbs, under its own version node
// (DOORBELL_SHIM_1): the mlx5dv calls libmlx5.so.1 forwards (the model's state lives in one
// library), and the counters a program or test may read.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct doorbell_shim_stats {
  uint64_t doorbells, wqes, actions, remote_calls, remote_served;
};
int doorbell_shim_get_stats(struct doorbell_shim_stats* out);
// The harness's checks on the program's queues (DOORBELL_SHIM_CHECKS, on by default): how many
// fired; with buf, the i-th finding's line (truncated to len, NUL-terminated).
uint64_t doorbell_shim_checks(uint64_t i, char* buf, size_t len);
// Where the time went since the start or the last restart (one line per part: the client's
// proxy, the doorbell watch, the engine, the link, the device copies) into buf (truncated to
// len, NUL-terminated); restart != 0 starts the next interval. Returns the text's length.
size_t doorbell_shim_profile(char* buf, size_t len, int restart);

int doorbell_shim_init_obj(struct mlx5dv_obj* obj, uint64_t obj_type);
struct ibv_qp* doorbell_shim_create_qp(struct ibv_context* ctx, struct ibv_qp_init_attr_ex* attr, struct mlx5dv_qp_init_attr* dv);
bool doorbell_shim_is_supported(struct ibv_device* device);
struct mlx5dv_devx_uar* doorbell_shim_alloc_uar(struct ibv_context* ctx, uint32_t flags);
void doorbell_shim_free_uar(struct mlx5dv_devx_uar* uar);
int doorbell_shim_general_cmd(struct ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen);
struct mlx5dv_devx_obj* doorbell_shim_obj_create(struct ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen);
int doorbell_shim_obj_modify(struct mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen);
int doorbell_shim_obj_query(struct mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen);
int doorbell_shim_obj_destroy(struct mlx5dv_devx_obj* obj);
int doorbell_shim_query_eqn(struct ibv_context* ctx, uint32_t vector, uint32_t* eqn);
struct mlx5dv_devx_umem* doorbell_shim_umem_reg(struct ibv_context* ctx, void* addr, size_t size, uint32_t access);
int doorbell_shim_umem_dereg(struct mlx5dv_devx_umem* umem);

#ifdef __cplusplus
}
#endif
