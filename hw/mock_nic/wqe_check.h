// What a ConnectX checks in a send WQE before it executes it (the structure: QPN, index, DS,
// opcode, segments, lengths) and how it resolves a key against a region table: one
// host-and-device source for the NIC model's engine (engine.cc) and its GPU-resident engine
// (hw/cuda/nic_engine.cuh), so both give a malformed WQE the same syndrome and vendor code.
// Checks that need the connection (the responder's state and rights) stay with the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/types.h"

namespace doorbell::mock_nic {

struct WqeFault {
  mlx5::CqeSyndrome syndrome = mlx5::CqeSyndrome::kNone;
  uint8_t vendor = 0;
  DOORBELL_HD constexpr bool failed() const { return syndrome != mlx5::CqeSyndrome::kNone; }
};

// A failed key check as the CQE reports it: the requester's own key (local protection
// error) or the responder's (remote access error), the KeyFault in the vendor code.
DOORBELL_HD constexpr WqeFault local_key_fault(KeyFault f) {
  return {mlx5::CqeSyndrome::kLocalProtErr, uint8_t(vendor::kLocalKeyBase + uint8_t(f))};
}
DOORBELL_HD constexpr WqeFault remote_key_fault(KeyFault f) {
  return {mlx5::CqeSyndrome::kRemoteAccessErr, uint8_t(vendor::kRemoteKeyBase + uint8_t(f))};
}

// One piece of a WQE's gather / scatter list: a data segment, or (WRITE only) inline bytes.
struct WqePiece {  // no initialisers: a WqeView's 63 of them are filled, not cleared
  uint32_t lkey;
  uint64_t addr;
  uint32_t len;
  const std::byte* inline_data;  // non-null: inline, no key
};

// A WQE that passed the structural checks. No initialisers: check_wqe() sets every field
// before it reads one (a step makes one for every WQE).
struct WqeView {
  mlx5::WqeOpcode op;
  uint8_t opmod;
  uint32_t ds;
  uint64_t raddr;  // WRITE, READ, atomics
  uint32_t rkey;
  uint32_t npieces;
  WqePiece pieces[mlx5::kMaxDs];          // [0, npieces) filled
  uint64_t total;                         // bytes over the pieces
  uint32_t atomic_size;                   // atomics: 4 or 8
  const std::byte* atomic_args;           // atomics: the atomic segment
  // A DCI's WQE that leaves the NIC: its address vector's target (LID, DCT number) and key.
  bool has_av;
  uint16_t rlid;
  uint32_t dctn;
  uint64_t dc_key;
};

namespace wqe_check_detail {

DOORBELL_HD constexpr WqeFault fault(mlx5::CqeSyndrome s, uint8_t vendor) { return WqeFault{s, vendor}; }

// Segments [first, ds) as plain data segments (a READ's or an atomic's scatter list, a
// DUMP's): an inline one there is a bad segment. A byte count of 0 means 2 GiB.
DOORBELL_HD WqeFault data_segments(const std::byte* w, uint32_t first, uint32_t ds, WqeView* v) {
  for (uint32_t i = first; i < ds; ++i) {
    const auto* d = reinterpret_cast<const mlx5::WqeDataSeg*>(w + 16 * i);
    const uint32_t bc = d->byte_count.get();
    if (bc & mlx5::kInlineSegFlag) return fault(mlx5::CqeSyndrome::kLocalQpOpErr, vendor::kBadSegment);
    const uint32_t len = bc != 0 ? bc : 0x80000000u;
    v->pieces[v->npieces++] = {d->lkey.get(), d->addr.get(), len, nullptr};
    v->total += len;
  }
  return {};
}

}  // namespace wqe_check_detail

// Check the WQE at `w` (contiguous, `ds` octowords readable) posted as index `idx` on QP
// `qpn`, and fill `v`. The order of the checks is the engine's: identity, DS, then the
// opcode's segments and lengths. On a DCI (`dci`) a WQE that leaves the NIC (WRITE, READ,
// atomics) carries an address vector after its control segment, and its other segments
// follow the AV (one DS for the half form, three for the full one).
DOORBELL_HD WqeFault check_wqe(const std::byte* w, uint32_t qpn, uint16_t idx, bool check_index, uint32_t max_ds, WqeView* v,
                               bool dci = false) {
  using mlx5::CqeSyndrome;
  using mlx5::WqeOpcode;
  using wqe_check_detail::fault;
  const auto& ctrl = *reinterpret_cast<const mlx5::WqeCtrlSeg*>(w);
  v->npieces = 0, v->total = 0, v->raddr = 0, v->rkey = 0, v->atomic_size = 0, v->atomic_args = nullptr;
  v->has_av = false, v->rlid = 0, v->dctn = 0, v->dc_key = 0;
  v->op = WqeOpcode(ctrl.opcode());
  v->opmod = ctrl.opmod();
  v->ds = ctrl.ds();
  const uint32_t ds = v->ds;
  if (ctrl.qpn() != qpn) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kQpnMismatch);
  if (check_index && ctrl.wqe_index() != idx) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kWqeIndexMismatch);
  if (ds == 0 || ds > max_ds) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
  // `a`: the DS the address vector takes (0 on RC, and for what stays on the NIC).
  uint32_t a = 0;
  const bool wire = v->op == WqeOpcode::kRdmaWrite || v->op == WqeOpcode::kRdmaWriteImm || v->op == WqeOpcode::kRdmaRead ||
                    v->op == WqeOpcode::kAtomicCs || v->op == WqeOpcode::kAtomicFa || v->op == WqeOpcode::kAtomicMaskedCs ||
                    v->op == WqeOpcode::kAtomicMaskedFa;
  if (dci && wire) {
    if (ds < 2) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
    const auto& av = *reinterpret_cast<const mlx5::WqeAvSeg*>(w + 16);
    a = mlx5::av_ds(av);
    if (ds < 1 + a) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
    v->has_av = true, v->rlid = av.rlid.get(), v->dctn = av.dqp_dct.get() & 0xffffff, v->dc_key = av.dc_key.get();
  }
  w += 16 * a;  // the segments after the AV sit where an RC WQE has them; the DS count shrinks to match
  const uint32_t ds_rc = ds - a;
  const auto* ra = reinterpret_cast<const mlx5::WqeRaddrSeg*>(w + 16);
  switch (v->op) {
    case WqeOpcode::kNop: return {};
    case WqeOpcode::kRdmaWrite:
    case WqeOpcode::kRdmaWriteImm: {
      if (ds_rc < 2) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
      v->raddr = ra->raddr.get(), v->rkey = ra->rkey.get();
      for (uint32_t i = 2; i < ds_rc;) {
        const std::byte* seg = w + 16 * i;
        const uint32_t bc = reinterpret_cast<const mlx5::Be32*>(seg)->get();
        if (bc & mlx5::kInlineSegFlag) {
          const uint32_t len = bc & ~mlx5::kInlineSegFlag;
          const uint32_t segs = (4 + len + 15) / 16;
          if (len > (ds_rc - i) * 16 || i + segs > ds_rc) return fault(CqeSyndrome::kLocalLengthErr, vendor::kBadSegment);
          v->pieces[v->npieces++] = {0, 0, len, seg + 4};
          v->total += len;
          i += segs;
        } else {
          if (WqeFault f = wqe_check_detail::data_segments(w, i, i + 1, v); f.failed()) return f;
          ++i;
        }
      }
      if (v->total > 0x80000000ull) return fault(CqeSyndrome::kLocalLengthErr, vendor::kLengthTooLarge);
      return {};
    }
    case WqeOpcode::kRdmaRead:
      if (ds_rc < 2) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
      v->raddr = ra->raddr.get(), v->rkey = ra->rkey.get();
      if (WqeFault f = wqe_check_detail::data_segments(w, 2, ds_rc, v); f.failed()) return f;
      if (v->total > 0x80000000ull) return fault(CqeSyndrome::kLocalLengthErr, vendor::kLengthTooLarge);
      return {};
    case WqeOpcode::kAtomicCs:
    case WqeOpcode::kAtomicFa:
    case WqeOpcode::kAtomicMaskedCs:
    case WqeOpcode::kAtomicMaskedFa: {
      const bool masked = v->op == WqeOpcode::kAtomicMaskedCs || v->op == WqeOpcode::kAtomicMaskedFa;
      v->atomic_size = 8;
      if (masked) {
        if (v->opmod != mlx5::ext_atomic_opmod(4) && v->opmod != mlx5::ext_atomic_opmod(8))
          return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadSegment);
        v->atomic_size = v->opmod == mlx5::ext_atomic_opmod(4) ? 4 : 8;
      } else if (v->opmod != 0) {
        return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadSegment);
      }
      const uint32_t want_ds = (v->op == WqeOpcode::kAtomicMaskedCs && v->atomic_size == 8) ? 5 : 4;
      if (ds_rc != want_ds) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
      v->raddr = ra->raddr.get(), v->rkey = ra->rkey.get();
      v->atomic_args = w + 32;
      return wqe_check_detail::data_segments(w, ds_rc - 1, ds_rc, v);  // its length is checked after its key
    }
    case WqeOpcode::kDump:
      if (ds < 2) return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadDs);
      return wqe_check_detail::data_segments(w, 1, ds, v);
    default: return fault(CqeSyndrome::kLocalQpOpErr, vendor::kBadOpcode);  // SEND & co. not modelled
  }
}

}  // namespace doorbell::mock_nic
