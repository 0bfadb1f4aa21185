// The software mlx5 NIC: a device model that executes real mlx5 send WQEs from modelled
// memory. Objects (PDs, MRs, UARs, CQs, RC QPs) are created through a plain C++ API (the
// DEVX command interface sits on top later). When a doorbell arrives on a UAR, the engine
// reads the QP's send doorbell record and consumes WQEs in order: RDMA WRITE (+IMM), READ,
// atomics (CS, FA, masked), NOP, DUMP, honouring fences; it writes CQEs for CQ_UPDATE WQEs
// and, like hardware, an error CQE with the mlx5 syndrome for a bad WQE, after which the QP
// is in ERR and every further WQE is flushed. Data never moves unless a key check passed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "hw/mem/address_space.h"
#include "hw/mem/observer.h"
#include "hw/mock_nic/cq.h"
#include "hw/mock_nic/dma.h"
#include "hw/mock_nic/fault_kind.h"
#include "hw/mock_nic/link.h"
#include "hw/mock_nic/mr_table.h"
#include "hw/mock_nic/qp.h"
#include "hw/mock_nic/types.h"
#include "hw/trace/event.h"

namespace doorbell::mock_nic {

class Fabric;

// A transfer that touched phantom memory: recorded instead of performed.
struct PhantomCopy {
  uint64_t dst, src, len;  // src 0: inline data
};

struct CqAttr {
  uint32_t log_size = 6;
  uint64_t buf_va = 0;   // 2^log_size * 64 bytes, initialised by the driver (0xff: invalid)
  uint64_t dbr_va = 0;   // CqDoorbellRecord
  bool collapsed = false;
  bool overrun_ignore = false;  // cqc.oi
};

// Fault injection: the hooks scenarios and property tests use to provoke hangs and errors.
struct Faults {
  bool stalled = false;          // the engine does nothing while set
  uint32_t drop_doorbells = 0;   // the next N doorbells are lost
  uint64_t doorbell_delay = 0;   // doorbells act this many engine actions late
  // (A link outage and the node's death are set through Nic::set_link_down / set_dead.)
  double stall_from_ns = 0, stall_until_ns = 0;  // the engine does nothing in this window
  struct QpError {
    double at_ns;
    uint32_t qpn;
    bool fired = false;
  };
  std::vector<QpError> qp_errors;  // force these QPs to ERR at these times (or when they reach RTS, if later)
};

class Nic {
 public:
  explicit Nic(mem::AddressSpace& mem, NicConfig cfg = {});
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  const NicConfig& config() const { return cfg_; }
  uint16_t lid() const { return cfg_.lid; }
  mem::AddressSpace& memory() { return mem_; }

  // --- control path ---
  uint32_t alloc_pd() { return next_pd_++; }
  Result<uint32_t> reg_mr(uint32_t pd, uint64_t addr, uint64_t length, uint32_t access) {
    return mrs_.reg(pd, addr, length, access);
  }
  Status dereg_mr(uint32_t key) { return mrs_.dereg(key); }
  const MrTable& mrs() const { return mrs_; }

  // UAR pages; each has a modelled MMIO address where doorbell stores land.
  uint32_t alloc_uar() { return next_uar_++; }
  uint64_t uar_va(uint32_t page) const;

  Result<uint32_t> create_cq(const CqAttr& a);
  Status destroy_cq(uint32_t cqn);
  Result<uint32_t> create_qp(const QpAttr& a);
  // A DC target, in RTR at once (CREATE_DCT); destroy_qp destroys it.
  Result<uint32_t> create_dct(const DctAttr& a);
  // RST->INIT->RTR(peer required)->RTS, any->ERR, any->RST.
  Status modify_qp(uint32_t qpn, QpState to, const QpPeer* peer = nullptr);
  Status destroy_qp(uint32_t qpn);

