// NicConfig::audit: the harness's checks on a client's queues, made where a ConnectX would
// first see them — at the doorbell. A client (NVSHMEM through the verbs shim, a DEVX program)
// writes its WQEs, then the doorbell record (DBR), then the BlueFlame word; so at the
// BlueFlame store every WQE below the DBR must be whole. One rung past a WQE another thread
// reserved but had not finished writing shows here as an earlier lap's WQE (its wqe_index
// field), a zeroed one (QPN 0) or a torn one (a bad DS or opcode), even when the writer
// finishes before the engine gets to it and the run then looks fine.
#include <cstdio>
#include <cstring>
#include <string>

#include "hw/mock_nic/nic.h"
#include "hw/mock_nic/qp_step.h"
#include "hw/mock_nic/wqe_check.h"

namespace doorbell::mock_nic {

namespace {

const char* wqe_fault_text(uint8_t vendor_code) {
  switch (vendor_code) {
    case vendor::kQpnMismatch: return "its QPN field names another QP";
    case vendor::kWqeIndexMismatch: return "its wqe_index field is another slot's (an earlier lap's WQE)";
    case vendor::kBadDs: return "its DS is out of bounds for its opcode";
    case vendor::kBadOpcode: return "its opcode is not one the NIC executes";
    case vendor::kBadSegment: return "a segment is malformed";
    case vendor::kLengthTooLarge: return "its length is too large";
    default: return "it is malformed";
  }
}

}  // namespace

void Nic::audit_doorbell(Qp& qp, uint64_t value, bool bf_is_clients) {
  char line[320];
  const uint16_t last = qp.audit_dbr, dbr = uint16_t(qp.dbr->snd.get());
  const uint64_t ring = qp.sq_mask + 1;
  const uint16_t ahead = uint16_t(dbr - last);
  qp.audit_dbr = dbr;
  if (ahead > ring) {
    std::snprintf(line, sizeof line,
                  "qpn 0x%x: the doorbell record went from %u to %u: back, or %u WQEBBs ahead of the last doorbell on a %llu-WQEBB ring",
                  qp.qpn, last, dbr, unsigned(ahead), (unsigned long long)ring);
    audit_.push_back(line);
    return;
  }
  if (bf_is_clients) {  // the ctrl word's index: the new producer (a CPU proxy) or the last WQE's slot
    const uint16_t idx = uint16_t(mlx5::bswap32(uint32_t(value)) >> 8);
    if (uint16_t(idx - last) > ahead) {
      std::snprintf(line, sizeof line, "qpn 0x%x: BlueFlame index %u outside the doorbell record's [%u, %u]", qp.qpn, idx, last, dbr);
      audit_.push_back(line);
    }
  }
  if (ahead == 0) return;
  // The engine may have fetched part of them already, re-reading the record while it drained
  // the ring (NicConfig::reread_dbr_when_drained): only what it has not is posted to the state
  // the QP is in now.
  const uint16_t head = uint16_t(qp.head), fresh = uint16_t(head - last) <= ahead ? head : last;
  if (qp.state == QpState::kErr && fresh != dbr) {
    std::snprintf(line, sizeof line, "qpn 0x%x: WQEBBs [%u, %u) posted to a QP in ERR (they are flushed, not executed)", qp.qpn, fresh, dbr);
    audit_.push_back(line);
    return;
  }
  // Walk the WQEs the doorbell posts; the first that is not whole is reported.
  const uint32_t max_ds = qp.attr.max_ds;
  std::byte w[64 * mlx5::kWqebb];
  for (uint16_t s = last; s != dbr;) {
    const auto slot = [&](uint64_t i) { return qp.sq + ((uint64_t(s) + i) & qp.sq_mask) * mlx5::kWqebb; };
    mlx5::WqeCtrlSeg ctrl;
    std::memcpy(&ctrl, slot(0), sizeof ctrl);
    const uint32_t nbb = wqe_wqebbs(ctrl.ds(), max_ds);
    for (uint32_t i = 0; i < nbb && i < 64; ++i) std::memcpy(w + i * mlx5::kWqebb, slot(i), mlx5::kWqebb);  // whole across the wrap
    WqeView v;
    const WqeFault f = nbb > uint16_t(dbr - s) ? WqeFault{mlx5::CqeSyndrome::kLocalQpOpErr, vendor::kBadDs}
                                               : check_wqe(w, qp.qpn, s, true, max_ds, &v, qp.attr.dc);
    if (f.failed()) {
      std::snprintf(line, sizeof line,
                    "qpn 0x%x: slot %u (WQEBB %llu) below the doorbell record %u is not a whole WQE: %s%s "
                    "(opcode 0x%02x, wqe_index %u, qpn 0x%x, ds %u): rung before it was written?",
                    qp.qpn, s, (unsigned long long)(s & qp.sq_mask), dbr, wqe_fault_text(f.vendor),
                    nbb > uint16_t(dbr - s) ? ", and it reaches past the record" : "", ctrl.opcode(), ctrl.wqe_index(), ctrl.qpn(), ctrl.ds());
      audit_.push_back(line);
      return;
    }
    s = uint16_t(s + nbb);
  }
}

void Nic::audit_cq_overrun(const Cq& cq) {
  char line[200];
  std::snprintf(line, sizeof line, "cqn 0x%x: overrun - CQE %llu found the client's consumer index at %u on a %u-entry CQ (the CQE is lost)",
                cq.cqn, (unsigned long long)cq.pi, cq.dbr->set_ci.get() & 0xffffff, 1u << cq.log_size);
  audit_.push_back(line);
}

}  // namespace doorbell::mock_nic
