// Data path of the NIC model: fetch WQEs from the send ring, validate, execute against
// registered memory, land READ/atomic responses in order, retire completions in order.
// Atomics operate on responder memory in host byte order (mlx5's
// atomic_req_8B_endianness_mode = host, which the kernel selects when supported); operands
// in the WQE are big-endian; an 8-byte fetched value lands in host order, a 4-byte (masked)
// one big-endian, as a ConnectX returns it.
//
// A request the peer does not answer (peer QP not RTR/RTS, link down, node dead) is not an
// error at once: the requester retransmits until retry_count * ack_timeout has passed, then
// fails with RETRY_EXC; an RNR NAK waits rnr_retry times the responder's min_rnr_nak (7:
// forever). A responder that meets an access violation or a bad request moves its own QP to
// ERR and raises an async event, as hardware does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/cpu_relax.h"
#include "hw/mem/range.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/link.h"
#include "hw/mock_nic/nic.h"
#include "hw/mock_nic/qp_step.h"
#include "hw/mock_nic/wqe_check.h"
#include "hw/mock_nic/wqe_exec.h"
#include "hw/mock_nic/wire.h"

namespace doorbell::mock_nic {

using mlx5::CqeSyndrome;
using mlx5::WqeOpcode;

// The largest WRITE / READ part one link message carries (the link's MTU, far below its ring).
constexpr uint64_t kLinkSegment = 256 << 10;
// WRITEs of one QP in flight without their answers (NicConfig::async_link_writes), at most.
constexpr uint32_t kMaxAsyncWrites = 256;

struct Engine {
  // The memory model hears of the engine's writes and of its WQE / DBR reads.
  // `src`: the bytes about to land (where known): a write of what memory holds is a rewrite.
  // `landing`: a response's data in the requester's memory (Observer::device_landing).
  static void wrote(Nic& nic, const void* p, size_t len, const char* what, uint64_t index, const void* src = nullptr,
                    bool landing = false) {
    if (nic.observer_ == nullptr) return;
    if (src != nullptr && std::memcmp(p, src, len) == 0) nic.observer_->device_rewrite(p, len, what, index);
    else if (landing) nic.observer_->device_landing(p, len, what, index);
    else nic.observer_->device_write(p, len, what, index);
  }
  static void read(Nic& nic, const void* p, size_t len, const char* what, uint64_t index) {
    if (nic.observer_ != nullptr) nic.observer_->device_read(p, len, nic.observer_name_.c_str(), what, index);
  }
  // Bytes a WQE moves: through the NIC's Dma where its memory is a real device's (dma.h).
  static void copy(const Nic& nic, std::byte* dst, const std::byte* src, size_t len) {
    if (nic.dma_ != nullptr) return nic.dma_->copy(dst, src, len);
    // Small puts: fixed-size words, no call. Every load comes before the first store, so
    // overlapping ranges copy as memmove would.
    if (len == 8) {  // the common small put: one word
      uint64_t v;
      std::memcpy(&v, src, 8);
      std::memcpy(dst, &v, 8);
      return;
    }
    if (len > 8 && len <= 16) {  // two words, overlapping where len < 16
      uint64_t a, b;
      std::memcpy(&a, src, 8), std::memcpy(&b, src + len - 8, 8);
      std::memcpy(dst, &a, 8), std::memcpy(dst + len - 8, &b, 8);
      return;
    }
    if (len > 16 && len <= 32) {
      uint64_t a, b, c, d;
      std::memcpy(&a, src, 8), std::memcpy(&b, src + 8, 8), std::memcpy(&c, src + len - 16, 8), std::memcpy(&d, src + len - 8, 8);
      std::memcpy(dst, &a, 8), std::memcpy(dst + 8, &b, 8), std::memcpy(dst + len - 16, &c, 8), std::memcpy(dst + len - 8, &d, 8);
      return;
    }
    std::memmove(dst, src, len);  // loopback ranges may overlap
  }
  static void copy_into(const Nic& nic, std::vector<std::byte>* out, const std::byte* src, size_t len) {
    out->resize(len);
    if (len != 0) copy(nic, out->data(), src, len);
  }

  // Whether QP `rq` of NIC `rn` answers a request of QP `src_qpn` at LID `src_lid`: it exists,
  // is in RTR/RTS, is connected back to it, and its link is up.
  static bool answers(const Nic& rn, const Qp* rq, uint16_t src_lid, uint32_t src_qpn) {
    return rq != nullptr && rn.link_up() && (rq->state == QpState::kRtr || rq->state == QpState::kRts) &&
           rq->peer.qpn == src_qpn && rq->peer.lid == src_lid;
  }

  // The responder end's process, when it is another one (the fabric's remote LIDs).
  static const RemotePeer* far_peer(const Nic& nic, const Qp& qp) {
    return nic.fabric_ != nullptr ? nic.fabric_->remote(qp.peer.lid) : nullptr;
  }

  static uint64_t response_due(Nic& nic, Qp& qp) {
    uint64_t d = 0;
    if (nic.cfg_.response_delay_max != 0) {
      nic.rng_ ^= nic.rng_ >> 12, nic.rng_ ^= nic.rng_ << 25, nic.rng_ ^= nic.rng_ >> 27;
      d = (nic.rng_ * 0x2545F4914F6CDD1Dull >> 33) % (nic.cfg_.response_delay_max + 1);
    }
    uint64_t due = nic.now_ + d;
    // RC responses arrive in order.
    for (auto it = qp.inflight.rbegin(); it != qp.inflight.rend(); ++it)
      if (!it->landed) return std::max(due, it->due);
    return due;
  }

  // ---- execution (issue time): wqe_exec.h's rules through this NIC's memory and fabric ----

  // The responder's end of a request (wqe_exec.h's respond()): its NIC and QP and what it
  // does to its own memory. A request from this process (Port) and one from another
  // (RemoteResponder) differ only in how they find it and where READ data and results go.
  struct Responder {
    Nic* rn = nullptr;
    Qp* rq = nullptr;