  const Qp* qp(uint32_t qpn) const;
  const Cq* cq(uint32_t cqn) const;
  // Which remote operations peers may perform on this QP (set at RST2INIT).
  Status set_qp_access(uint32_t qpn, uint32_t access);
  Status set_qp_atomic_mode(uint32_t qpn, uint8_t mode);
  Status set_qp_timers(uint32_t qpn, const QpTimers& t);
  // Harness reach (no hardware counterpart): the QP's send queue and, as responder, the peer
  // index it expects next begin at `idx` instead of 0, so index arithmetic meets 2^16, 2^32
  // and 2^63 within a short run. Only before the QP did any work; RST takes it back to 0.
  Status start_sq_at(uint32_t qpn, uint64_t idx);

  // Shared receive queues: created in a PD, receives posted by count.
  Result<uint32_t> create_srq(uint32_t pd, uint32_t max_wr);
  Status post_srq_recv(uint32_t srqn, uint32_t count);
  const Srq* srq(uint32_t srqn) const;

  // The port GID: link-local prefix with the LID in the interface id.
  std::array<uint8_t, 16> gid() const;
  Fabric* fabric() const { return fabric_; }

  // --- MMIO: a 64-bit store to a UAR (BlueFlame doorbell: first 8 bytes of a ctrl seg) ---
  // `bf_is_clients`: the value is what the client stored (false: a doorbell the caller made
  // up for a QP sharing the page, whose index means nothing).
  void uar_write64(uint32_t page, uint32_t offset, uint64_t value, bool bf_is_clients = true);
  // The same store by modelled address; false if the address is not a UAR register.
  bool mmio_write64(uint64_t addr, uint64_t value);

  // --- engine ---
  // Perform up to `budget` engine actions (WQEs executed, responses landed, CQEs written);
  // returns how many. When nothing can act now but timed work is pending, time jumps to it.
  size_t progress(size_t budget = ~size_t{0});
  // True when no QP has work the engine could still do (ignoring stalls).
  bool idle() const;

  // --- fault injection ---
  Faults& faults() { return faults_; }
  // The port is down in [from_ns, until_ns) of the NIC's clock: packets in either direction
  // are lost, so requesters retransmit until their retry timers expire.
  void set_link_down(double from_ns, double until_ns);
  // A fault of the NIC's node (fault_kind.h): link_down and stall_nic for [at_ns, at_ns +
  // for_ns) (a stall from 0 for ever: for good), drop_doorbells / doorbell_delay `count`,
  // node_death at at_ns. False for the kinds that need a QP, a CQ or keys (the caller's).
  bool inject(FaultKind k, double at_ns, double for_ns, uint32_t count);
  // The node is gone (from `from_ns` of its clock on; 0: now): nothing answers, nothing runs.
  void set_dead(double from_ns = 0);
  Status force_qp_error(uint32_t qpn);
  Status set_completion_delay(uint32_t cqn, uint64_t actions);

  // Harness reach (no hardware counterpart), for a world that runs many programs: keep the
  // engine's run state — every QP's and CQ's state, the clock, faults, records, hooks —
  // once the control path has set the NIC up, and put it back to begin the next run as on a
  // fresh NIC. Memory registrations and the object counters are not run state: a restore
  // needs the same QPs and CQs as the save, and the buffers' bytes are the owner's to reset.
  void save_run_state();
  Status restore_run_state();

