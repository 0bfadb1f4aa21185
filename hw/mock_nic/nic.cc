// Control path of the NIC model: object creation, the QP state machine, doorbells, faults.
#include "hw/mock_nic/nic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/nic_run_state.h"

namespace doorbell::mock_nic {

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::kRst: return "RST";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

const char* async_event_name(AsyncEvent::Kind k) {
  switch (k) {
    case AsyncEvent::kQpFatal: return "QP_FATAL";
    case AsyncEvent::kQpAccessError: return "QP_ACCESS_ERR";
    case AsyncEvent::kQpRequestError: return "QP_REQ_ERR";
    case AsyncEvent::kCqError: return "CQ_ERR";
    case AsyncEvent::kDctKeyViolation: return "DCT_KEY_VIOLATION";
  }
  return "?";
}

double ack_timeout_ns(uint8_t t) {
  if (t == 0) return std::numeric_limits<double>::infinity();  // IB: 0 disables the timer
  return 4096.0 * std::ldexp(1.0, std::min<int>(t, 31));
}

double rnr_nak_ns(uint8_t code) {
  // IB spec 9.7.5.2.8, in units of 10 us (code 0 is the longest: 655.36 ms).
  static constexpr double kTenUs[32] = {65536, 1,   2,   3,    4,    6,    8,    12,   16,   24,   32,
                                        48,    64,  96,  128,  192,  256,  384,  512,  768,  1024, 1536,
                                        2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return kTenUs[code & 31] * 10'000.0;
}

Nic::Nic(mem::AddressSpace& mem, NicConfig cfg) : mem_(mem), cfg_(cfg), mrs_(mem, uint8_t((cfg.lid - 1u) * 0x35u)), rng_(cfg.seed | 1) {}

Nic::~Nic() {
  for (auto& q : qps_)
    if (q) {
      mem_.unpin(q->attr.sq_va);
      mem_.unpin(q->attr.dbr_va);
    }
  for (auto& c : cqs_)
    if (c) {
      mem_.unpin(c->buf_va);
      mem_.unpin(c->dbr_va);
    }
}

Nic* Nic::peer_nic(const Qp& qp) const { return nic_by_lid(qp.peer.lid); }
Nic* Nic::nic_by_lid(uint16_t lid) const {
  if (fabric_ != nullptr) return fabric_->by_lid(lid);
  return lid == cfg_.lid ? const_cast<Nic*>(this) : nullptr;
}

const Qp* Nic::qp(uint32_t qpn) const { return const_cast<Nic*>(this)->find_qp(qpn); }
const Cq* Nic::cq(uint32_t cqn) const { return const_cast<Nic*>(this)->find_cq(cqn); }

Result<uint32_t> Nic::create_cq(const CqAttr& a) {
  if (a.log_size > 22) return Status(Errc::kBadParam, "create_cq: log_size " + std::to_string(a.log_size) + " > 22");
  const uint64_t bytes = uint64_t(64) << a.log_size;
  auto cq = std::make_unique<Cq>();
  cq->ring = reinterpret_cast<mlx5::Cqe64*>(mem_.translate(a.buf_va, bytes));
  cq->dbr = reinterpret_cast<mlx5::CqDoorbellRecord*>(mem_.translate(a.dbr_va, sizeof(mlx5::CqDoorbellRecord)));
  if (cq->ring == nullptr) return Status(Errc::kBadParam, "create_cq: CQ buffer not mapped for " + std::to_string(bytes) + " bytes");
  if (cq->dbr == nullptr) return Status(Errc::kBadParam, "create_cq: doorbell record not mapped");
  if (a.buf_va % 64 != 0 || a.dbr_va % 8 != 0) return Status(Errc::kBadParam, "create_cq: misaligned buffer or doorbell record");
  (void)mem_.pin(a.buf_va);
  (void)mem_.pin(a.dbr_va);
  cq->log_size = a.log_size;
  cq->collapsed = a.collapsed;
  cq->overrun_ignore = a.overrun_ignore;
  cq->buf_va = a.buf_va;
  cq->dbr_va = a.dbr_va;
  cq->cqn = kFirstCqn + uint32_t(cqs_.size());
  cq->on_write = &cqe_hook_;
  cq->observer = &observer_;
  cqs_.push_back(std::move(cq));
  return cqs_.back()->cqn;
}

Status Nic::destroy_cq(uint32_t cqn) {
  Cq* cq = find_cq(cqn);
  if (cq == nullptr) return Status(Errc::kNotFound, "destroy_cq: unknown cqn");
  for (auto& q : qps_)
    if (q && (q->attr.send_cqn == cqn || q->attr.recv_cqn == cqn))
      return Status(Errc::kBadState, "destroy_cq: CQ still used by QP " + std::to_string(q->qpn));
  std::erase(delayed_cqs_, cq);
  mem_.unpin(cq->buf_va);
  mem_.unpin(cq->dbr_va);
  cqs_[cqn - kFirstCqn].reset();
  return {};
}

Result<uint32_t> Nic::create_qp(const QpAttr& a) {
  if (a.log_sq_size > 15) return Status(Errc::kBadParam, "create_qp: log_sq_size > 15 (16-bit counters would alias)");
  if (a.max_ds == 0 || a.max_ds > mlx5::kMaxDs) return Status(Errc::kBadParam, "create_qp: max_ds out of 1..63");
  if (find_cq(a.send_cqn) == nullptr) return Status(Errc::kNotFound, "create_qp: unknown send CQ");
  if (a.recv_cqn != 0 && find_cq(a.recv_cqn) == nullptr) return Status(Errc::kNotFound, "create_qp: unknown receive CQ");
  if (a.uar_page == 0 || a.uar_page >= next_uar_) return Status(Errc::kNotFound, "create_qp: unknown UAR page");
  if (a.srqn != 0 && srq(a.srqn) == nullptr) return Status(Errc::kNotFound, "create_qp: unknown SRQ");
  if ((a.recv_cqn != 0) != (a.srqn != 0)) return Status(Errc::kBadParam, "create_qp: a receive queue is an SRQ and its CQ, both or neither");
  const uint64_t bytes = uint64_t(mlx5::kWqebb) << a.log_sq_size;
  auto qp = std::make_unique<Qp>();
  qp->sq = mem_.translate(a.sq_va, bytes);
  qp->dbr = reinterpret_cast<mlx5::QpDoorbellRecord*>(mem_.translate(a.dbr_va, sizeof(mlx5::QpDoorbellRecord)));
  if (qp->sq == nullptr) return Status(Errc::kBadParam, "create_qp: send ring not mapped for " + std::to_string(bytes) + " bytes");
  if (qp->dbr == nullptr) return Status(Errc::kBadParam, "create_qp: doorbell record not mapped");
  if (a.sq_va % mlx5::kWqebb != 0 || a.dbr_va % 8 != 0) return Status(Errc::kBadParam, "create_qp: misaligned ring or doorbell record");
  (void)mem_.pin(a.sq_va);
  (void)mem_.pin(a.dbr_va);
  qp->attr = a;
  qp->sq_mask = (uint64_t(1) << a.log_sq_size) - 1;
  qp->qpn = kFirstQpn + uint32_t(qps_.size());
  qps_.push_back(std::move(qp));
  return qps_.back()->qpn;
}

Result<uint32_t> Nic::create_dct(const DctAttr& a) {
  if (a.srqn != 0 && srq(a.srqn) == nullptr) return Status(Errc::kNotFound, "create_dct: unknown SRQ");
  if (a.recv_cqn != 0 && find_cq(a.recv_cqn) == nullptr) return Status(Errc::kNotFound, "create_dct: unknown receive CQ");
  if ((a.recv_cqn != 0) != (a.srqn != 0)) return Status(Errc::kBadParam, "create_dct: a receive queue is an SRQ and its CQ, both or neither");
  auto qp = std::make_unique<Qp>();
  qp->attr.pd = a.pd, qp->attr.srqn = a.srqn, qp->attr.recv_cqn = a.recv_cqn;
  qp->attr.dct = true, qp->attr.dc_key = a.dc_key;
  qp->remote_access = a.remote_access, qp->atomic_mode = a.atomic_mode;
  qp->state = QpState::kRtr;
  qp->qpn = kFirstQpn + uint32_t(qps_.size());
  qps_.push_back(std::move(qp));
  return qps_.back()->qpn;
}

Status Nic::destroy_qp(uint32_t qpn) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "destroy_qp: unknown qpn");
  std::erase(active_, qp);
  if (qp->attr.dct) return qps_[qpn - kFirstQpn].reset(), Status();
  mem_.unpin(qp->attr.sq_va);
  mem_.unpin(qp->attr.dbr_va);
  qps_[qpn - kFirstQpn].reset();
  return {};
}