    uint32_t responder_access() const { return rq->remote_access; }
    uint8_t responder_atomic_mode() const { return rq->atomic_mode; }
    std::byte* remote(uint32_t rkey, uint64_t addr, uint64_t len, uint32_t need, KeyFault* f, bool* ph) {
      std::byte* p = rn->mrs_.resolve(rkey, rq->attr.pd, addr, len, need, f, ph);
      if (p != nullptr && (need & kRemoteAtomic) && !*ph && rn->observer_ != nullptr) rn->observer_->device_atomic(p, len);
      return p;
    }
    // The responder rejects a request: its QP goes to ERR (flushing its own work) with an
    // event; a DCT, which serves every DCI, only raises the event.
    void responder_error(AsyncEvent::Kind k, WqeFault f) {
      if (!rq->attr.dct) rn->fail_qp(*rq);
      rn->raise({k, rq->qpn, uint8_t(f.syndrome)});
    }
    Srq* srq() const { return rq->attr.srqn != 0 ? &rn->srqs_[rq->attr.srqn - kFirstSrqn] : nullptr; }
    bool has_receive() const {  // an SRQ comes with its receive CQ (create_qp)
      const Srq* s = srq();
      return s != nullptr && s->consumed < s->posted;
    }
    void deliver_imm(uint32_t imm, uint64_t bytes) {
      Srq* s = srq();
      mlx5::Completion c;
      c.opcode = mlx5::CqeOpcode::kRespWrImm;
      c.qpn = rq->qpn;
      c.wqe_counter = uint16_t(s->consumed++);
      c.byte_cnt = uint32_t(bytes);
      c.imm = imm;
      if (rn->dma_ != nullptr) rn->dma_->flush();  // the data this CQE announces has landed
      rn->find_cq(rq->attr.recv_cqn)->post(c, rn->now_);
    }
    // A WRITE's bytes: posted where a Dma moves them (the requester's answer does not wait
    // for them to land; a later read or CQE through this NIC does).
    void store(std::byte* dst, const std::byte* src, uint32_t len) {
      wrote(*rn, dst, len, "RDMA WRITE payload, responder qpn", rq->qpn, src);
      if (rn->dma_ != nullptr) return rn->dma_->post(dst, src, len);
      copy(*rn, dst, src, len);
    }
    uint64_t fetch_add64(std::byte* t, uint64_t v) {
      if (rn->dma_ != nullptr) return rn->dma_->fetch_add64(t, v);
      return __atomic_fetch_add(reinterpret_cast<uint64_t*>(t), v, __ATOMIC_ACQ_REL);
    }
    uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) {
      if (rn->dma_ != nullptr) return rn->dma_->cas64(t, cmp, swap);
      __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(t), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
      return cmp;
    }
    uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) {
      if (rn->dma_ != nullptr) return rn->dma_->cas32(t, cmp, swap);
      __atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(t), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
      return cmp;
    }
  };

  // The NIC model's Port for execute_wqe (see wqe_exec.h): keys from the MR tables of this
  // NIC and of the responder's, data moved through the modelled memory (phantom transfers
  // recorded instead), READ data and atomic results staged in qp.staging until they land.
  // A responder in another process (the fabric's remote LIDs) gets the request over the link.
  struct Port : Responder {
    Nic& nic;
    Qp& qp;
    Inflight* resp = nullptr;  // READ / atomic: the staged response
    // Where the QP's packets go, looked up at its first request of a run (run_qp) rather
    // than at every WQE: the NIC by the peer LID and its QP, or another process. Only the
    // control path changes them, and it does not run inside progress(). Whether the
    // responder answers (its state, the links) is still asked at every request.
    bool looked_up = false;
    Nic* peer_nic = nullptr;
    Qp* peer_qp = nullptr;
    const RemotePeer* far = nullptr;
    // A DCI's target, from the WQE's address vector (aim()): looked up again when it changes.
    uint16_t dc_lid = 0;
    uint32_t dc_dctn = 0;
    uint64_t dc_key = 0;
    // A WRITE sent without waiting (NicConfig::async_link_writes): its link requests.
    uint64_t async_seq = 0;
    uint32_t async_n = 0;
    // A READ from another process whose data goes from each answer, in the link's ring,
    // straight to its scatter list (placing; places: each piece's memory, resolved at issue).
    bool placing = false;
    std::vector<std::byte*> places;
    Port(Nic& n, Qp& q) : nic(n), qp(q) {}

    // Where a Dma moves the data (the ring is then page-locked), nothing observes the NIC and
    // responses are not delayed, a READ's data is placed as its answers come: no staging copy.
    bool place_now() {
      if (nic.dma_ == nullptr || nic.observer_ != nullptr || nic.cfg_.response_delay_max != 0 || resp == nullptr) return false;
      places.clear();
      for (const auto& s : resp->scatter) {
        KeyFault f{};
        std::byte* d = nic.mrs_.resolve(s.lkey, qp.attr.pd, s.addr, s.len, kLocalWrite, &f);
        if (d == nullptr) return false;  // landing says why
        places.push_back(d);
      }
      return true;
    }
    // Bytes [off, off + n) of the READ's message to their places in the scatter list.
    void place(uint64_t off, const std::byte* src, uint64_t n) {
      uint64_t at = 0;
      for (size_t k = 0; k < resp->scatter.size() && n != 0; at += resp->scatter[k].len, ++k) {
        const uint64_t len = resp->scatter[k].len;
        if (off >= at + len) continue;
        const uint64_t into = off - at, m = std::min(n, len - into);
        copy(nic, places[k] + into, src, m);
        src += m, off += m, n -= m;
      }
    }

    void look_up() {
      looked_up = true;
      const uint16_t lid = qp.attr.dc ? dc_lid : qp.peer.lid;
      far = nic.fabric_ != nullptr ? nic.fabric_->remote(lid) : nullptr;
      peer_nic = nic.nic_by_lid(lid);
      peer_qp = peer_nic != nullptr ? peer_nic->find_qp(qp.attr.dc ? dc_dctn : qp.peer.qpn) : nullptr;
    }
    // A DCI's WQE names its DCT (LID, number, key) in its address vector.
    void aim(const WqeView& v) {
      if (v.rlid == dc_lid && v.dctn == dc_dctn && v.dc_key == dc_key && looked_up) return;
      dc_lid = v.rlid, dc_dctn = v.dctn, dc_key = v.dc_key, looked_up = false;
    }
    // A DCT answers a DCI whose key is its own; another key is dropped without an answer (the
    // DCI retries until its retry count runs out: TRANSPORT_RETRY_EXC_ERR) and the DCT's NIC
    // raises DCT_KEY_VIOLATION, once until the DCT is made again.
    bool dct_answers() {
      if (peer_qp == nullptr || !peer_qp->attr.dct || (peer_qp->state != QpState::kRtr && peer_qp->state != QpState::kRts)) return false;
      if (peer_qp->attr.dc_key == dc_key) return true;
      if (!peer_qp->key_violation_raised) {
        peer_qp->key_violation_raised = true;
        peer_nic->raise({AsyncEvent::kDctKeyViolation, peer_qp->qpn, 0});
      }
      return false;
    }

    std::byte* local(const WqePiece& p, uint32_t need, KeyFault* f, bool* ph) {
      return nic.mrs_.resolve(p.lkey, qp.attr.pd, p.addr, p.len, need, f, ph);
    }
    // The responder end in this process would answer: it exists, its link and ours are up,
    // it is in RTR/RTS and connected back (answers()).
    bool answer() {
      if (!looked_up) look_up();
      if (peer_nic == nullptr || !nic.link_up()) return false;
      if (qp.attr.dc ? !(peer_nic->link_up() && dct_answers()) : !answers(*peer_nic, peer_qp, nic.lid(), qp.qpn)) return false;
      rn = peer_nic, rq = peer_qp;
      return true;
    }
    void write(std::byte* dst, uint64_t dst_va, const std::byte* src, const WqePiece& p, bool phantom) {
      if (phantom) return (void)nic.phantom_log_.push_back({dst_va, p.addr, p.len});  // addr 0: inline
      if (p.addr != 0) read(nic, src, p.len, "RDMA WRITE source, WQE", qp.head);
      store(dst, src, p.len);
    }
    void scatter(const WqePiece& p, std::byte*) { resp->scatter.push_back({p.lkey, p.addr, p.len}); }
    void read_response(const std::byte* src, uint64_t raddr, uint64_t len, bool phantom) {
      resp->phantom = phantom;
      if (len == 0) return;
      if (phantom) {
        uint64_t off = 0;
        for (const auto& s : resp->scatter) nic.phantom_log_.push_back({s.addr, raddr + off, s.len}), off += s.len;
      } else {
        if (rn->observer_ != nullptr) rn->observer_->device_read(src, len, rn->observer_name_.c_str(), "RDMA READ source at the responder", rq->qpn);
        copy_into(*rn, &resp->data, src, len);
      }
    }
    void atomic_result(const std::byte* bytes, uint32_t size) { resp->data.assign(bytes, bytes + size); }
    void applied() { rq->rcv_upto = qp.head + 1; }
    ExecOutcome respond(const RemoteRequest& q) {
      if (!looked_up) look_up();
      if (far != nullptr) return respond_far(*far, q);
      // The responder is in this process: its half runs here and now. Its NIC's posted writes
      // land before this NIC's CQE for them (post_cqe flushes this NIC's own).
      const ExecOutcome o = mock_nic::respond(*this, q);
      if (rn != nullptr && rn->dma_ != nullptr && rn->dma_ != nic.dma_) rn->dma_->flush();
      return o;
    }
    // The request goes to the responder's process; its answer comes back (READ data, results).
    // A WRITE or READ larger than one link message crosses in segments of kLinkSegment bytes
    // (the link's MTU), each for the next part of the range; the first names the whole length,
    // so the responder checks the whole range before a byte lands, as a ConnectX checks the
    // RETH at a message's first packet. Immediate data goes with the last segment, with the
    // whole length. (A phantom WRITE carries no bytes: one request.)
    // With NicConfig::async_link_writes a WRITE's segments go out without waiting (post_far);
    // the WQE is then in flight until land_due() takes their answers.
    ExecOutcome respond_far(const RemotePeer& far, const RemoteRequest& q) {
      const bool write = q.op == mlx5::WqeOpcode::kRdmaWrite || q.op == mlx5::WqeOpcode::kRdmaWriteImm;
      const bool read = q.op == mlx5::WqeOpcode::kRdmaRead;
      const bool async = write && !q.phantom && nic.cfg_.async_link_writes;
      placing = read && !q.phantom && q.total != 0 && place_now();
      if (!(write || read) || (write && q.phantom) || q.total <= kLinkSegment) {
        if (async) return (void)post_far(far, q, 0, 0), posted(q);
        return send_far(far, q, 0, 0, resp != nullptr ? &resp->data : nullptr);
      }
      std::vector<WqePiece> pieces;  // a WRITE segment's part of the gather list, sliced (encode_request gathers it)
      std::vector<const std::byte*> srcs;
      uint32_t k = 0;                // the piece where the next segment begins, and how far into it
      uint64_t into = 0;
      ExecOutcome o;
      std::vector<std::byte>* data = read && resp != nullptr ? &resp->data : nullptr;  // each segment's data at its place
      if (data != nullptr && !placing) data->reserve(q.total);
      for (uint64_t off = 0; off < q.total; off += kLinkSegment) {
        const uint64_t len = std::min<uint64_t>(kLinkSegment, q.total - off);
        pieces.clear(), srcs.clear();
        for (uint64_t left = len; write && left != 0;) {
          const uint64_t n = std::min<uint64_t>(left, q.pieces[k].len - into);
          pieces.push_back({0, 0, uint32_t(n), nullptr});
          srcs.push_back(q.src[k] + into);
          left -= n, into += n;
          if (into == q.pieces[k].len) ++k, into = 0;
        }
        RemoteRequest seg = q;
        seg.raddr = q.raddr + off, seg.total = len, seg.with_imm = q.with_imm && off + len == q.total;
        seg.npieces = uint32_t(pieces.size()), seg.pieces = pieces.data(), seg.src = srcs.data();
        if (async) {
          if (!post_far(far, seg, q.total, off)) return posted(q);
          continue;
        }
        o = send_far(far, seg, q.total, off, data);
        if (o.fault.failed()) return o;
      }
      if (async) return posted(q);
      o.byte_cnt = uint32_t(q.total);
      return o;
    }
    // One request sent without waiting; false (its WQE's requests sent so far forgotten) if
    // the peer took none.
    bool post_far(const RemotePeer& far, const RemoteRequest& q, uint64_t msg_len, uint64_t msg_off) {
      std::string why;
      const uint64_t seq = far.links->send(
          far.process, wire::request_bytes(q),
          [&](uint8_t* p) {
            wire::encode_request(q, nic.lid(), qp.peer.lid, qp.qpn, qp.peer.qpn, qp.head, msg_len, msg_off, p,
                                 [this](std::byte* d, const std::byte* s, size_t n) { copy(nic, d, s, n); });
          },
          &why);
      if (seq == 0) {
        nic.trace(trace::kNicLinkError, uint64_t(qp.qpn), why);
        for (uint32_t k = 0; k < async_n; ++k) far.links->forget(far.process, async_seq + k);
        async_n = 0;
        return false;
      }
      if (async_n++ == 0) async_seq = seq;
      return true;
    }
    // What issue() sees of a WRITE sent without waiting: in flight (or, if the peer took none of
    // it, not answered: tried again under the retry timer).
    ExecOutcome posted(const RemoteRequest& q) const {
      ExecOutcome o;
      if (async_n == 0) return o.fault = {mlx5::CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady}, o;
      o.delayed = true;
      o.byte_cnt = uint32_t(q.total);
      return o;
    }
    // One request over the link and its answer (READ data or an atomic's result into *data).
    // The request is written straight into the link (a WRITE's bytes gathered there from the
    // WQE's memory), the answer read there.
    ExecOutcome send_far(const RemotePeer& far, const RemoteRequest& q, uint64_t msg_len, uint64_t msg_off, std::vector<std::byte>* data) {
      std::string why;
      ExecOutcome o;
      const bool answered = far.links->call(
          far.process, wire::request_bytes(q),
          [&](uint8_t* p) {
            wire::encode_request(q, nic.lid(), qp.peer.lid, qp.qpn, qp.peer.qpn, qp.head, msg_len, msg_off, p,
                                 [this](std::byte* d, const std::byte* s, size_t n) { copy(nic, d, s, n); });
          },
          [&](const uint8_t* p, size_t n) {
            if (!placing) return (void)(o = wire::decode_response(p, n, data, msg_off));
            const uint8_t* bytes;
            size_t len;
            o = wire::decode_response(p, n, &bytes, &len);
            if (!o.fault.failed()) place(msg_off, reinterpret_cast<const std::byte*>(bytes), len);
          },
          &why);
      if (!answered) {
        nic.trace(trace::kNicLinkError, uint64_t(qp.qpn), why);
        o = {};  // no answer: as a peer that does not answer (the retry timer runs)
        o.fault = {mlx5::CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady};
        return o;
      }
      if (!o.fault.failed() && data != nullptr && resp != nullptr) resp->phantom = false, resp->placed = placing;
      return o;
    }
  };

  // The responder's half for a request from another process: the QP it names must be
  // connected back to the requester; READ data and atomic results go straight into the
  // answer's room (`out`, `cap` bytes) in the link's ring.
  struct RemoteResponder : Responder {
    const wire::RequestHeader& h;
    std::byte* out;
    size_t cap, len = 0;
    bool answer() { return answers(*rn, rq, h.src_lid, h.src_qpn); }
    // A segmented message's first segment: the whole range must pass before any of it lands.
    std::byte* remote(uint32_t rkey, uint64_t addr, uint64_t len, uint32_t need, KeyFault* f, bool* ph) {
      if (h.msg_off == 0 && h.msg_len > len && Responder::remote(rkey, addr, h.msg_len, need, f, ph) == nullptr) return nullptr;
      return Responder::remote(rkey, addr, len, need, f, ph);
    }
    // ... and its last delivers the immediate with the whole length.
    void deliver_imm(uint32_t imm, uint64_t bytes) { Responder::deliver_imm(imm, h.msg_len != 0 ? h.msg_len : bytes); }
    void write(std::byte* dst, uint64_t, const std::byte* src, const WqePiece& p, bool) { store(dst, src, p.len); }
    void read_response(const std::byte* src, uint64_t, uint64_t n, bool) {
      len = std::min<uint64_t>(n, cap);  // the room is the request's length: it all fits
      if (len != 0) copy(*rn, out, src, len);
    }
    void atomic_result(const std::byte* bytes, uint32_t size) {
      len = std::min<size_t>(size, cap);
      std::memcpy(out, bytes, len);
    }
    void applied() { rq->rcv_upto = h.psn + 1; }
  };

  // The QP's reusable response record, emptied for the WQE being issued.
  static Inflight& stage(Qp& qp) {
    qp.staging.data.clear();
    qp.staging.scatter.clear();
    qp.staging.phantom = false;
    qp.staging.placed = false;
    return qp.staging;
  }

  // ---- completion plumbing ----

  static void post_cqe(Nic& nic, Qp& qp, uint64_t idx, uint8_t wqe_op, uint32_t byte_cnt, uint8_t synd, uint8_t vend) {
    post_cqe(nic, *nic.find_cq(qp.attr.send_cqn), qp, idx, wqe_op, byte_cnt, synd, vend);
  }
  static void post_cqe(Nic& nic, Cq& cq, const Qp& qp, uint64_t idx, uint8_t wqe_op, uint32_t byte_cnt, uint8_t synd, uint8_t vend) {
    const mlx5::Completion c = mlx5::requester_completion(qp.qpn, idx, wqe_op, byte_cnt, synd, vend);
    const bool was = cq.overrun;
    if (nic.dma_ != nullptr) nic.dma_->flush();  // what this NIC posted lands before the CQE (a loopback WRITE's data)
    if (!cq.post(c, nic.now_) && !was) overran(nic, cq);
  }

  // A CQ without `oi` overran: a CQ error event, and every QP completing to it is fatal.
  static void overran(Nic& nic, Cq& cq) {
    nic.raise({AsyncEvent::kCqError, cq.cqn, 0});
    if (nic.cfg_.audit) nic.audit_cq_overrun(cq);
    for (auto& q : nic.qps_)
      if (q && q->attr.send_cqn == cq.cqn && q->state != QpState::kErr) {
        nic.errors_.push_back({q->qpn, q->head, 0, uint8_t(CqeSyndrome::kLocalQpOpErr), vendor::kCqOverrun, nic.clock_ns()});
        nic.raise({AsyncEvent::kQpFatal, q->qpn, 0});
        nic.fail_qp(*q);
      }
  }

  // Write a response's payload to its scatter list; a key that became invalid since issue
  // turns the WQE into a local protection error.
  static void land(Nic& nic, Qp& qp, Inflight& e) {
    e.landed = true;
    --qp.pending_responses;
    if (e.phantom || e.placed) return;  // recorded, or placed, at issue
    size_t off = 0;
    for (const auto& s : e.scatter) {
      KeyFault f{};
      std::byte* dst = nic.mrs_.resolve(s.lkey, qp.attr.pd, s.addr, s.len, kLocalWrite, &f);
      if (dst == nullptr) {
        e.syndrome = uint8_t(CqeSyndrome::kLocalProtErr);
        e.vendor = local_key_fault(f).vendor;
        return;
      }
      wrote(nic, dst, s.len, "READ / atomic response landing, WQE", e.wqe_idx, e.data.data() + off, true);
      copy(nic, dst, e.data.data() + off, s.len);
      off += s.len;
    }
  }

  // Retire landed WQEs at the front, in order: CQEs for signaled ones; an error CQE moves
  // the QP to ERR.
  static void retire(Nic& nic, Qp& qp) {
    while (!qp.inflight.empty() && qp.inflight.front().landed) {
      Inflight& e = qp.inflight.front();
      if (e.syndrome != 0) {
        nic.errors_.push_back({qp.qpn, e.wqe_idx, e.wqe_opcode, e.syndrome, e.vendor, nic.clock_ns()});
        post_cqe(nic, qp, e.wqe_idx, e.wqe_opcode, 0, e.syndrome, e.vendor);
        ++qp.stats.errors;
        nic.trace(trace::kNicWqeError, uint64_t(qp.qpn), uint64_t(e.wqe_idx), std::string(mlx5::opcode_name(WqeOpcode(e.wqe_opcode))),
                  std::string(mlx5::syndrome_name(CqeSyndrome(e.syndrome))), uint64_t(e.vendor));
        qp.inflight.pop_front();
        qp.error_pending = false;
        nic.fail_qp(qp);
        return;  // anything behind it is flushed by the ERR path
      }
      if (e.signaled) post_cqe(nic, qp, e.wqe_idx, e.wqe_opcode, e.byte_cnt, 0, 0);
      qp.inflight.pop_front();
    }
  }

  // Read the send DBR (16 bits meaningful) into the 64-bit producer; true if work is posted.
  static bool refresh_prod(Nic& nic, Qp& qp) {
    read(nic, &qp.dbr->snd, sizeof qp.dbr->snd, "the DBR of QP", qp.qpn);
    qp.prod = mlx5::widen16(qp.head, uint16_t(qp.dbr->snd.get()));
    return qp.head != qp.prod;
  }

  static bool head_whole(const Qp& qp) {
    mlx5::WqeCtrlSeg ctrl;
    std::memcpy(&ctrl, qp.sq + (qp.head & qp.sq_mask) * mlx5::kWqebb, sizeof ctrl);
    return qp.prod - qp.head >= wqe_wqebbs(ctrl.ds(), qp.attr.max_ds);
  }

  // This engine's side of qp_step's Ring (qp_step.h): the QP's ring in the modelled memory,
  // read as the NIC reads it (told to the observer), executed through `port`.
  struct SqRing {
    Nic& nic;
    Qp& qp;
    Port* port;  // none when only flushing
    const std::byte* first(uint64_t idx) const { return qp.sq + (idx & qp.sq_mask) * mlx5::kWqebb; }
    const std::byte* whole(uint64_t idx, uint32_t ds) const {
      const uint64_t off = (idx & qp.sq_mask) * mlx5::kWqebb, ring = (qp.sq_mask + 1) * mlx5::kWqebb;
      const uint64_t len = uint64_t(ds) * mlx5::kDsBytes;
      const std::byte* w = qp.sq + off;
      read(nic, w, std::min(len, ring - off), "WQE", idx);
      if (off + len <= ring) return w;
      // The WQE wraps: its tail is at the ring's start; gathered contiguously, in a buffer
      // read only within this call (one per thread, not a kilobyte in every QP, which a
      // world's rewind copied back).
      alignas(16) static thread_local std::byte gathered[mlx5::kMaxDs * mlx5::kDsBytes];
      read(nic, qp.sq, len - (ring - off), "WQE", idx);
      std::memcpy(gathered, w, ring - off);
      std::memcpy(gathered + (ring - off), qp.sq, len - (ring - off));
      return gathered;
    }
    uint32_t qpn() const { return qp.qpn; }
    uint32_t max_ds() const { return qp.attr.max_ds; }
    bool check_index() const { return nic.cfg_.check_wqe_index; }
    // The fence bit waits for responses in flight; while WRITEs sent without waiting are in
    // flight, anything but another WRITE waits too (a READ or atomic then never executes at
    // the responder ahead of a WRITE that may yet have to be sent again), as does a WRITE
    // past kMaxAsyncWrites.
    bool fenced(const mlx5::WqeCtrlSeg& c) const {
      if (c.fence_mode() != 0 && qp.pending_responses != 0) return true;
      return qp.async_writes != 0 && (qp.async_writes >= kMaxAsyncWrites || !passes_writes_in_flight(WqeOpcode(c.opcode())));
    }
    static bool injected_error(uint64_t) { return false; }  // faults come through Faults, at the QP
    static WqeFault refused(WqeOpcode) { return {}; }
    bool dci() const { return qp.attr.dc; }
    ExecOutcome execute(const WqeView& v, uint32_t imm) const {
      port->resp = v.op == WqeOpcode::kRdmaRead || v.atomic_size != 0 ? &stage(qp) : nullptr;
      port->async_n = 0;
      if (v.has_av) {
        port->aim(v);
        if (!port->looked_up) port->look_up();
        if (port->far != nullptr) {  // said plainly: the process link carries RC only
          ExecOutcome o;
          o.fault = {CqeSyndrome::kLocalQpOpErr, vendor::kDcNotModelled};
          return o;
        }
      }
      // A CST (a DUMP reading GPU memory): the read pushes the data landed before it into the
      // GPU's view, as a PCIe read does the posted writes ahead of it.
      if (v.op == WqeOpcode::kDump && nic.observer_ != nullptr) nic.observer_->device_flush();
      return execute_wqe(*port, v, imm);
    }
  };

  // Flush one unit of work of a QP in ERR: an issued WQE, else the next posted one.
  static bool flush_one(Nic& nic, Qp& qp) {
    if (!qp.inflight.empty()) {
      Inflight& e = qp.inflight.front();
      drop_async(nic, qp, e);
      if (!e.landed) --qp.pending_responses;
      post_cqe(nic, qp, e.wqe_idx, e.wqe_opcode, 0, uint8_t(CqeSyndrome::kWrFlushErr), vendor::kFlushed);
      qp.inflight.pop_front();
      ++qp.stats.flushed;
      return true;
    }
    qp.error_pending = false;
    if (qp.head == qp.prod) return false;
    SqRing ring{nic, qp, nullptr};
    const Step s = qp_step(ring, qp.head, qp.prod, true);
    if (s.kind != StepKind::kFlushed) return false;  // only part of it posted: wait for the rest
    post_cqe(nic, qp, qp.head, s.opcode, 0, uint8_t(CqeSyndrome::kWrFlushErr), vendor::kFlushed);
    qp.head += s.nbb;
    ++qp.stats.flushed;
    return true;
  }

  // Issue the WQE at qp.head through `port` (the QP's, kept across a run). Returns false
  // (nothing done) when its fence must wait.
  static bool issue(Nic& nic, Qp& qp, Port& port) {
    const uint64_t idx = qp.head;
    SqRing ring{nic, qp, &port};
    Step s = qp_step(ring, idx, qp.prod, false);
    if (s.kind != StepKind::kExecuted) return false;  // fenced, or not posted whole yet
    const auto op = WqeOpcode(s.opcode);
    const uint32_t nbb = s.nbb;
    ExecOutcome& o = s.o;
    if (o.not_answered()) {
      const bool rnr = o.fault.syndrome == CqeSyndrome::kRnrRetryExcErr;
      // RNR: the min_rnr_nak of the responder that just answered (port.rq) sets the wait.
      const double rnr_ns = rnr && port.rq != nullptr ? rnr_nak_ns(port.rq->timers.min_rnr_nak) : 0;
      if (!retries_left_out(nic, qp, rnr, rnr_ns)) return false;  // not answered yet: try again later
      o.fault.vendor = rnr ? vendor::kRnrTimeout : vendor::kRetryTimeout;
    } else if (qp.retry_deadline_ns >= 0 && port.async_n == 0) {  // (a WRITE sent without waiting is not answered yet)
      qp.retry_deadline_ns = -1;  // answered
      qp.rnr_wait = false;
    }
    qp.head += nbb;
    ++qp.stats.wqes;
    qp.stats.wqebbs += nbb;

    if (o.fault.failed()) {
      Inflight e;
      e.wqe_idx = idx;
      e.wqe_opcode = uint8_t(op);
      e.syndrome = uint8_t(o.fault.syndrome);
      e.vendor = o.fault.vendor;
      qp.inflight.push_back(std::move(e));
      qp.error_pending = true;
      retire(nic, qp);
      return true;
    }
    qp.stats.bytes += o.byte_cnt;
    nic.bytes_moved_ += o.byte_cnt;
    const bool signaled = s.signaled;
    if (o.delayed) {
      // A WRITE in flight has no response to land: its record starts empty (the staging
      // record still holds the last READ's or atomic's scatter list and data).
      Inflight& resp = port.async_n != 0 ? stage(qp) : qp.staging;
      resp.wqe_idx = idx;
      resp.wqe_opcode = uint8_t(op);
      resp.signaled = signaled;
      resp.byte_cnt = o.byte_cnt;
      resp.due = response_due(nic, qp);
      resp.landed = false;
      resp.syndrome = resp.vendor = 0;
      resp.link_seq = port.async_seq, resp.link_n = port.async_n, resp.link_got = 0, resp.link_unanswered = false;
      resp.dc_lid = qp.attr.dc ? port.dc_lid : 0;
      qp.async_writes += resp.link_n != 0 ? 1 : 0;
      port.async_n = 0;
      ++qp.pending_responses;
      if (resp.due <= nic.now_ && qp.inflight.empty() && resp.link_n == 0) {
        land(nic, qp, resp);  // response already here: no queueing
        if (resp.syndrome == 0) {
          if (signaled) post_cqe(nic, qp, idx, uint8_t(op), o.byte_cnt, 0, 0);
          return true;
        }
        qp.error_pending = true;
      }
      qp.inflight.push_back(std::move(resp));
      retire(nic, qp);
      return true;
    }
    if (qp.inflight.empty()) {
      if (signaled) post_cqe(nic, qp, idx, uint8_t(op), o.byte_cnt, 0, 0);
    } else {
      Inflight e;
      e.wqe_idx = idx;
      e.wqe_opcode = uint8_t(op);
      e.signaled = signaled;
      e.byte_cnt = o.byte_cnt;
      qp.inflight.push_back(std::move(e));
    }
    return true;
  }

  // A run of plain RDMA WRITEs (one data segment, same-process responder, nothing observed):
  // qp_step and wqe_exec.h's WRITE rules, as issue() runs them, through a ring that takes only
  // such WQEs and a port that holds fixed what cannot change inside the run (the responder,
  // its state and rights, steady links; no observer, no Dma, nothing in flight; the regions
  // the run's keys name). MRs change only on the control path, which runs neither inside
  // progress() nor (the contract below) in a CQE hook; each WQE's range is still checked.
  // A WQE the ring declines, or any the step fails, is left at head untouched (the run's port
  // has no side effect before it writes) for issue(), which sees it as if this run had not
  // been there: it meets the same fault and raises it. A CQE hook runs inside the run: it may
  // not change rights, links, observers, the Dma, QP states or MRs (after a CQE the run
  // re-checks only whether the CQ overran).
  struct WriteRun {
    Nic& nic;
    Qp& qp;
    Nic& rn;
    Qp& rq;
    Cq& cq;
    // A collapsed CQ that never checks the consumer index (IBGDA's send CQ) shows only its
    // latest CQE, and nothing reads it inside the run (no hook, no observer): the run writes
    // the last one when it ends, with pi and the counts as if it had written each. A WRITE
    // that reads or lands on the CQE first has the CQEs so far written before it.
    // (Such a CQ never overruns: nothing can end the run for it.)
    bool hold_cqes = false;
    bool near_cqe = false;  // the run's regions reach the CQE at all (asked when they are looked up)
    uint64_t held = 0, held_idx = 0;
    uint32_t held_len = 0;
    // The run's head and bytes, stored (with the WQEs since qp.head) when it ends or calls out.
    uint64_t head = 0, bytes = 0;
    uint32_t lkey = 0, rkey = 0;
    const MemoryRegion *lmr = nullptr, *rmr = nullptr;

    bool on_cqe(const std::byte* at, uint64_t len) const { return mem::overlaps(at, len, cq.ring, sizeof(mlx5::Cqe64)); }
    bool region_near_cqe(const MemoryRegion& m) const { return hold_cqes && m.host != nullptr && on_cqe(m.host, m.length); }
    void store_counts() {
      const uint64_t done = head - qp.head;
      if (done == 0) return;
      qp.head = head;
      rq.rcv_upto = head;  // applied() of the last WQE: before head moved, it was head + 1
      qp.stats.wqes += done, qp.stats.wqebbs += done, qp.stats.bytes += bytes;
      nic.bytes_moved_ += bytes;
      nic.now_ += done;
      bytes = 0;
    }
    void write_held() {
      if (held == 0) return;
      cq.pi += held - 1, cq.cqes_written += held - 1;
      post_cqe(nic, cq, qp, held_idx, uint8_t(WqeOpcode::kRdmaWrite), held_len, 0, 0);
      held = 0;
    }
    // A region for the run's key cache: phantom memory is declined (issue() records it).
    const MemoryRegion* region(const MemoryRegion* m) {
      if (m == nullptr || m->phantom) return nullptr;
      near_cqe |= region_near_cqe(*m);
      return m;
    }

    // qp_step's Ring: the QP's ring read without an observer; a 3-DS WQE never wraps.
    const std::byte* first(uint64_t idx) const { return qp.sq + (idx & qp.sq_mask) * mlx5::kWqebb; }
    const std::byte* whole(uint64_t idx, uint32_t) const { return first(idx); }
    static bool takes(uint8_t opcode, uint32_t ds) { return opcode == uint8_t(WqeOpcode::kRdmaWrite) && ds == 3; }
    uint32_t qpn() const { return qp.qpn; }
    uint32_t max_ds() const { return qp.attr.max_ds; }
    bool check_index() const { return nic.cfg_.check_wqe_index; }
    static bool fenced(const mlx5::WqeCtrlSeg&) { return false; }  // nothing in flight
    static bool injected_error(uint64_t) { return false; }
    static WqeFault refused(WqeOpcode) { return {}; }  // RC only
    ExecOutcome execute(const WqeView& v, uint32_t) {
      if (v.npieces != 1) __builtin_unreachable();  // check_wqe: a 3-DS WRITE is one data or inline segment
      return wqe_exec_detail::exec_write(*this, v, false, 0);
    }

    // wqe_exec.h's Port, for a WRITE without immediate.
    std::byte* local(const WqePiece& p, uint32_t need, KeyFault* f, bool*) {
      if (lmr == nullptr || p.lkey != lkey) {
        lmr = region(nic.mrs_.find(lkey = p.lkey, qp.attr.pd, need, f));
        if (lmr == nullptr) return nullptr;
      }
      return resolve_in(*lmr, p.addr, p.len, f);
    }
    static bool answer() { return true; }  // asked when the run began: nothing inside it changes it
    static uint32_t responder_access() { return kRemoteWrite; }  // checked when the run began
    static bool has_receive() { return false; }  // asked only for WRITE_IMM, which the ring declines
    static void deliver_imm(uint32_t, uint64_t) {}
    std::byte* remote(uint32_t key, uint64_t addr, uint64_t len, uint32_t need, KeyFault* f, bool*) {
      if (rmr == nullptr || key != rkey) {
        rmr = region(rn.mrs_.find(rkey = key, rq.attr.pd, need, f));
        if (rmr == nullptr) return nullptr;
      }
      return resolve_in(*rmr, addr, len, f);
    }
    static void responder_error(AsyncEvent::Kind, WqeFault) {}  // the WQE is declined: issue() raises it
    void write(std::byte* dst, uint64_t, const std::byte* src, const WqePiece& p, bool) {
      if (held != 0 && near_cqe && (on_cqe(src, p.len) || on_cqe(dst, p.len))) {
        store_counts();
        write_held();
      }
      copy(rn, dst, src, p.len);  // Responder::store less its observer call: no observer in a run
    }
    static void applied() {}  // the responder's PSN is stored with the counts
    ExecOutcome respond(const RemoteRequest& q) { return wqe_exec_detail::respond_write(*this, q); }
  };

  // Runs WriteRun over the QP's posted WQEs; returns the WQEs executed.
  [[gnu::flatten]] static size_t issue_writes(Nic& nic, Qp& qp, Port& port, size_t budget) {
    if (!nic.cfg_.batch_writes || nic.observer_ != nullptr || nic.dma_ != nullptr || !qp.inflight.empty() || qp.pending_responses != 0 ||
        qp.attr.dc || qp.retry_deadline_ns >= 0 || !port.answer())
      return 0;
    Nic& rn = *port.rn;
    Qp& rq = *port.rq;
    // Links that go down (or a NIC that dies) at some time could change answer() as the run
    // moves the engine's clock: only steady ones keep it fixed.
    if (rn.observer_ != nullptr || rn.dma_ != nullptr || !(rq.remote_access & kRemoteWrite) || !nic.link_steady_ || !rn.link_steady_)
      return 0;
    Cq& cq = *nic.find_cq(qp.attr.send_cqn);
    WriteRun r{nic, qp, rn, rq, cq};
    r.hold_cqes = cq.collapsed && cq.overrun_ignore && cq.delay == 0 && cq.pending.empty() && (cq.on_write == nullptr || !*cq.on_write);
    const uint64_t start = qp.head, prod = qp.prod, end = prod - start > budget ? start + budget : prod;
    r.head = start;
    while (r.head != end) {
      const uint64_t idx = r.head;
      const Step s = qp_step(r, idx, prod, false);
      if (s.kind != StepKind::kExecuted || s.o.fault.failed()) break;  // left to issue()
      r.head = idx + 1, r.bytes += s.o.byte_cnt;
      if (s.signaled && r.hold_cqes) {
        ++r.held, r.held_idx = idx, r.held_len = s.o.byte_cnt;
      } else if (s.signaled) {
        r.store_counts();  // this WQE counted, but its CQE at the engine time before its action, as issue() writes it
        --nic.now_;
        post_cqe(nic, cq, qp, idx, uint8_t(WqeOpcode::kRdmaWrite), s.o.byte_cnt, 0, 0);
        ++nic.now_;
        if (cq.overrun) break;  // an overrun CQ fails its QPs (maybe the responder too, on this NIC)
      }
    }
    const size_t n = r.head - start;
    r.store_counts();
    r.write_held();
    return n;
  }

  // A request of `qp` went unanswered: start its retry timer if it is not running; true once
  // the retries are spent (the caller fails the WQE), false while they last.
  static bool retries_left_out(Nic& nic, Qp& qp, bool rnr, double rnr_ns) {
    const double now = nic.clock_ns();
    if (qp.retry_deadline_ns < 0 || qp.rnr_wait != rnr) {
      qp.rnr_wait = rnr;
      const QpTimers& t = qp.timers;
      qp.retry_deadline_ns = rnr ? (t.rnr_retry == 7 ? std::numeric_limits<double>::infinity() : now + t.rnr_retry * rnr_ns)
                                 : now + std::max<int>(t.retry_count, 1) * ack_timeout_ns(t.ack_timeout);
      nic.trace(trace::kNicRetryStart, uint64_t(qp.qpn), std::string(rnr ? "rnr" : "transport"), qp.retry_deadline_ns);
    }
    if (now < qp.retry_deadline_ns) return false;
    qp.retry_deadline_ns = -1;
    qp.rnr_wait = false;
    return true;
  }

  // Land responses that are due, in order, retiring what they unblock; returns how many.
  // While the link to the peer is down, responses are lost and retransmitted; when the retry
  // timer runs out, the oldest unanswered WQE fails with RETRY_EXC.
  static size_t land_due(Nic& nic, Qp& qp) {
    size_t n = 0;
    while (qp.state == QpState::kRts && !qp.inflight.empty() && !qp.inflight.front().landed &&
           qp.inflight.front().due <= nic.now_) {
      Inflight& e = qp.inflight.front();
      const Nic* rn = qp.attr.dc ? nic.nic_by_lid(e.dc_lid) : nic.peer_nic(qp);
      const bool far = rn == nullptr && far_peer(nic, qp) != nullptr;  // answered at issue
      if (!nic.link_up() || (!far && (rn == nullptr || !rn->link_up()))) {
        if (!retries_left_out(nic, qp, false, 0)) break;
        drop_async(nic, qp, e);
        e.landed = true;
        --qp.pending_responses;
        e.syndrome = uint8_t(CqeSyndrome::kTransportRetryExcErr);
        e.vendor = vendor::kRetryTimeout;
        qp.error_pending = true;
      } else if (e.link_n != 0) {  // a WRITE sent without waiting: its answers decide
        const RemotePeer& far_end = *far_peer(nic, qp);
        if (!take_answers(far_end, e)) {
          if (!head_waits_for_writes(qp)) break;
          // The next WQE (a READ or atomic) waits for this answer: wait for it here, serving
          // the peer meanwhile, as a request that waits for its answer does (poll() gives up
          // after its timeout).
          do far_end.links->serve(), cpu_relax();
          while (!take_answers(far_end, e));
        }
        drop_async(nic, qp, e);
        if (e.link_unanswered) {
          const bool rnr = e.syndrome == uint8_t(CqeSyndrome::kRnrRetryExcErr);
          if (!retries_left_out(nic, qp, rnr, 0)) {
            resend(nic, qp);
            ++n;
            break;
          }
          e.vendor = rnr ? vendor::kRnrTimeout : vendor::kRetryTimeout;
        } else if (!qp.rnr_wait) {
          qp.retry_deadline_ns = -1;
        }
        if (e.syndrome != 0) {
          e.landed = true;
          --qp.pending_responses;
          qp.error_pending = true;
        } else {
          land(nic, qp, e);
        }
      } else {
        if (!qp.rnr_wait) qp.retry_deadline_ns = -1;
        land(nic, qp, e);
      }
      retire(nic, qp);
      ++n;
    }
    return n;
  }

  // What may be issued while WRITEs are in flight without their answers: more WRITEs (and NOPs).
  static bool passes_writes_in_flight(WqeOpcode op) {
    return op == WqeOpcode::kRdmaWrite || op == WqeOpcode::kRdmaWriteImm || op == WqeOpcode::kNop;
  }
  // The WQE at the head is posted whole and is one that waits for WRITEs in flight (fenced()).
  static bool head_waits_for_writes(const Qp& qp) {
    if (qp.async_writes == 0 || qp.head == qp.prod || !head_whole(qp)) return false;
    mlx5::WqeCtrlSeg ctrl;
    std::memcpy(&ctrl, qp.sq + (qp.head & qp.sq_mask) * mlx5::kWqebb, sizeof ctrl);
    return !passes_writes_in_flight(WqeOpcode(ctrl.opcode()));
  }

  // The answers of a WRITE sent without waiting, in order, as far as they came; true once all
  // did. The first that is not a success decides (later segments of a refused or unanswered
  // one find the responder in ERR or still not answering).
  static bool take_answers(const RemotePeer& far, Inflight& e) {
    while (e.link_got < e.link_n) {
      ExecOutcome o;
      const ShmLinks::Poll r =
          far.links->poll(far.process, e.link_seq + e.link_got, [&o](const uint8_t* p, size_t n) { o = wire::decode_response(p, n, nullptr); });
      if (r == ShmLinks::Poll::kNotYet) return false;
      if (r == ShmLinks::Poll::kLost) o.fault = {CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady};
      ++e.link_got;
      if (e.link_unanswered || e.syndrome != 0 || !o.fault.failed()) continue;
      e.link_unanswered = o.not_answered();
      e.syndrome = uint8_t(o.fault.syndrome), e.vendor = o.fault.vendor;
    }
    return true;
  }

  // A WRITE sent without waiting leaves flight: answers not taken yet are dropped when they come.
  static void drop_async(Nic& nic, Qp& qp, Inflight& e) {
    if (e.link_n == 0) return;
    if (const RemotePeer* far = far_peer(nic, qp))
      for (uint32_t k = e.link_got; k < e.link_n; ++k) far->links->forget(far->process, e.link_seq + k);
    e.link_n = 0;
    --qp.async_writes;
  }

  // The WRITE at the front was not answered: it and everything after it (WRITEs, by fenced())
  // go again from its index, as an RC requester goes back to the first unacknowledged PSN.
  static void resend(Nic& nic, Qp& qp) {
    qp.head = qp.inflight.front().wqe_idx;
    for (Inflight& e : qp.inflight) {
      drop_async(nic, qp, e);
      if (!e.landed) --qp.pending_responses;
    }
    qp.inflight.clear();
  }

  static size_t run_qp(Nic& nic, Qp& qp, size_t budget) {
    size_t n = 0;
    if (nic.observer_ != nullptr) nic.observer_->device_actor(&qp, "qpn", qp.qpn);  // each QP's work in its own order
    Port port{nic, qp};
    if (qp.kicked && (qp.state == QpState::kRts || qp.state == QpState::kErr)) {
      qp.kicked = false;
      refresh_prod(nic, qp);
    }
    while (n < budget) {
      if (qp.state == QpState::kErr) {
        if (!flush_one(nic, qp)) break;
        ++n, ++nic.now_;
        continue;
      }
      if (size_t landed = land_due(nic, qp); landed != 0) {
        n += landed;
        continue;
      }
      if (qp.state != QpState::kRts || qp.error_pending) break;
      if (qp.head == qp.prod && !(nic.cfg_.reread_dbr_when_drained && refresh_prod(nic, qp))) break;
      if (const size_t k = issue_writes(nic, qp, port, budget - n); k != 0) {
        n += k;
        continue;
      }
      if (!issue(nic, qp, port)) break;  // fenced behind outstanding responses
      ++n, ++nic.now_;
    }
    return n;
  }

  static bool qp_idle(const Qp& qp) {
    if (qp.state != QpState::kRts && qp.state != QpState::kErr) return true;  // a kick waits for RTS
    if (qp.retry_deadline_ns >= 0) return false;
    return !qp.kicked && qp.inflight.empty() && (qp.head == qp.prod || !head_whole(qp));
  }

  // Earliest engine time at which timed work (responses, late doorbells, delayed CQEs) acts.
  static uint64_t next_event(const Nic& nic) {
    uint64_t t = ~uint64_t{0};
    for (const Qp* q : nic.active_)
      for (const Inflight& e : q->inflight)
        if (!e.landed) {
          if (e.due > nic.now_) t = std::min(t, e.due);  // one due already waits for the link (a timer)
          break;
        }
    if (!nic.late_doorbells_.empty()) t = std::min(t, nic.late_doorbells_.front().due);
    for (const Cq* c : nic.delayed_cqs_)
      if (!c->pending.empty()) t = std::min(t, c->pending.front().due);
    return t;
  }
};