  uint64_t now() const { return now_; }
  // The clock timers run on: simulated nanoseconds when a clock is set (timed schedules),
  // else engine actions times config().action_ns — on a fabric, the furthest of its NICs'
  // (one clock for all, so a peer's link comes back while this NIC waits for it).
  void set_clock(std::function<double()> ns) { clock_ = std::move(ns); }
  double clock_ns() const;
  // With a clock set: the earliest time a waiting timer acts (infinity: none). Without one,
  // progress() jumps the engine there itself.
  double next_timer_ns() const;
  // Answer a request from a NIC in another process (link.h, wire.h): the responder half
  // against this NIC's QPs and memory.
  void serve_remote(const uint8_t* request, size_t len, ShmLinks::Reply& reply);
  // Asked at every request, of both ends: one flag while no outage and no death is set.
  bool link_up() const { return link_steady_ || link_up_at_clock(); }
  bool dead() const { return dead_from_ns_ >= 0 && clock_ns() >= dead_from_ns_; }
  // The engine is frozen now (stall_nic): it takes no doorbell and completes nothing, flush
  // completions of a QP moved to ERR included.
  bool stalled() const {
    return faults_.stalled || (faults_.stall_until_ns > faults_.stall_from_ns && clock_ns() >= faults_.stall_from_ns &&
                               clock_ns() < faults_.stall_until_ns);
  }
  // What the engine waits on when it cannot act (for hang reports); empty when idle.
  const std::string& waiting() const { return waiting_; }
  // Every QP's doorbell record beside what the engine fetched, every CQ's last CQE and the
  // client's consumer index, the error records, what the engine waits on (report.cc).
  std::string queue_report() const;
  // Root causes: every WQE that failed other than by a flush, in order; and async events.
  const std::vector<ErrorRecord>& errors() const { return errors_; }
  const std::vector<AsyncEvent>& events() const { return events_; }
  // Transfers into or out of phantom memory, in execution order.
  const std::vector<PhantomCopy>& phantom_log() const { return phantom_log_; }
  // Payload bytes moved by executed WQEs so far (for time models).
  uint64_t bytes_moved() const { return bytes_moved_; }
  // Called with the address of each CQE's last 8 bytes after it is written (time models).
  void set_cqe_hook(std::function<void(const void*)> fn) { cqe_hook_ = std::move(fn); }
  // Called when a QP gets work it did not have (a doorbell, a move to ERR): an
  // engine that sleeps until then (sleeps_until_kicked) wakes, as hardware on its doorbell.
  void set_wake_hook(std::function<void()> fn) { wake_hook_ = std::move(fn); }
  // Nothing but a new kick can give the engine work: no active QP, nothing timed (late
  // doorbells, delayed CQEs, QP errors to fire, a stall) and no link fault.
  bool sleeps_until_kicked() const;
  // Nothing this engine does depends on its clock or on when it acts: no fault or outage
  // scheduled, no delayed CQE, doorbell or response, no retry timer. Then a run of actions
  // in one progress() call ends as the same actions over as many calls would.
  bool untimed() const;
  uint64_t bad_doorbells() const { return bad_doorbells_; }
  // NicConfig::audit's findings, a line each, in the order they fired.
  const std::vector<std::string>& audit() const { return audit_; }
  // A weak memory model that must hear of the engine's writes to memory and of its reads of
  // WQEs and DBRs (null: none); `name` identifies this NIC in its notes.
  void set_observer(mem::Observer* o, std::string name) {
    observer_ = o;
    observer_name_ = std::move(name);
  }
  // Registered memory behind a real device (dma.h): every byte a WQE moves, and every
  // atomic, goes through `d` (null: the engine moves host memory itself).
  void set_dma(Dma* d) { dma_ = d; }
  // Trace events (hw/trace/event.h: mock_nic_<area>_<event>) for errors, retries and faults.
  void set_trace(std::function<void(const trace::Event&)> fn) { trace_ = std::move(fn); }

 private:
  friend class Fabric;
  friend struct Engine;

