// The host side of IBGDA failover (failover.h) in the model world: one agent that
//  - recovers each failed QP pair (a QP and its peer): marks both FAILED and moves both to
//    ERR (so every posted WQE flushes), waits until neither has users nor a held post lock
//    and both NICs have drained them, learns from each side's next_rcv_psn how far the
//    other side's requests were executed, resets both RESET -> INIT -> RTR -> RTS, clears
//    their indices, CQ slot (0xff) and doorbell records, and publishes the verdict with a
//    new epoch and RECOVERING;
//  - watches for stalls: a QP with posted work whose NIC does nothing (a lost doorbell, a
//    stalled engine) is SUSPECTED and rung again; if that does not help, it is failed.
// A pair whose peer node is dead cannot be recovered: both ends stay FAILED, marked dead.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "core/ibgda/host/model_world.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "hw/mlx5_devx/driver.h"

namespace doorbell::ibgda {

namespace {
constexpr uint64_t kHealthFailed = uint64_t(Health::kFailed);
}  // namespace

void ModelWorld::add_recovery_agent(gpu_sim::Scheduler& s) {
  struct End {
    uint32_t pe = 0, slot = 0, qi = 0;  // qi: index in the queue set
    bool backup = false;
    // Watchdog: what it last saw, for how many polls, and whether it rang again already.
    uint64_t seen_cons = 0, seen_nic = 0;
    uint32_t polls = 0;
    double since_ns = 0;  // timed schedule: when it last saw progress
    bool rerung = false;
  };
  struct Pair {
    End a, b;
    bool self = false;  // a QP connected to itself (a PE's loopback)
    enum Phase { kIdle, kDraining, kDead } phase = kIdle;
    double failed_at = 0;
  };
  auto pairs = std::make_shared<std::vector<Pair>>();
  const uint32_t nqp = cfg_.npes * cfg_.num_rc_per_pe;
  auto end_of = [&](uint32_t pe, bool backup, uint32_t qpn) {
    End e;
    e.pe = pe, e.backup = backup;
    const std::vector<DevQp>& set = backup ? pes_[pe]->backups : pes_[pe]->qps;
    for (uint32_t i = 0; i < nqp; ++i) {
      if (set[i].qpn == qpn) e.slot = i;
      if (queue_set(*pes_[pe], backup).qp(i).id == qpn) e.qi = i;
    }
    return e;
  };
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (bool backup : {false, true})
      for (uint32_t slot = 0; slot < nqp; ++slot) {
        const DevQp& q = (backup ? pes_[p]->backups : pes_[p]->qps)[slot];
        const uint32_t peer_qpn = pes_[p]->nic->qp(q.qpn)->peer.qpn;
        const End b = end_of(q.pe, backup, peer_qpn);
        if (std::make_pair(b.pe, b.slot) < std::make_pair(p, slot)) continue;  // added from the other end
        Pair pr;
        pr.a = end_of(p, backup, q.qpn);
        pr.b = b;
        pr.self = b.pe == p && b.slot == slot;
        pairs->push_back(pr);
      }

  auto dq = [this](const End& e) -> DevQp& { return (e.backup ? pes_[e.pe]->backups : pes_[e.pe]->qps)[e.slot]; };
  auto obj = [this](const End& e) { return queue_set(*pes_[e.pe], e.backup).qp(e.qi); };
  auto nic_qp = [this, dq](const End& e) { return pes_[e.pe]->nic->qp(dq(e).qpn); };
  auto clock = [this] { return pes_[0]->nic->clock_ns(); };
  const bool timed = s.options().policy == gpu_sim::Policy::kTimed;

  s.add_agent("recovery", [=, this, &s](gpu_sim::AgentCtx& a) {
    auto load = [&](const uint64_t* p, const char* what, uint64_t i) { return a.load64(p, "recovery", what, i); };
    // Device memory the host rewrites (ring state after a reset): told to the weak model.
    auto fill = [&](void* p, int byte, size_t n) {
      if (gpu_sim::WeakMemory* w = s.weak()) w->device_write(p, n);
      std::memset(p, byte, n);
    };
    auto fail = [&](Pair& pr) {
      // Whether the peer node is gone is out-of-band knowledge (the bootstrap lost it), asked
      // only once its QP failed (RETRY_EXC after the retry timeout).
      const bool dead = pes_[pr.a.pe]->nic->dead() || pes_[pr.b.pe]->nic->dead();
      for (End* e : {&pr.a, &pr.b}) {
        a.store64(&dq(*e).hp->state, kHealthFailed);
        const mock_nic::QpState st = nic_qp(*e)->state;
        if (!pes_[e->pe]->nic->dead() && st != mock_nic::QpState::kErr && st != mock_nic::QpState::kRst)
          (void)devx::Driver(*pes_[e->pe]->devx).to_error(obj(*e));
        if (dead) a.store64(&dq(*e).hp->dead, 1);
      }
      pr.failed_at = clock();
      ++recovery_.failed;
      if (recovery_.first_failure_ns < 0) recovery_.first_failure_ns = pr.failed_at;
      pr.phase = dead ? Pair::kDead : Pair::kDraining;
      recovery_.dead += dead;
    };
    auto drained = [&](const End& e) {
      const DevQp& q = dq(e);
      if (load(&q.hp->users, "users", e.slot) != 0 || load(&q.mv->post_send_lock, "post_send_lock", e.slot) != 0) return false;
      // The NIC flushed all it was told of (doorbells it never got leave WQEs that never ran).
      Result<prm::QpcState> st = devx::Driver(*pes_[e.pe]->devx).query_qp_state(obj(e));
      const mock_nic::Qp* nq = nic_qp(e);
      return st && *st == prm::kQpcErr && nq->head == nq->prod && nq->inflight.empty();
    };
    // How far the peer executed `e`'s requests: its next_rcv_psn (24 bits, the model's PSNs
    // are requester WQE indices) widened against e's producer index.
    auto applied = [&](const End& e, const End& peer) {
      Result<devx::QpQuery> r = devx::Driver(*pes_[peer.pe]->devx).query_qp(obj(peer));
      const uint64_t prod = load(&dq(e).mv->prod_idx, "prod_idx", e.slot);
      return r ? prod - ((prod - r->next_rcv_psn) & 0xffffff) : 0;
    };
    auto reset = [&](Pair& pr) {
      const uint64_t verdict_a = applied(pr.a, pr.b), verdict_b = pr.self ? verdict_a : applied(pr.b, pr.a);
      for (End* e : {&pr.a, &pr.b}) {
        if (e == &pr.b && pr.self) break;
        const End& other = e == &pr.a ? pr.b : pr.a;
        devx::Driver drv(*pes_[e->pe]->devx);
        devx::RtrSpec r;
        r.remote_qpn = dq(other).qpn;
        r.dlid = pes_[other.pe]->nic->lid();
        (void)drv.to_reset(obj(*e));
        (void)drv.rst2init(obj(*e), {});
        (void)drv.init2rtr(obj(*e), r);
        (void)drv.rtr2rts(obj(*e), cfg_.rts);
      }
      for (End* e : {&pr.a, &pr.b}) {
        if (e == &pr.b && pr.self) break;
        DevQp& q = dq(*e);
        fill(q.mv, 0, sizeof(Mvars));
        fill(const_cast<mlx5::Cqe64*>(q.cqe), 0xff, sizeof(mlx5::Cqe64));
        fill(q.dbr, 0, sizeof(uint64_t));
        QpHealth& h = *q.hp;
        const uint64_t epoch = load(&h.epoch, "epoch", e->slot);
        a.store64(&h.applied[epoch % kVerdicts], e == &pr.a ? verdict_a : verdict_b);
        a.store64(&h.epoch, epoch + 1);
        a.store64(&h.state, uint64_t(Health::kRecovering));
        e->polls = 0, e->rerung = false;
      }
      const double took = clock() - pr.failed_at;
      recovery_.max_recovery_ns = std::max(recovery_.max_recovery_ns, took);
      recovery_.last_recovery_ns = clock();
      ++recovery_.recovered;
      pr.phase = Pair::kIdle;
    };
    // A QP with posted work whose NIC is idle (no timer either) for watchdog_polls polls:
    // SUSPECTED and rung again; still stuck after as many polls: failed.
    auto watch = [&](Pair& pr, End& e) {
      const DevQp& q = dq(e);
      mock_nic::Nic& nic = *pes_[e.pe]->nic;
      const uint64_t prod = load(&q.mv->prod_idx, "prod_idx", e.slot), cons = load(&q.mv->cons_idx, "cons_idx", e.slot);
      if (prod == cons || nic.next_timer_ns() != std::numeric_limits<double>::infinity() || cons != e.seen_cons ||
          nic.now() != e.seen_nic) {
        e.seen_cons = cons, e.seen_nic = nic.now(), e.polls = 0, e.rerung = false, e.since_ns = a.now();
        return false;
      }
      // Stuck for watchdog_ns of simulated time, or (untimed) watchdog_polls polls.
      if (timed ? a.now() - e.since_ns < cfg_.watchdog_ns : ++e.polls < cfg_.watchdog_polls) return false;
      e.polls = 0, e.since_ns = a.now();
      if (!e.rerung) {
        const uint64_t h = load(&q.hp->state, "health", e.slot);
        if (h != kHealthFailed) a.store64(&q.hp->state, uint64_t(Health::kSuspected));
        a.store64(q.dbr, dbr_word(prod));  // a doorbell may have been lost: ring for the GPU
        nic.uar_write64(pes_[e.pe]->uar.page_id, mlx5::kBfOffset, doorbell_value(prod, q.qpn));
        e.rerung = true;
        ++recovery_.suspected, ++recovery_.rerung;
        return true;
      }
      fail(pr);
      return true;
    };

    for (;;) {
      a.point();
      bool did = false;
      for (Pair& pr : *pairs) {
        switch (pr.phase) {
          case Pair::kIdle: {
            bool trigger = false;
            for (End* e : {&pr.a, &pr.b})
              trigger |= load(&dq(*e).hp->state, "health", e->slot) == kHealthFailed ||
                         nic_qp(*e)->state == mock_nic::QpState::kErr;
            if (trigger) fail(pr), did = true;
            else did |= watch(pr, pr.a) || (!pr.self && watch(pr, pr.b));
            break;
          }
          case Pair::kDraining:
            if (drained(pr.a) && (pr.self || drained(pr.b))) reset(pr), did = true;
            break;
          case Pair::kDead: break;
        }
      }
      if (did) a.changed();
      else if (!a.spin("recovery: idle (no failed or stalled QP)")) return;
    }
  });
}

}  // namespace doorbell::ibgda