size_t Nic::progress(size_t budget) {
  size_t done = 0;
  if (observer_ != nullptr) observer_->device_actor(this, "engine", 0);
  if (!faults_.qp_errors.empty()) {
    const double now = clock_ns();
    for (Faults::QpError& e : faults_.qp_errors)
      if (!e.fired && now >= e.at_ns) {
        // A QP still being set up fails once it is working (RTS): a fault due before a
        // client's QP reached RTS would otherwise meet RST, where ERR is no transition.
        if (const Qp* q = find_qp(e.qpn); q != nullptr && q->state != QpState::kRts && q->state != QpState::kErr) continue;
        e.fired = true, (void)force_qp_error(e.qpn), ++done;
      }
  }
  if (dead()) {
    waiting_ = "dead node: nothing runs";
    return done;
  }
  if (stalled()) {
    const bool for_good = faults_.stalled || std::isinf(faults_.stall_until_ns);
    if (waiting_.rfind("stalled", 0) != 0)  // once per stall, not every action
      waiting_ = (for_good ? std::string("stalled for good") : "stalled until " + std::to_string(faults_.stall_until_ns) + " ns") +
                 " (stall_nic): takes no doorbell, completes nothing";
    if (faults_.stalled) return done;
    return done != 0 ? done : jump_to_timer();  // the stall's end is a timer like any other
  }
  while (!late_doorbells_.empty() && late_doorbells_.front().due <= now_) {
    const LateDoorbell d = late_doorbells_.front();
    late_doorbells_.pop_front();
    const uint64_t delay = faults_.doorbell_delay;
    faults_.doorbell_delay = 0;
    uar_write64(d.page, d.offset, d.value);
    faults_.doorbell_delay = delay;
    ++done;
  }
  for (size_t i = 0; i < active_.size() && done < budget; ++i) done += Engine::run_qp(*this, *active_[i], budget - done);
  for (Cq* cq : delayed_cqs_) {
    if (observer_ != nullptr) observer_->device_actor(cq, "delayed cqn", cq->cqn);
    const bool was = cq->overrun;
    done += cq->drain(now_);
    if (cq->overrun && !was) Engine::overran(*this, *cq);
  }
  std::erase_if(active_, [](Qp* q) {
    if (!Engine::qp_idle(*q)) return false;
    q->active = false;
    return true;
  });
  waiting_.clear();
  if (done == 0) {
    const uint64_t t = Engine::next_event(*this);
    if (t != ~uint64_t{0}) {
      now_ = std::max(now_ + 1, t);  // nothing can act before t: jump there
      return 1;
    }
    for (const Qp* q : active_)
      if (q->retry_deadline_ns >= 0) {
        waiting_ = "qpn " + std::to_string(q->qpn) +
                   (q->rnr_wait ? (q->timers.rnr_retry == 7 ? ": RNR NAKed, rnr_retry 7 retries forever"
                                                            : ": RNR NAKed, retrying")
                                : ": no answer from the peer, retransmitting until " + std::to_string(q->retry_deadline_ns) + " ns");
        break;
      }
    return jump_to_timer();
  }
  return done;
}