  Qp* find_qp(uint32_t qpn);
  Cq* find_cq(uint32_t cqn);
  // The NIC a QP's packets go to (by the peer LID; without a fabric, only this one).
  Nic* peer_nic(const Qp& qp) const;
  Nic* nic_by_lid(uint16_t lid) const;
  void raise(AsyncEvent e);
  size_t jump_to_timer();
  bool link_up_at_clock() const;
  void fail_qp(Qp& qp);  // to ERR from the data path (flushes follow)
  void audit_doorbell(Qp& qp, uint64_t value, bool bf_is_clients);  // audit.cc
  void audit_cq_overrun(const Cq& cq);
  void kick(Qp& qp);
  void odd_doorbell(uint32_t page, uint32_t offset, uint64_t value);  // uar_write64's other cases
  void forget_link_requests(Qp& qp);  // its WRITEs in flight to another process: answers dropped
  bool nothing_scheduled() const;  // untimed() and sleeps_until_kicked() less their own tests
  template <class... A>
  void trace(const trace::Decl& d, A&&... a) {
    if (trace_) trace_(trace::make(d, std::forward<A>(a)...));
  }

  mem::AddressSpace& mem_;
  NicConfig cfg_;
  Fabric* fabric_ = nullptr;
  MrTable mrs_;
  std::vector<std::unique_ptr<Qp>> qps_;  // index qpn - kFirstQpn
  std::vector<std::unique_ptr<Cq>> cqs_;  // index cqn - kFirstCqn
  std::vector<Srq> srqs_;                 // index srqn - kFirstSrqn
  std::vector<Qp*> active_;
  std::vector<Cq*> delayed_cqs_;
  struct LateDoorbell {
    uint64_t due;
    uint32_t page, offset;
    uint64_t value;
  };
  std::deque<LateDoorbell> late_doorbells_;
  Faults faults_;
  double link_down_from_ns_ = 0, link_down_until_ns_ = 0;  // set_link_down
  double dead_from_ns_ = -1;                                // set_dead (negative: never)
  bool link_steady_ = true;  // neither of the two set: the link is up at every time
  uint32_t next_pd_ = 1, next_uar_ = 1;
  uint64_t now_ = 0;
  uint64_t rng_;
  uint64_t bad_doorbells_ = 0;
  uint64_t bytes_moved_ = 0;
  std::vector<PhantomCopy> phantom_log_;
  std::function<void(const void*)> cqe_hook_;
  std::function<void()> wake_hook_;
  mem::Observer* observer_ = nullptr;
  Dma* dma_ = nullptr;
  std::string observer_name_;
  std::function<void(const trace::Event&)> trace_;
  std::function<double()> clock_;
  std::string waiting_;
  std::vector<ErrorRecord> errors_;
  std::vector<AsyncEvent> events_;
  std::vector<std::string> audit_;
  // Every field above that a run changes, copied by save_run_state (nic.cc): a new one goes
  // there too.
  struct RunState;
  std::unique_ptr<RunState> saved_;
};

inline constexpr uint32_t kFirstQpn = 0x100;
inline constexpr uint32_t kFirstCqn = 0x400;
inline constexpr uint32_t kFirstSrqn = 0x800;
inline constexpr uint64_t kUarBase = 0x0000'6000'0000'0000ull;

// Inline: every doorbell (and every signaled WQE) goes through these.
inline uint64_t Nic::uar_va(uint32_t page) const { return kUarBase + (uint64_t(cfg_.lid) << 32) + uint64_t(page) * mlx5::kUarPageSize; }
inline bool Nic::mmio_write64(uint64_t addr, uint64_t value) {
  const uint64_t off = addr - uar_va(0), page = off / mlx5::kUarPageSize;  // below the base: off wraps, page too large
  if (page == 0 || page >= next_uar_) return false;
  uar_write64(uint32_t(page), uint32_t(off % mlx5::kUarPageSize), value);
  return true;
}
inline Qp* Nic::find_qp(uint32_t qpn) {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
  return qps_[qpn - kFirstQpn].get();
}
inline Cq* Nic::find_cq(uint32_t cqn) {
  if (cqn < kFirstCqn || cqn - kFirstCqn >= cqs_.size()) return nullptr;
  return cqs_[cqn - kFirstCqn].get();
}

}  // namespace doorbell::mock_nic
