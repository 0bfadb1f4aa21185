// Execution of a send WQE that passed check_wqe(): the key checks, the responder's checks
// and the data movement, in the order a ConnectX meets them, as one host-and-device source
// for the NIC model's engine (engine.cc, one agent on the CPU) and its GPU-resident engine
// (hw/cuda/nic_engine.cuh). It has two halves, as RC has two ends: the initiator's (the
// requester's keys, its gather and scatter lists) builds a RemoteRequest and hands it to
// port.respond(); the responder's (respond(): whether it answers, its rights, its keys, the
// memory it writes, reads or updates) runs where the responder's memory is — in the same
// process a port calls respond(*this, request) at once; a port to another process would carry
// the request there and the answer back. Everything that touches memory or the connection
// goes through a Port, so this file holds the rules and no memcpy or atomic of its own:
//
//   ExecOutcome respond(const RemoteRequest&)   the responder half, wherever it runs
//   std::byte* local(const WqePiece&, uint32_t need, KeyFault*, bool* phantom)  requester key
//   bool answer()                    the responder would answer (exists, RTR/RTS, link up)
//   uint32_t responder_access()      its QP's remote rights; uint8_t responder_atomic_mode()
//   std::byte* remote(rkey, addr, len, need, KeyFault*, bool* phantom)   responder key
//   void responder_error(AsyncEvent::Kind, WqeFault)   the responder's QP goes to ERR
//   bool has_receive()               WRITE_IMM: a receive WQE waits at the responder
//   void deliver_imm(uint32_t imm, uint64_t bytes)     WRITE_IMM: consume it, complete it there
//   void write(std::byte* dst, uint64_t dst_va, const std::byte* src, const WqePiece&, bool phantom)
//   void scatter(const WqePiece&, std::byte* at)       a READ / atomic result lands here
//   void read_response(const std::byte* src, uint64_t raddr, uint64_t len, bool phantom)
//   uint64_t fetch_add64(std::byte*, uint64_t); uint64_t cas64(std::byte*, uint64_t cmp, uint64_t swap)
//   uint32_t cas32(std::byte*, uint32_t cmp, uint32_t swap)   (cas(0, 0) doubles as an atomic load)
//   void atomic_result(const std::byte* bytes, uint32_t size)
//   void applied()                   the responder executed this request (its next PSN)
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/config.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/types.h"
#include "hw/mock_nic/wqe_check.h"