Status Nic::modify_qp(uint32_t qpn, QpState to, const QpPeer* peer) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "modify_qp: unknown qpn " + std::to_string(qpn));
  if (qp->attr.dct) return Status(Errc::kBadParam, "modify_qp: " + std::to_string(qpn) + " is a DCT (active from CREATE_DCT until destroyed)");
  if (observer_ != nullptr) {  // the caller comes after what the QP did, and its CQ's delayed CQEs
    observer_->device_command(qp);
    if (Cq* cq = find_cq(qp->attr.send_cqn)) observer_->device_command(cq);
  }
  const QpState from = qp->state;
  // Any state may go to RST; any but RST to ERR (a ConnectX refuses 2ERR on a reset QP).
  bool legal = (to == QpState::kErr && from != QpState::kRst) || to == QpState::kRst || (from == QpState::kRst && to == QpState::kInit) ||
               (from == QpState::kInit && (to == QpState::kInit || to == QpState::kRtr)) ||
               (from == QpState::kRtr && to == QpState::kRts) || (from == QpState::kRts && to == QpState::kRts);
  if (!legal)
    return Status(Errc::kBadState, std::string("modify_qp: illegal transition ") + qp_state_name(from) + " -> " + qp_state_name(to));
  if (to == QpState::kRtr) {
    if (peer == nullptr) return Status(Errc::kBadParam, "modify_qp: INIT->RTR needs the peer's LID and QPN");
    qp->peer = *peer;
  }
  if (to == QpState::kRst) {
    qp->head = qp->prod = 0;
    qp->audit_dbr = 0;
    forget_link_requests(*qp);
    qp->inflight.clear();
    // A reset QP completes nothing more: completions still held back (late-CQE fault) go
    // with it, or one would land in the CQ after software reset it for the next epoch.
    for (uint32_t cqn : {qp->attr.send_cqn, qp->attr.recv_cqn})
      if (Cq* cq = cqn != 0 ? find_cq(cqn) : nullptr)
        std::erase_if(cq->pending, [qpn](const Cq::Pending& p) { return p.c.qpn == qpn; });
    qp->pending_responses = 0;
    qp->error_pending = qp->kicked = false;
    qp->retry_deadline_ns = -1;
    qp->rnr_wait = false;
    qp->rcv_upto = 0;
  }
  qp->state = to;
  if (to != QpState::kRts) qp->retry_deadline_ns = -1, qp->rnr_wait = false;  // only RTS retransmits
  // Doorbells rung before RTS were remembered; entering RTS acts on them. Entering ERR
  // flushes what was issued or rung. Neither reads a DBR that no doorbell announced.
  if (to == QpState::kErr || (to == QpState::kRts && (qp->kicked || qp->head != qp->prod))) kick(*qp);
  return {};
}

