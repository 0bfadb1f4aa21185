// What the engine reports for one completion, and the 64 CQE bytes it becomes: one
// host-and-device source for the NIC model's CQs (cq.cc) and the GPU-resident engine
// (hw/cuda/nic_engine.cuh). The writer stores every byte but the last word first and the word
// holding op_own last, with release order, so a poller that sees the owner sees the rest.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "hw/mlx5/cqe.h"

namespace doorbell::mock_nic {

struct Completion {
  mlx5::CqeOpcode opcode = mlx5::CqeOpcode::kReq;
  uint32_t qpn = 0;
  uint16_t wqe_counter = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;
  uint8_t wqe_opcode = 0;  // error CQEs: opcode of the failed WQE
  uint8_t syndrome = 0;
  uint8_t vendor_syndrome = 0;
  DOORBELL_HD bool error() const { return opcode == mlx5::CqeOpcode::kReqErr || opcode == mlx5::CqeOpcode::kRespErr; }
};

// The CQE for `c` as the `pi`-th of a CQ of 2^log_size entries (the owner bit follows pi).
DOORBELL_HD mlx5::Cqe64 build_cqe(const Completion& c, uint64_t pi, uint32_t log_size) {
  mlx5::Cqe64 cqe{};
  if (c.error()) {
    auto* e = reinterpret_cast<mlx5::ErrCqe64*>(&cqe);
    e->syndrome = c.syndrome;
    e->vendor_err_synd = c.vendor_syndrome;
    e->s_wqe_opcode_qpn.set((uint32_t(c.wqe_opcode) << 24) | (c.qpn & 0xffffff));
  } else {
    cqe.imm_inval_pkey.set(c.imm);
    cqe.byte_cnt.set(c.byte_cnt);
    // Requester CQEs carry the WQE's opcode in the top byte, as hardware writes them.
    const bool req = c.opcode == mlx5::CqeOpcode::kReq;
    cqe.sop_drop_qpn.set((req ? uint32_t(c.wqe_opcode) << 24 : 0) | (c.qpn & 0xffffff));
  }
  cqe.wqe_counter.set(c.wqe_counter);
  cqe.op_own = uint8_t(uint8_t(c.opcode) << 4) | mlx5::cqe_owner_for(pi, log_size);
  return cqe;
}

}  // namespace doorbell::mock_nic