namespace doorbell::mock_nic {

// What executing one WQE gave (kept small: it is made for every WQE).
struct ExecOutcome {
  WqeFault fault;
  bool delayed = false;  // a response (READ data, atomic value) is on its way
  uint32_t byte_cnt = 0;
  DOORBELL_HD bool not_answered() const {  // the caller retries (or times out) instead of failing
    return (fault.syndrome == mlx5::CqeSyndrome::kTransportRetryExcErr && fault.vendor == vendor::kRemoteNotReady) ||
           fault.syndrome == mlx5::CqeSyndrome::kRnrRetryExcErr;
  }
};

// What the initiator half asks of the responder: an RDMA WRITE (+IMM) with its payload
// pieces, a READ, or an atomic with its operands. (Across processes, the payload and the
// operands travel with it.)
struct RemoteRequest {
  mlx5::WqeOpcode op = mlx5::WqeOpcode::kNop;
  uint32_t rkey = 0;
  uint64_t raddr = 0, total = 0;
  bool with_imm = false;
  uint32_t imm = 0;
  uint32_t npieces = 0;                   // WRITE: pieces[k]'s bytes are at src[k]
  const WqePiece* pieces = nullptr;
  const std::byte* const* src = nullptr;
  bool phantom = false;                   // WRITE / READ: the initiator's side is phantom memory
  uint32_t atomic_size = 0;               // atomics: 4 or 8, and the atomic segment
  const std::byte* atomic_args = nullptr;
};

namespace wqe_exec_detail {

DOORBELL_HD ExecOutcome fail(mlx5::CqeSyndrome s, uint8_t v) {
  ExecOutcome o;
  o.fault = WqeFault{s, v};
  return o;
}
DOORBELL_HD ExecOutcome fail(WqeFault f) { return fail(f.syndrome, f.vendor); }
DOORBELL_HD ExecOutcome done(uint32_t bytes, bool delayed) {
  ExecOutcome o;
  o.byte_cnt = bytes;
  o.delayed = delayed;
  return o;
}
template <class Port>
DOORBELL_HD ExecOutcome responder_fail(Port& port, AsyncEvent::Kind k, WqeFault f) {
  port.responder_error(k, f);
  return fail(f);
}
template <class Port>
DOORBELL_HD ExecOutcome responder_fail(Port& port, AsyncEvent::Kind k, mlx5::CqeSyndrome s, uint8_t v) {
  return responder_fail(port, k, WqeFault{s, v});
}

// Add field by field: clearing each field's top bit stops carries crossing a boundary.
DOORBELL_HD constexpr uint64_t masked_add(uint64_t a, uint64_t b, uint64_t boundary) {
  return ((a & ~boundary) + (b & ~boundary)) ^ ((a ^ b) & boundary);
}

// A masked atomic as a compare-and-swap loop over the port's CAS (of T = uint32_t or uint64_t).
template <class T, class Port, class Next>
DOORBELL_HD T cas_loop(Port& port, std::byte* t, T seen, Next next) {
  for (;;) {
    T want = 0;
    if (!next(seen, &want)) return seen;  // the compare failed: nothing is written
    T was;
    if constexpr (sizeof(T) == 8) was = port.cas64(t, seen, want);
    else was = port.cas32(t, seen, want);
    if (was == seen) return was;
    seen = was;
  }
}

// A masked compare-swap or fetch-add of T (the segment types of its width) on `t`.
template <class T, class CsSeg, class FaSeg, class Port>
DOORBELL_HD T masked_atomic(Port& port, std::byte* t, mlx5::WqeOpcode op, const std::byte* args) {
  T first;
  if constexpr (sizeof(T) == 8) first = port.cas64(t, 0, 0);
  else first = port.cas32(t, 0, 0);
  if (op == mlx5::WqeOpcode::kAtomicMaskedCs) {
    const auto* a = reinterpret_cast<const CsSeg*>(args);
    const T swap = a->swap.get(), cmp = a->compare.get(), sm = a->swap_mask.get(), cm = a->compare_mask.get();
    return cas_loop<T>(port, t, first, [&](T seen, T* next) {
      *next = T((seen & ~sm) | (swap & sm));
      return ((seen ^ cmp) & cm) == 0;
    });
  }
  const auto* a = reinterpret_cast<const FaSeg*>(args);
  const T add = a->add.get(), boundary = a->field_boundary.get();
  return cas_loop<T>(port, t, first, [&](T seen, T* next) {
    *next = T(masked_add(seen, add, boundary));
    return true;
  });
}

// The scatter list of a READ / atomic: every piece's key must let the QP write there.
// `phantom` (may be null) hears whether any piece is phantom memory.
template <class Port>
DOORBELL_HD WqeFault gather_scatter(Port& port, const WqeView& v, bool* phantom) {
  for (uint32_t k = 0; k < v.npieces; ++k) {
    KeyFault f{};
    bool ph = false;
    std::byte* at = port.local(v.pieces[k], kLocalWrite, &f, &ph);
    if (at == nullptr) return local_key_fault(f);
    if (phantom != nullptr) *phantom |= ph;
    port.scatter(v.pieces[k], at);
  }
  return {};
}

template <class Port>
DOORBELL_HD ExecOutcome exec_write(Port& port, const WqeView& v, bool with_imm, uint32_t imm) {
  using mlx5::CqeSyndrome;
  bool phantom = false;
  const std::byte* src[mlx5::kMaxDs];  // each piece's bytes: inline in the WQE, or through its lkey
  for (uint32_t k = 0; k < v.npieces; ++k) {
    const WqePiece& p = v.pieces[k];
    if (p.inline_data != nullptr) {
      src[k] = p.inline_data;
      continue;
    }
    KeyFault f{};
    bool ph = false;
    src[k] = port.local(p, 0, &f, &ph);
    if (src[k] == nullptr) return fail(local_key_fault(f));
    phantom |= ph;
  }
  RemoteRequest q;
  q.op = v.op, q.rkey = v.rkey, q.raddr = v.raddr, q.total = v.total, q.with_imm = with_imm, q.imm = imm;
  q.npieces = v.npieces, q.pieces = v.pieces, q.src = src, q.phantom = phantom;
  return port.respond(q);
}

// The responder's half of a WRITE.
template <class Port>
DOORBELL_HD ExecOutcome respond_write(Port& port, const RemoteRequest& q) {
  using mlx5::CqeSyndrome;
  if (!port.answer()) return fail(CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady);
  if (!(port.responder_access() & kRemoteWrite))
    return responder_fail(port, AsyncEvent::kQpAccessError, CqeSyndrome::kRemoteAccessErr, vendor::kQpAccess);
  if (q.with_imm && !port.has_receive()) return fail(CqeSyndrome::kRnrRetryExcErr, vendor::kRnr);
  if (q.total != 0) {  // a zero-length write carries no key to check
    KeyFault f{};
    bool ph = false;
    std::byte* dst = port.remote(q.rkey, q.raddr, q.total, kRemoteWrite, &f, &ph);
    if (dst == nullptr) return responder_fail(port, AsyncEvent::kQpAccessError, remote_key_fault(f));
    const bool phantom = q.phantom || ph;
    uint64_t dva = q.raddr;
    for (uint32_t k = 0; k < q.npieces; ++k) {
      port.write(dst, dva, q.src[k], q.pieces[k], phantom);
      dst += q.pieces[k].len;
      dva += q.pieces[k].len;
    }
  }
  if (q.with_imm) port.deliver_imm(q.imm, q.total);
  port.applied();
  return done(uint32_t(q.total), false);
}

template <class Port>
DOORBELL_HD ExecOutcome exec_read(Port& port, const WqeView& v) {
  using mlx5::CqeSyndrome;
  bool phantom = false;
  if (const WqeFault f = gather_scatter(port, v, &phantom); f.failed()) return fail(f);
  RemoteRequest q;
  q.op = v.op, q.rkey = v.rkey, q.raddr = v.raddr, q.total = v.total, q.phantom = phantom;
  return port.respond(q);
}

// The responder's half of a READ.
template <class Port>
DOORBELL_HD ExecOutcome respond_read(Port& port, const RemoteRequest& q) {
  using mlx5::CqeSyndrome;
  bool phantom = q.phantom;
  if (!port.answer()) return fail(CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady);
  if (!(port.responder_access() & kRemoteRead))
    return responder_fail(port, AsyncEvent::kQpAccessError, CqeSyndrome::kRemoteAccessErr, vendor::kQpAccess);
  const std::byte* src = nullptr;
  if (q.total != 0) {
    KeyFault f{};
    src = port.remote(q.rkey, q.raddr, q.total, kRemoteRead, &f, &phantom);
    if (src == nullptr) return responder_fail(port, AsyncEvent::kQpAccessError, remote_key_fault(f));
  }
  port.read_response(src, q.raddr, q.total, phantom);  // the responder reads now; the data lands later
  port.applied();
  return done(uint32_t(q.total), true);
}

template <class Port>
DOORBELL_HD ExecOutcome exec_atomic(Port& port, const WqeView& v) {
  using mlx5::CqeSyndrome;
  const mlx5::WqeOpcode op = v.op;
  const uint32_t size = v.atomic_size;
  if (const WqeFault f = gather_scatter(port, v, nullptr); f.failed()) return fail(f);  // phantom: checked on the target
  if (v.total != size) return fail(CqeSyndrome::kLocalLengthErr, vendor::kAtomicBadLength);
  RemoteRequest q;
  q.op = op, q.rkey = v.rkey, q.raddr = v.raddr, q.total = size, q.atomic_size = size, q.atomic_args = v.atomic_args;
  return port.respond(q);
}

// The responder's half of an atomic.
template <class Port>
DOORBELL_HD ExecOutcome respond_atomic(Port& port, const RemoteRequest& q) {
  using mlx5::CqeSyndrome;
  using mlx5::WqeOpcode;
  const WqeOpcode op = q.op;
  const bool masked = op == WqeOpcode::kAtomicMaskedCs || op == WqeOpcode::kAtomicMaskedFa;
  const uint32_t size = q.atomic_size;
  if (!port.answer()) return fail(CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady);
  if (!(port.responder_access() & kRemoteAtomic))
    return responder_fail(port, AsyncEvent::kQpAccessError, CqeSyndrome::kRemoteAccessErr, vendor::kQpAccess);
  if (masked && port.responder_atomic_mode() < 3)  // extended atomics need qpc.atomic_mode >= 3 (8 bytes)
    return responder_fail(port, AsyncEvent::kQpRequestError, CqeSyndrome::kRemoteInvalReqErr, vendor::kExtAtomicMode);
  if (q.raddr % size != 0)
    return responder_fail(port, AsyncEvent::kQpRequestError, CqeSyndrome::kRemoteInvalReqErr, vendor::kAtomicMisaligned);
  KeyFault f{};
  bool phantom = false;
  std::byte* t = port.remote(q.rkey, q.raddr, size, kRemoteAtomic, &f, &phantom);
  if (t == nullptr) return responder_fail(port, AsyncEvent::kQpAccessError, remote_key_fault(f));
  if (phantom) return fail(CqeSyndrome::kRemoteOpErr, vendor::kPhantomAtomic);
  const std::byte* args = q.atomic_args;
  std::byte result[8];
  if (size == 8) {
    uint64_t old = 0;
    if (op == WqeOpcode::kAtomicCs) {
      const auto* a = reinterpret_cast<const mlx5::WqeAtomicSeg*>(args);
      old = port.cas64(t, a->compare.get(), a->swap_add.get());
    } else if (op == WqeOpcode::kAtomicFa) {
      old = port.fetch_add64(t, reinterpret_cast<const mlx5::WqeAtomicSeg*>(args)->swap_add.get());
    } else {
      old = masked_atomic<uint64_t, mlx5::WqeMaskedCs64Seg, mlx5::WqeMaskedFa64Seg>(port, t, op, args);
    }
    for (int i = 0; i < 8; ++i) result[i] = std::byte(old >> (8 * i));  // 8-byte results land in host order
  } else {
    const uint32_t old = masked_atomic<uint32_t, mlx5::WqeMaskedCs32Seg, mlx5::WqeMaskedFa32Seg>(port, t, op, args);
    for (int i = 0; i < 4; ++i) result[i] = std::byte(old >> (24 - 8 * i));  // 4-byte results come back big-endian
  }
  port.atomic_result(result, size);
  port.applied();
  return done(size, true);
}

template <class Port>
DOORBELL_HD ExecOutcome exec_dump(Port& port, const WqeView& v) {
  for (uint32_t k = 0; k < v.npieces; ++k) {
    KeyFault f{};
    bool ph = false;
    if (port.local(v.pieces[k], 0, &f, &ph) == nullptr) return fail(local_key_fault(f));
  }
  return done(uint32_t(v.total), false);
}

}  // namespace wqe_exec_detail

// The responder's half of a request (what a port's respond() runs where the responder is).
template <class Port>
DOORBELL_HD ExecOutcome respond(Port& port, const RemoteRequest& q) {
  using mlx5::WqeOpcode;
  namespace d = wqe_exec_detail;
  switch (q.op) {
    case WqeOpcode::kRdmaWrite:
    case WqeOpcode::kRdmaWriteImm: return d::respond_write(port, q);
    case WqeOpcode::kRdmaRead: return d::respond_read(port, q);
    default: return d::respond_atomic(port, q);
  }
}

// Execute the checked WQE `v` (imm: its control segment's immediate) through `port`.
template <class Port>
DOORBELL_HD ExecOutcome execute_wqe(Port& port, const WqeView& v, uint32_t imm) {
  using mlx5::WqeOpcode;
  namespace d = wqe_exec_detail;
  switch (v.op) {
    case WqeOpcode::kRdmaWrite: return d::exec_write(port, v, false, 0);
    case WqeOpcode::kRdmaWriteImm: return d::exec_write(port, v, true, imm);
    case WqeOpcode::kRdmaRead: return d::exec_read(port, v);
    case WqeOpcode::kAtomicCs:
    case WqeOpcode::kAtomicFa:
    case WqeOpcode::kAtomicMaskedCs:
    case WqeOpcode::kAtomicMaskedFa: return d::exec_atomic(port, v);
    case WqeOpcode::kDump: return d::exec_dump(port, v);
    default: return {};  // NOP (check_wqe refused every other opcode)
  }
}

}  // namespace doorbell::mock_nic
