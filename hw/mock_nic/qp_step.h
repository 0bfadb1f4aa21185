// One step of a send queue: the WQE at the head of a QP's ring, fetched (gathered where it
// wraps), waited for until the doorbell covers it whole, flushed in ERR, else checked
// (wqe_check.h) and executed (wqe_exec.h). Host-and-device: the NIC model's engine
// (engine.cc) and the GPU-resident engine (hw/cuda/nic_engine.cuh) drive their QPs with it
// and keep what differs between them (responses in flight and retry timers on the CPU, the
// CTA's copies on the GPU) in what they do with the step's result.
//
// The Ring contract (`q`):
//   const std::byte* first(uint64_t idx)            the WQE's first WQEBB (its control segment)
//   const std::byte* whole(uint64_t idx, uint32_t ds)  its ds octowords contiguous (gathered
//                                                   where the ring wraps); a read the NIC makes.
//                                                   ds is valid (1..max_ds): a bad one comes as
//                                                   1, the WQE failing on its first WQEBB
//   uint32_t qpn(), max_ds(); bool check_index()    what check_wqe checks against
//   bool fenced(const mlx5::WqeCtrlSeg&)            the fence must wait for responses in flight
//   bool injected_error(uint64_t idx)               a fault the harness injects at this WQE: the
//                                                   QP goes to ERR and it flushes
//   WqeFault refused(mlx5::WqeOpcode)               what the device refuses though well formed
//   ExecOutcome execute(const WqeView&, uint32_t imm)  execute_wqe through the engine's Port
// and, optionally (a capability: a ring specialised for some WQEs, e.g. the CPU engine's runs
// of plain WRITEs):
//   bool takes(uint8_t opcode, uint32_t ds)         false: the step declines the WQE untouched
//   bool dci()                                      the QP is a DC initiator: WQEs carry an AV
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/wqe_check.h"
#include "hw/mock_nic/wqe_exec.h"

namespace doorbell::mock_nic {

enum class StepKind : uint8_t {
  kPartial,   // the doorbell ends inside the WQE: it waits for the one that covers it whole
  kDeclined,  // the ring's takes() turned it down: nothing was read past its control segment
  kFenced,    // its fence waits for earlier responses
  kFlushed,   // the QP is in ERR: it completes with WR_FLUSH_ERR
  kExecuted,  // done (o.fault says whether it failed; o.not_answered(): nobody answered yet)
};

struct Step {
  StepKind kind = StepKind::kPartial;
  uint32_t nbb = 0;  // WQEBBs the WQE takes (1 for a bad DS: it errors or flushes alone)
  uint8_t opcode = 0;
  bool signaled = false;
  ExecOutcome o;
};

// WQEBBs of a WQE whose DS is `ds`, 1 for a bad one.
DOORBELL_HD uint32_t wqe_wqebbs(uint32_t ds, uint32_t max_ds) { return ds != 0 && ds <= max_ds ? mlx5::wqebbs_for_ds(ds) : 1; }

// The step on WQE `idx` of a ring posted up to `prod` (idx < prod); `in_err`: the QP is in ERR.
template <class Ring>
DOORBELL_HD Step qp_step(Ring& q, uint64_t idx, uint64_t prod, bool in_err) {
  Step s;
  // Everything the step takes from the control segment is read before the WQE executes (a
  // WRITE may land on its own WQE).
  const auto& ctrl = *reinterpret_cast<const mlx5::WqeCtrlSeg*>(q.first(idx));
  const uint32_t ds = ctrl.ds();
  s.opcode = ctrl.opcode();
  if constexpr (requires { q.takes(s.opcode, ds); })
    if (!q.takes(s.opcode, ds)) return s.kind = StepKind::kDeclined, s;
  if (!in_err && q.fenced(ctrl)) return s.kind = StepKind::kFenced, s;
  s.nbb = wqe_wqebbs(ds, q.max_ds());
  // A doorbell may end inside a multi-WQEBB WQE (a driver bug or a lying DBR): the WQE waits
  // for the doorbell that covers it whole, so the head never passes the producer.
  if (prod - idx < s.nbb) return s;
  if (q.injected_error(idx) || in_err) return s.kind = StepKind::kFlushed, s;
  s.kind = StepKind::kExecuted;
  s.signaled = ctrl.cq_update();
  const bool ds_ok = ds != 0 && ds <= q.max_ds();
  WqeView v;
  bool dci = false;
  if constexpr (requires { q.dci(); }) dci = q.dci();
  if (const WqeFault f = check_wqe(q.whole(idx, ds_ok ? ds : 1), q.qpn(), uint16_t(idx), q.check_index(), q.max_ds(), &v, dci); f.failed())
    s.o.fault = f;
  else if (const WqeFault r = q.refused(mlx5::WqeOpcode(s.opcode)); r.failed())
    s.o.fault = r;
  else
    s.o = q.execute(v, ctrl.imm.get());
  return s;
}

}  // namespace doorbell::mock_nic