void Nic::kick(Qp& qp) {
  if (qp.active) return;
  qp.active = true;
  active_.push_back(&qp);
  if (wake_hook_) wake_hook_();
}

// No fault or outage scheduled, no delayed doorbell or CQE waiting: what both questions
// below begin with.
bool Nic::nothing_scheduled() const {
  if (!late_doorbells_.empty() || faults_.doorbell_delay != 0 || !link_steady_ || faults_.stalled ||
      faults_.stall_until_ns > faults_.stall_from_ns)
    return false;
  for (const Cq* c : delayed_cqs_)
    if (!c->pending.empty()) return false;
  for (const Faults::QpError& e : faults_.qp_errors)
    if (!e.fired) return false;
  return true;
}

bool Nic::untimed() const {
  if (!nothing_scheduled() || cfg_.response_delay_max != 0) return false;
  for (const Cq* c : delayed_cqs_)
    if (c->delay != 0) return false;
  for (const Qp* q : active_)
    if (q->retry_deadline_ns >= 0) return false;
  return true;
}

bool Nic::sleeps_until_kicked() const { return active_.empty() && nothing_scheduled(); }

// A doorbell that the faults drop or delay, or that names no QP of its page: out of line, so
// that the doorbell path's frame is not the one these traces' strings need.
[[gnu::noinline, gnu::cold]] void Nic::odd_doorbell(uint32_t page, uint32_t offset, uint64_t value) {
  if (faults_.drop_doorbells > 0) {
    --faults_.drop_doorbells;
    trace(trace::kNicDoorbellDropped, uint64_t(page));
    return;
  }
  if (faults_.doorbell_delay > 0) {
    late_doorbells_.push_back({now_ + faults_.doorbell_delay, page, offset, value});
    return;
  }
  ++bad_doorbells_;
  trace(trace::kNicBadDoorbell, uint64_t(page), uint64_t(offset), uint64_t(mlx5::bswap32(uint32_t(value >> 32)) >> 8));
}

