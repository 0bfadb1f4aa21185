// Requests and answers between NIC models in different processes (link.h carries them): a
// request is the initiator half's RemoteRequest (wqe_exec.h) with who sent it and which QP it
// is for; a WRITE's payload and an atomic's operands travel with it. An answer is the
// responder half's outcome with the READ data or the atomic's old value.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hw/mock_nic/wqe_exec.h"

namespace doorbell::mock_nic::wire {

inline constexpr uint32_t kRequestMagic = 0x52'44'4d'41;  // "RDMA"

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  uint16_t src_lid = 0, dst_lid = 0;  // dst: which of the process's NICs answers
  uint8_t op = 0, with_imm = 0;
  uint32_t src_qpn = 0, dst_qpn = 0;
  uint64_t psn = 0;           // the requester's WQE index (the model's PSN)
  uint32_t imm = 0, rkey = 0;
  uint64_t raddr = 0, total = 0;
  uint32_t atomic_size = 0;
  uint32_t payload = 0;       // WRITE bytes after the header
  uint8_t atomic_args[32] = {};
  uint64_t msg_len = 0;       // a segmented WRITE / READ: the whole message's length (0: not segmented)
  uint64_t msg_off = 0;       // ... and where this segment starts in it
};

struct AnswerHeader {
  uint8_t syndrome = 0, vendor = 0, delayed = 0, pad = 0;
  uint32_t byte_cnt = 0;
  uint32_t data = 0;  // bytes after the header
};

// A request's length on the link: the header, then a WRITE's bytes (a phantom WRITE carries
// none: phantom memory does not cross processes).
inline size_t request_bytes(const RemoteRequest& q) {
  const bool write = q.op == mlx5::WqeOpcode::kRdmaWrite || q.op == mlx5::WqeOpcode::kRdmaWriteImm;
  return sizeof(RequestHeader) + (write && !q.phantom ? size_t(q.total) : 0);
}

// A request written at `out` (request_bytes(q) of room, in the link's ring): the header, then a
// WRITE's pieces gathered by `copy(dst, src, len)` (the NIC's: its sources may be device
// memory). `msg_len` / `msg_off`: a segment of a longer message (RequestHeader).
template <class Copy>
void encode_request(const RemoteRequest& q, uint16_t src_lid, uint16_t dst_lid, uint32_t src_qpn, uint32_t dst_qpn, uint64_t psn,
                    uint64_t msg_len, uint64_t msg_off, uint8_t* out, Copy&& copy) {
  RequestHeader h;
  h.msg_len = msg_len, h.msg_off = msg_off;
  h.src_lid = src_lid, h.dst_lid = dst_lid, h.op = uint8_t(q.op), h.with_imm = q.with_imm;
  h.src_qpn = src_qpn, h.dst_qpn = dst_qpn, h.psn = psn;
  h.imm = q.imm, h.rkey = q.rkey, h.raddr = q.raddr, h.total = q.total, h.atomic_size = q.atomic_size;
  if (q.atomic_args != nullptr) std::memcpy(h.atomic_args, q.atomic_args, sizeof h.atomic_args);
  h.payload = uint32_t(request_bytes(q) - sizeof h);
  std::memcpy(out, &h, sizeof h);
  auto* p = reinterpret_cast<std::byte*>(out + sizeof h);
  for (uint32_t k = 0; k < q.npieces && h.payload != 0; ++k) copy(p, q.src[k], q.pieces[k].len), p += q.pieces[k].len;
}

// The request at [in, in + n) as the responder half takes it: one piece over the payload,
// read in place. False if the bytes are not a request.
inline bool decode_request(const uint8_t* in, size_t n, RequestHeader* h, RemoteRequest* q, WqePiece* piece, const std::byte** src) {
  if (n < sizeof *h) return false;
  std::memcpy(h, in, sizeof *h);
  if (h->magic != kRequestMagic || n != sizeof *h + h->payload) return false;
  q->op = mlx5::WqeOpcode(h->op), q->rkey = h->rkey, q->raddr = h->raddr, q->total = h->total;
  q->with_imm = h->with_imm != 0, q->imm = h->imm, q->atomic_size = h->atomic_size;
  q->atomic_args = h->atomic_size != 0 ? reinterpret_cast<const std::byte*>(h->atomic_args) : nullptr;
  *piece = {0, 0, uint32_t(h->total), nullptr};
  *src = reinterpret_cast<const std::byte*>(in + sizeof *h);
  q->npieces = h->total != 0 ? 1 : 0, q->pieces = piece, q->src = src, q->phantom = false;
  return true;
}

// The answer's header at `out`; its `data_len` bytes of READ data or atomic result are
// already in place after it. Returns the answer's length.
inline size_t encode_answer(const ExecOutcome& o, size_t data_len, uint8_t* out) {
  AnswerHeader a;
  a.syndrome = uint8_t(o.fault.syndrome), a.vendor = o.fault.vendor, a.delayed = o.delayed, a.byte_cnt = o.byte_cnt;
  a.data = uint32_t(data_len);
  std::memcpy(out, &a, sizeof a);
  return sizeof a + data_len;
}

// The answer at [in, in + n); its READ data or atomic result, if it did not fail, left in
// place (*bytes, *len; none after a failure).
inline ExecOutcome decode_response(const uint8_t* in, size_t n, const uint8_t** bytes, size_t* len) {
  ExecOutcome o;
  AnswerHeader a;
  *bytes = nullptr, *len = 0;
  if (n < sizeof a) {  // a malformed answer: as none at all
    o.fault = {mlx5::CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady};
    return o;
  }
  std::memcpy(&a, in, sizeof a);
  o.fault = {mlx5::CqeSyndrome(a.syndrome), a.vendor};
  o.delayed = a.delayed != 0, o.byte_cnt = a.byte_cnt;
  if (!o.fault.failed()) *bytes = in + sizeof a, *len = std::min<size_t>(a.data, n - sizeof a);
  return o;
}

// The same, the data copied to (*data)[at, ...) (a segment's place in the whole message), which
// it grows to, where `data` is given.
inline ExecOutcome decode_response(const uint8_t* in, size_t n, std::vector<std::byte>* data, size_t at = 0) {
  const uint8_t* bytes;
  size_t len;
  const ExecOutcome o = decode_response(in, n, &bytes, &len);
  if (data == nullptr || o.fault.failed()) return o;
  data->resize(at + len);
  if (len != 0) std::memcpy(data->data() + at, bytes, len);
  return o;
}

}  // namespace doorbell::mock_nic::wire
