// The DEVX seam: the narrow table of operations the mlx5 driver needs from a device — open
// and query, PD, umem, UAR, MR, the SRQ and receive CQ a host creates through verbs, and raw
// PRM object commands. Two backends fill it: rdma-core (rdma_core_devx.h) and the software
// NIC (hw/mock_nic/devx). A slot a backend leaves empty answers "not supported".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace doorbell::devx {

struct DeviceInfo {
  std::string name;          // e.g. mlx5_0
  std::string provider;      // e.g. mlx5, rxe, model
  std::string pci_path;      // sysfs path of the PCI function, when known
  bool devx = false;         // DEVX object commands are available
  uint32_t max_qp = 0, max_cq = 0, max_qp_wr = 0, max_mr = 0;
  bool atomics = false;      // 8-byte atomics (HCA-level)
  uint8_t ports = 0;
};

struct PortInfo {
  uint8_t port = 1;
  bool up = false;
  bool ethernet = false;     // RoCE (address by GID) vs InfiniBand (address by LID)
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  uint8_t active_mtu = 0;    // IB MTU enum: 1=256 ... 5=4096
};

struct Umem {
  uint32_t id = 0;
  uint64_t handle = 0;       // backend's own handle
};

struct Uar {
  uint32_t page_id = 0;      // what CQs and QPs name as uar_page
  uint64_t reg_addr = 0;     // address of the BlueFlame doorbell register
  uint64_t handle = 0;
};

struct Mr {
  uint32_t lkey = 0, rkey = 0;
  uint64_t handle = 0;
};

struct Obj {
  uint32_t id = 0;           // CQN / QPN as the reply reported it
  uint64_t handle = 0;
};

class DevxContext {
 public:
  virtual ~DevxContext() = default;

  virtual const DeviceInfo& info() const = 0;
  virtual Result<PortInfo> query_port(uint8_t /*port*/) { return unsupported("query_port"); }
  virtual Result<uint32_t> query_eqn() { return unsupported("query_eqn"); }

  virtual Result<uint32_t> alloc_pd() { return unsupported("alloc_pd"); }  // the PD number
  virtual Status dealloc_pd(uint32_t /*pdn*/) { return unsupported("dealloc_pd"); }
  virtual Result<Umem> umem_reg(void* /*addr*/, size_t /*size*/, uint32_t /*access*/) { return unsupported("umem_reg"); }
  virtual Status umem_dereg(const Umem& /*u*/) { return unsupported("umem_dereg"); }
  virtual Result<Uar> alloc_uar() { return unsupported("alloc_uar"); }
  virtual Status free_uar(const Uar& /*u*/) { return unsupported("free_uar"); }
  virtual Result<Mr> reg_mr(uint32_t /*pdn*/, void* /*addr*/, size_t /*len*/, uint32_t /*access*/) { return unsupported("reg_mr"); }
  virtual Status dereg_mr(const Mr& /*m*/) { return unsupported("dereg_mr"); }
  // Receive side, created through verbs as IBGDA hosts do: an SRQ and a CQ, by number.
  virtual Result<Obj> create_srq(uint32_t /*pdn*/, uint32_t /*max_wr*/) { return unsupported("create_srq"); }
  virtual Result<Obj> create_verbs_cq(uint32_t /*cqe*/) { return unsupported("create_verbs_cq"); }
  virtual Status destroy_verbs_cq(const Obj& /*cq*/) { return unsupported("destroy_verbs_cq"); }

  // PRM object commands. `out` always receives the device's reply (status, syndrome), also
  // when the call fails. `destroy_in` is the DESTROY command the driver built; a backend
  // whose kernel keeps its own (rdma-core) may ignore it.
  virtual Result<Obj> obj_create(const void* /*in*/, size_t /*inlen*/, void* /*out*/, size_t /*outlen*/) { return unsupported("obj_create"); }
  virtual Status obj_modify(const Obj& /*o*/, const void* /*in*/, size_t /*inlen*/, void* /*out*/, size_t /*outlen*/) { return unsupported("obj_modify"); }
  virtual Status obj_query(const Obj& /*o*/, const void* /*in*/, size_t /*inlen*/, void* /*out*/, size_t /*outlen*/) { return unsupported("obj_query"); }
  virtual Status obj_destroy(const Obj& /*o*/, const void* /*destroy_in*/, size_t /*inlen*/) { return unsupported("obj_destroy"); }
  // The backend's reading of a command syndrome, or nullptr (firmware syndromes are opaque).
  virtual const char* syndrome_text(uint32_t /*syndrome*/) const { return nullptr; }

 protected:
  Status unsupported(const char* op) const {
    return Status(Errc::kNotSupported, std::string(op) + " is not supported by provider " + info().provider + " (device " +
                                           info().name + ")");
  }
};

}  // namespace doorbell::devx