void Nic::uar_write64(uint32_t page, uint32_t offset, uint64_t value, bool bf_is_clients) {
  if (faults_.drop_doorbells > 0 || faults_.doorbell_delay > 0) return odd_doorbell(page, offset, value);
  // Bytes 4..7 of the store are the ctrl segment's qpn_ds word, big-endian.
  const uint32_t qpn_ds = mlx5::bswap32(uint32_t(value >> 32));
  Qp* qp = find_qp(qpn_ds >> 8);
  if (offset < mlx5::kBfOffset || offset >= mlx5::kBfOffset + 2 * mlx5::kBfSize || offset % 8 != 0 || qp == nullptr ||
      qp->attr.uar_page != page)
    return odd_doorbell(page, offset, value);
  if (cfg_.audit) [[unlikely]] audit_doorbell(*qp, value, bf_is_clients);
  ++qp->stats.doorbells;
  qp->last_doorbell = value;
  qp->kicked = true;
  kick(*qp);
}

Status Nic::set_qp_access(uint32_t qpn, uint32_t access) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "set_qp_access: unknown qpn");
  qp->remote_access = access & (kRemoteWrite | kRemoteRead | kRemoteAtomic);
  return {};
}

Status Nic::set_qp_atomic_mode(uint32_t qpn, uint8_t mode) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "set_qp_atomic_mode: unknown qpn");
  qp->atomic_mode = mode;
  return {};
}

Status Nic::set_qp_timers(uint32_t qpn, const QpTimers& t) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "set_qp_timers: unknown qpn");
  if (t.retry_count > 7 || t.rnr_retry > 7 || t.ack_timeout > 31 || t.min_rnr_nak > 31)
    return Status(Errc::kBadParam, "set_qp_timers: retry_count / rnr_retry are 3 bits, ack_timeout / min_rnr_nak 5 bits");
  qp->timers = t;
  return {};
}

void Nic::raise(AsyncEvent e) {
  events_.push_back(e);
  trace(trace::kNicAsyncEvent, std::string(async_event_name(e.kind)), uint64_t(e.object));
}

void Nic::fail_qp(Qp& qp) {
  qp.state = QpState::kErr;
  qp.retry_deadline_ns = -1;
  qp.rnr_wait = false;
  kick(qp);
}

double Nic::clock_ns() const {
  if (clock_) return clock_();
  return fabric_ != nullptr ? fabric_->now_ns() : double(now_) * cfg_.action_ns;
}

void Nic::set_link_down(double from_ns, double until_ns) {
  link_down_from_ns_ = from_ns, link_down_until_ns_ = until_ns;
  link_steady_ = dead_from_ns_ < 0 && link_down_until_ns_ <= link_down_from_ns_;
}

bool Nic::inject(FaultKind k, double at_ns, double for_ns, uint32_t count) {
  switch (k) {
    case kLinkDown: set_link_down(at_ns, at_ns + for_ns); return true;
    case kStall:
      if (at_ns == 0 && std::isinf(for_ns)) faults_.stalled = true;
      else faults_.stall_from_ns = at_ns, faults_.stall_until_ns = at_ns + for_ns;
      return true;
    case kLostDoorbells: faults_.drop_doorbells = count; return true;
    case kLateDoorbells: faults_.doorbell_delay = count; return true;
    case kNodeDeath: set_dead(at_ns); return true;
    default: return false;
  }
}

