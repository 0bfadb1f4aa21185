// The host side of IBGDA failover (failover.h) in the model world: one agent that
//  - recovers each failed QP pair with core/ibgda/recovery.h, controlling the NICs through
//    each PE's DEVX driver (2ERR, QUERY_QP for the state and next_rcv_psn, RST2INIT,
//    INIT2RTR, RTR2RTS);
//  - watches for stalls: a QP with posted work whose NIC does nothing (a lost doorbell, a
//    stalled engine) is SUSPECTED and rung again; if that does not help, it is FAILED.
// A pair whose peer node is dead cannot be recovered: both ends stay FAILED, marked dead.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "sim/ibgda/model_world.h"
#include "core/ibgda/recovery.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "hw/mlx5_devx/driver.h"
#include "hw/mock_nic/types.h"

namespace doorbell::ibgda {

void ModelWorld::add_recovery_agent(gpu_sim::Scheduler& s) {
  // Every QP of every PE (mains, then backups) has an id: its index in `ends`.
  struct End {
    uint32_t pe = 0, slot = 0, dev = 0, qi = 0;  // dev: its NIC; qi: index in that NIC's queue set
    bool backup = false;
    // Watchdog: what it last saw, for how many polls / since when, whether it rang again.
    uint64_t seen_hw = 0;  // the NIC's send queue position (QUERY_QP)
    uint32_t polls = 0;
    double since_ns = 0;
    bool rerung = false;
  };
  auto ends = std::make_shared<std::vector<End>>();
  const uint32_t nqp = qps_per_set(pes_[0]->state());
  auto id_of = [&](uint32_t pe, bool backup, uint32_t dev, uint32_t qpn) {  // a QPN is unique on its NIC
    for (uint32_t i = 0; i < ends->size(); ++i) {
      const End& e = (*ends)[i];
      if (e.pe == pe && e.backup == backup && e.dev == dev && pes_[pe]->qps(backup)[e.slot].qpn == qpn)
        return i;
    }
    return 0u;
  };
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (bool backup : {false, true})
      for (uint32_t slot = 0; slot < nqp; ++slot) {
        End e;
        const DevQp& q = pes_[p]->qps(backup)[slot];
        e.pe = p, e.slot = slot, e.backup = backup, e.dev = q.dev;
        const devx::QueueSet& qs = queue_set(pes_[p]->devs[q.dev], backup);
        for (uint32_t i = 0; i < qs.size(); ++i)
          if (qs.qp(i).id == q.qpn) e.qi = i;
        ends->push_back(e);
      }
  auto dq = [this, ends](uint32_t id) -> DevQp& {
    const End& e = (*ends)[id];
    return pes_[e.pe]->qps(e.backup)[e.slot];
  };
  // The NIC control recovery_step needs, through each PE's DEVX driver (QUERY_QP and the
  // state transitions a host makes), but for what a host could not query: the peeks.
  struct ModelNic {
    ModelWorld* w;
    std::vector<End>* ends;
    const End& end(uint32_t id) const { return (*ends)[id]; }
    Dev& dev(uint32_t id) const { return w->pes_[end(id).pe]->devs[end(id).dev]; }
    const devx::Obj& obj(uint32_t id) const { return queue_set(dev(id), end(id).backup).qp(end(id).qi); }
    devx::Driver drv(uint32_t id) const { return devx::Driver(*dev(id).devx); }
    const DevQp& devqp(uint32_t id) const { return w->pes_[end(id).pe]->qps(end(id).backup)[end(id).slot]; }
    prm::QpcState state(uint32_t id) const {
      Result<prm::QpcState> st = drv(id).query_qp_state(obj(id));
      return st ? *st : prm::kQpcErr;  // a QP the device cannot report on is treated as failed
    }
    bool in_error(uint32_t id) const { return state(id) == prm::kQpcErr; }
    bool dead(uint32_t id) const { return peek(id).dead(); }
    void fail(uint32_t id) const {
      if (dead(id)) return;
      if (const prm::QpcState st = state(id); st != prm::kQpcErr && st != prm::kQpcRst) (void)drv(id).to_error(obj(id));
    }
    // The NIC flushed all it was told of (WQEs it never got a doorbell for never ran).
    bool drained(uint32_t id) const { return in_error(id) && peek(id).flushed(devqp(id).qpn); }
    // What the model shows that a host could not query (the seam's one exception, and all of
    // it): a dead node, and what the engine has heard and has in flight.
    struct Peek {
      const mock_nic::Nic& nic;
      bool dead() const { return nic.dead(); }
      // Every WQE it heard a doorbell for, and every response; a stalled engine has flushed
      // nothing yet (a host sees no flush completions), so the reset waits for its end.
      bool flushed(uint32_t qpn) const {
        const mock_nic::Qp& q = *nic.qp(qpn);
        return !nic.stalled() && q.head == q.prod && q.inflight.empty();
      }
    };
    Peek peek(uint32_t id) const { return {*dev(id).nic}; }
    // The responder's next_rcv_psn (24 bits; the model's PSNs are requester WQE indices),
    // widened against the requester's producer index.
    uint64_t applied(const PairEnd& req, const PairEnd& resp) const {
      Result<devx::QpQuery> r = drv(resp.id).query_qp(obj(resp.id));
      const uint64_t prod = __atomic_load_n(&req.qp->mv->prod_idx, __ATOMIC_ACQUIRE);
      return r ? prod - ((prod - r->next_rcv_psn) & 0xffffff) : kVerdictUnknown;
    }
    void reset(uint32_t id, uint32_t peer) const {
      devx::Driver d = drv(id);
      devx::RtrSpec r;
      r.remote_qpn = devqp(peer).qpn;
      r.dlid = w->lid(end(peer).pe, end(peer).dev);
      (void)d.to_reset(obj(id));
      (void)d.rst2init(obj(id), {});
      (void)d.init2rtr(obj(id), r);
      (void)d.rtr2rts(obj(id), w->cfg_.rts);
    }
  };
  auto pairs = std::make_shared<std::vector<PairRecovery>>();
  auto failed_at = std::make_shared<std::vector<double>>();
  for (uint32_t id = 0; id < ends->size(); ++id) {
    const End& e = (*ends)[id];
    const ModelNic n{this, ends.get()};
    Result<devx::QpQuery> qq = n.drv(id).query_qp(n.obj(id));
    if (!qq) continue;  // not the model's to refuse; a QP it cannot query has no pair
    const uint32_t peer = id_of(dq(id).pe, e.backup, e.dev, qq->remote_qpn);  // rails: the same NIC index
    if (peer < id) continue;  // added from the other end
    PairRecovery pr;
    pr.a = {&dq(id), id};
    pr.b = {&dq(peer), peer};
    pr.self = peer == id;
    pairs->push_back(pr);
    failed_at->push_back(0);
  }

  const bool timed = s.options().policy == gpu_sim::Policy::kTimed;
  s.add_agent("recovery", [=, this, &s](gpu_sim::AgentCtx& a) {
    // Device words through the agent, so the weak memory model hears of them.
    struct HostMem {
      gpu_sim::AgentCtx& a;
      gpu_sim::Scheduler& s;
      uint64_t load(const uint64_t* p) { return a.load64(p, "recovery", "failover word", 0); }
      void store(uint64_t* p, uint64_t v) { a.store64(p, v); }
      void fill(void* p, int byte, size_t n) {
        if (mem::Observer* o = s.device_observer()) o->device_write(p, n, "recovery: fill", 0);
        std::memset(p, byte, n);
      }
    } m{a, s};
    ModelNic n{this, ends.get()};
    auto clock = [this] { return pes_[0]->devs[0].nic->clock_ns(); };
    // A QP with posted work whose send queue position (QUERY_QP) stays put for watchdog_polls
    // polls (watchdog_ns simulated, and never less than the QP's own retransmission window,
    // retry_count * ack_timeout, so a QP that waits out a link outage is left to its timers):
    // SUSPECTED and rung again; still stuck after as long: failed. (Its load-then-store of
    // the health has no scheduling point between: no CAS needed here; a real host agent would
    // CAS, and take the post lock to ring.)
    const double retry_ns = cfg_.rts.retry_count * mock_nic::ack_timeout_ns(cfg_.rts.ack_timeout);  // ack_timeout 0: none
    const double window_ns = std::isfinite(retry_ns) ? std::max(cfg_.watchdog_ns, retry_ns) : cfg_.watchdog_ns;
    auto watch = [&](uint32_t id) {
      End& e = (*ends)[id];
      const DevQp& q = dq(id);
      // Posted work the NIC has not consumed (its position vs the doorbell record's).
      // Completed work nobody polled is not stuck.
      Result<devx::QpQuery> qq = n.drv(id).query_qp(n.obj(id));
      const uint64_t prod = m.load(&q.mv->prod_idx), hw = qq ? qq->hw_sq_wqebb_counter : 0;
      if (!qq || qq->hw_sq_wqebb_counter == qq->sw_sq_wqebb_counter || hw != e.seen_hw) {
        e.seen_hw = hw, e.polls = 0, e.rerung = false, e.since_ns = a.now();
        return false;
      }
      if (timed ? a.now() - e.since_ns < window_ns : ++e.polls < cfg_.watchdog_polls) return false;
      e.polls = 0, e.since_ns = a.now();
      if (!e.rerung) {
        if (m.load(&q.hp->state) != uint64_t(Health::kFailed)) m.store(&q.hp->state, uint64_t(Health::kSuspected));
        ring_qp(a, cfg_.opt, q, prod, true);  // a doorbell may have been lost: ring for the GPU
        e.rerung = true;
        ++recovery_.suspected, ++recovery_.rerung;
        return true;
      }
      m.store(&dq(id).hp->state, uint64_t(Health::kFailed));  // the pair's recovery takes it from here
      return true;
    };

    for (;;) {
      a.point();
      bool did = false;
      for (size_t i = 0; i < pairs->size(); ++i) {
        PairRecovery& pr = (*pairs)[i];
        const PairRecovery::Phase before = pr.phase;
        switch (recovery_step(m, n, pr)) {
          case RecoveryStep::kFailed:
          case RecoveryStep::kDead:
            if (before == PairRecovery::kIdle) {
              (*failed_at)[i] = clock();
              ++recovery_.failed;
            }
            recovery_.dead += pr.phase == PairRecovery::kDead;
            did = true;
            break;
          case RecoveryStep::kReset:
            recovery_.max_recovery_ns = std::max(recovery_.max_recovery_ns, clock() - (*failed_at)[i]);
            ++recovery_.recovered;
            for (uint32_t id : {pr.a.id, pr.b.id}) (*ends)[id].polls = 0, (*ends)[id].rerung = false;
            did = true;
            break;
          case RecoveryStep::kNone:
            if (pr.phase == PairRecovery::kIdle) did |= watch(pr.a.id) || (!pr.self && watch(pr.b.id));
            break;
        }
      }
      if (did) {
        a.changed();
        continue;
      }
      const bool draining = std::any_of(pairs->begin(), pairs->end(), [](const PairRecovery& pr) { return pr.phase == PairRecovery::kDraining; });
      if (!a.spin(draining ? "recovery: a failed pair's QPs in ERR, waiting for its users to leave and its NIC to flush them"
                           : "recovery: idle (no failed or stalled QP)"))
        return;
    }
  });
}

}  // namespace doorbell::ibgda
