// The NIC model behind the DEVX seam: decodes the PRM command buffers the mlx5 driver builds,
// checks them as firmware would (lengths, umem ids and ranges, object ownership, the QP state
// machine), creates the model's CQs and QPs from them, and answers with PRM replies (object
// ids, or status + syndrome). Each instance is one device context (its own uid); objects of
// another context are refused. It also provides queue memory: host memory mapped into the
// model's address space at its own address, tagged as GPU or host memory.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "hw/mlx5_devx/devx_context.h"
#include "hw/mlx5_devx/queue_set.h"
#include "hw/mock_nic/devx/syndromes.h"
#include "hw/mock_nic/nic.h"

namespace doorbell::mock_nic {

class ModelDevx final : public devx::DevxContext, public devx::QueueMemory {
 public:
  explicit ModelDevx(Nic& nic, std::string name = "");
  ~ModelDevx() override;

  const devx::DeviceInfo& info() const override { return info_; }
  Result<devx::PortInfo> query_port(uint8_t port) override;
  Result<uint32_t> query_eqn() override { return 0u; }
  Result<uint32_t> alloc_pd() override;
  Status dealloc_pd(uint32_t pdn) override;
  Result<devx::Umem> umem_reg(void* addr, size_t size, uint32_t access) override;
  Status umem_dereg(const devx::Umem& u) override;
  Result<devx::Uar> alloc_uar() override;
  Status free_uar(const devx::Uar& u) override;
  Result<devx::Mr> reg_mr(uint32_t pdn, void* addr, size_t len, uint32_t access) override;
  Status dereg_mr(const devx::Mr& m) override;
  Result<devx::Obj> create_srq(uint32_t pdn, uint32_t max_wr) override;
  Result<devx::Obj> create_verbs_cq(uint32_t cqe) override;
  Status destroy_verbs_cq(const devx::Obj& cq) override;

  // QUERY_HCA_CAP (general and atomic pages): what mlx5dv_devx_general_cmd asks the device.
  Status general_cmd(const void* in, size_t inlen, void* out, size_t outlen);
  Result<devx::Obj> obj_create(const void* in, size_t inlen, void* out, size_t outlen) override;
  Status obj_modify(const devx::Obj& o, const void* in, size_t inlen, void* out, size_t outlen) override;
  Status obj_query(const devx::Obj& o, const void* in, size_t inlen, void* out, size_t outlen) override;
  Status obj_destroy(const devx::Obj& o, const void* destroy_in, size_t inlen) override;
  const char* syndrome_text(uint32_t s) const override { return devx_syndrome_text(s); }

  Result<void*> alloc(size_t bytes, bool gpu) override;
  void free(void* p) override;
  // Harness reach: keep the bytes of every block alloc handed out (queues, doorbell records,
  // ibufs), and put them back before another run on the same objects (Nic::save_run_state).
  void save_blocks();
  Status restore_blocks();

  Nic& nic() { return nic_; }
  uint32_t uid() const { return uid_; }
  // What the last rejected command violated, in words.
  const std::string& last_error() const { return last_error_; }

 private:
  struct UmemRec {
    uint64_t addr, size;
  };
  // Write status + syndrome into the reply; returns the matching Status for the seam.
  Status reject(void* out, DevxSyndrome s, const std::string& detail = {});
  // The modelled address of [offset, offset+len) inside umem `id`, or a rejection.
  bool umem_range(uint32_t id, uint64_t offset, uint64_t len, uint64_t align, uint64_t* va, DevxSyndrome* why) const;
  DevxSyndrome check_cq(uint32_t cqn) const;
  Result<devx::Obj> create_cq(const void* in, void* out);
  Result<devx::Obj> create_qp(const void* in, void* out);
  Result<devx::Obj> create_dct(const void* in, void* out);

  Nic& nic_;
  devx::DeviceInfo info_;
  uint32_t uid_;
  std::string last_error_;
  uint32_t next_umem_ = 1;
  std::map<uint32_t, UmemRec> umems_;
  std::set<uint32_t> pds_, uars_, srqs_, mrs_;
  std::set<uint32_t> cqs_, qps_, dcts_;
  std::map<uint32_t, uint32_t> cq_uar_;  // cqn -> uar page, for QUERY_CQ
  struct Block {
    void* base;    // what calloc gave
    size_t bytes;  // handed out from the page-aligned start
  };
  std::map<void*, Block> allocations_;  // page-aligned start -> its block
  struct Saved {
    void* at;
    size_t offset, bytes;  // in saved_bytes_; bytes rounded up to whole 64-byte lines
  };
  std::vector<Saved> saved_;  // save_blocks: where each block's bytes were kept
  std::vector<uint8_t> saved_bytes_;
};

}  // namespace doorbell::mock_nic