void Nic::set_dead(double from_ns) {
  dead_from_ns_ = std::max(from_ns, 0.0);
  link_steady_ = false;
}

bool Nic::link_up_at_clock() const {
  if (dead()) return false;
  if (link_down_until_ns_ <= link_down_from_ns_) return true;  // no outage set
  const double t = clock_ns();
  return !(t >= link_down_from_ns_ && t < link_down_until_ns_);
}

double Nic::next_timer_ns() const {
  double t = std::numeric_limits<double>::infinity();
  if (dead()) return t;  // nothing runs on a dead node, its timers included
  const double now = clock_ns();
  if (now >= faults_.stall_from_ns && now < faults_.stall_until_ns) t = faults_.stall_until_ns;
  // A fault due later is not something to wait for: it fires if the NIC is still at work then.
  for (const Qp* q : active_) {
    if (q->retry_deadline_ns < 0 || q->state != QpState::kRts) continue;
    t = std::min(t, q->retry_deadline_ns);
    // The link coming back (here or at the peer) may let a waiting QP go on before then.
    const Nic* peer = peer_nic(*q);
    for (const Nic* n : {static_cast<const Nic*>(this), peer})
      if (n != nullptr && !n->dead() && n->clock_ns() < n->link_down_until_ns_)
        t = std::min(t, std::max(n->link_down_until_ns_, clock_ns()));
  }
  return t;
}

Result<uint32_t> Nic::create_srq(uint32_t pd, uint32_t max_wr) {
  if (max_wr == 0) return Status(Errc::kBadParam, "create_srq: max_wr 0");
  srqs_.push_back(Srq{kFirstSrqn + uint32_t(srqs_.size()), pd, max_wr, 0, 0});
  return srqs_.back().srqn;
}

Status Nic::post_srq_recv(uint32_t srqn, uint32_t count) {
  if (srqn < kFirstSrqn || srqn - kFirstSrqn >= srqs_.size()) return Status(Errc::kNotFound, "post_srq_recv: unknown srqn");
  Srq& s = srqs_[srqn - kFirstSrqn];
  if (s.posted + count - s.consumed > s.max_wr) return Status(Errc::kNoResource, "post_srq_recv: SRQ full");
  s.posted += count;
  return {};
}

const Srq* Nic::srq(uint32_t srqn) const {
  if (srqn < kFirstSrqn || srqn - kFirstSrqn >= srqs_.size()) return nullptr;
  return &srqs_[srqn - kFirstSrqn];
}

std::array<uint8_t, 16> Nic::gid() const {
  std::array<uint8_t, 16> g{0xfe, 0x80};
  g[14] = uint8_t(cfg_.lid >> 8);
  g[15] = uint8_t(cfg_.lid);
  return g;
}

Status Nic::force_qp_error(uint32_t qpn) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "force_qp_error: unknown qpn");
  trace(trace::kNicQpErrorForced, uint64_t(qpn));
  return modify_qp(qpn, QpState::kErr);
}

Status Nic::start_sq_at(uint32_t qpn, uint64_t idx) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) return Status(Errc::kNotFound, "start_sq_at: unknown qpn " + std::to_string(qpn));
  if (qp->head != 0 || qp->prod != 0 || qp->rcv_upto != 0 || !qp->inflight.empty() || qp->stats.wqes != 0)
    return Status(Errc::kBadState, "start_sq_at: qpn " + std::to_string(qpn) + " has already worked");
  qp->head = qp->prod = qp->rcv_upto = idx;
  return {};
}

Status Nic::set_completion_delay(uint32_t cqn, uint64_t actions) {
  Cq* cq = find_cq(cqn);
  if (cq == nullptr) return Status(Errc::kNotFound, "set_completion_delay: unknown cqn");
  cq->delay = actions;
  if (std::find(delayed_cqs_.begin(), delayed_cqs_.end(), cq) == delayed_cqs_.end()) delayed_cqs_.push_back(cq);
  return {};
}

}  // namespace doorbell::mock_nic