// Nothing can act before the next timer: without a clock, the engine's own time jumps there
// (a step budget); with one, the caller lets time pass. Returns the actions "done".
size_t Nic::jump_to_timer() {
  const double timer = next_timer_ns();
  if (clock_ || timer == std::numeric_limits<double>::infinity()) return 0;
  now_ = std::max(now_ + 1, uint64_t(std::ceil(timer / cfg_.action_ns)));
  return 1;
}

void Nic::serve_remote(const uint8_t* request, size_t len, ShmLinks::Reply& reply) {
  wire::RequestHeader h;
  RemoteRequest q;
  WqePiece piece;
  const std::byte* src = nullptr;
  ExecOutcome o;
  size_t data = 0;
  const bool ok = wire::decode_request(request, len, &h, &q, &piece, &src);
  // Room for the answer: its header, then a READ's data or an atomic's result.
  const size_t room = sizeof(wire::AnswerHeader) + (!ok ? 0 : q.op == mlx5::WqeOpcode::kRdmaRead ? size_t(q.total) : q.atomic_size != 0 ? 32 : 0);
  uint8_t* out = reply.room(room);
  if (out == nullptr) return;  // cannot cross: no answer, as a lost packet
  if (!ok) {
    o.fault = {mlx5::CqeSyndrome::kRemoteInvalReqErr, vendor::kBadSegment};  // not a request: refused
  } else {
    Engine::RemoteResponder r{{this, find_qp(h.dst_qpn)}, h, reinterpret_cast<std::byte*>(out + sizeof(wire::AnswerHeader)),
                              room - sizeof(wire::AnswerHeader)};
    o = respond(r, q);
    data = r.len;
  }
  reply.done(wire::encode_answer(o, data, out));
}

void Nic::forget_link_requests(Qp& qp) {
  for (Inflight& e : qp.inflight) Engine::drop_async(*this, qp, e);
}

bool Nic::idle() const {
  if (dead()) return true;
  if (!late_doorbells_.empty()) return false;
  for (const Cq* c : delayed_cqs_)
    if (!c->pending.empty()) return false;
  for (const Qp* q : active_)
    if (!Engine::qp_idle(*q)) return false;
  return true;
}

}  // namespace doorbell::mock_nic
