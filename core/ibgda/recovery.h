// Recovery of a failed QP pair (seed 002; the device side is failover.h), one source for the
// model's host agent (sim/ibgda/recovery.cc, through DEVX) and the GPU check's
// recovery warp (gpu/failover_check.cu, through the GPU-resident NIC):
//   fail   both ends FAILED (traffic goes to the backups) and both QPs to ERR, so every
//          posted WQE flushes;
//   drain  wait until neither end has users or a held post lock and the NIC has flushed
//          both;
//   reset  learn from each end's responder how far the other end's requests executed (the
//          verdict), bring both QPs back RESET -> INIT -> RTR -> RTS, clear their indices,
//          CQ slot (0xff) and doorbell records, and publish the verdict with a new epoch and
//          RECOVERING.
// `M` reads and writes device words: load(p), store(p, v), fill(p, byte, n). `N` controls
// the NIC by id: in_error(id), fail(id) (to ERR), drained(id), applied(requester, responder
// PairEnds) -> the requester's WQE index below which the responder executed, reset(id,
// peer id), dead(id) -> its node is gone (out-of-band knowledge, asked once the pair failed).
#pragma once

#include <cstdint>

#include "core/ibgda/state.h"

namespace doorbell::ibgda {

struct PairEnd {
  DevQp* qp = nullptr;
  uint32_t id = 0;  // the NIC control's name for this QP
};

struct PairRecovery {
  PairEnd a, b;
  bool self = false;  // a QP connected to itself
  enum Phase : uint8_t { kIdle, kDraining, kDead } phase = kIdle;
};

// Whether the pair must be recovered: an end FAILED (a poller saw its error) or its QP in ERR.
template <class M, class N>
DOORBELL_HD bool pair_failed(M& m, N& n, const PairRecovery& pr) {
  const PairEnd* ends[2] = {&pr.a, &pr.b};
  for (const PairEnd* e : ends)
    if (m.load(&e->qp->hp->state) == uint64_t(Health::kFailed) || n.in_error(e->id)) return true;
  return false;
}

// The peer node is gone: both ends stay FAILED and say so, nothing will recover them.
template <class M>
DOORBELL_HD void pair_dead(M& m, PairRecovery& pr) {
  m.store(&pr.a.qp->hp->dead, 1);
  m.store(&pr.b.qp->hp->dead, 1);
  pr.phase = PairRecovery::kDead;
}

template <class M, class N>
DOORBELL_HD void pair_fail(M& m, N& n, PairRecovery& pr) {
  PairEnd* ends[2] = {&pr.a, &pr.b};
  for (PairEnd* e : ends) {
    m.store(&e->qp->hp->state, uint64_t(Health::kFailed));
    n.fail(e->id);
  }
  pr.phase = PairRecovery::kDraining;
  if (n.dead(pr.a.id) || n.dead(pr.b.id)) pair_dead(m, pr);
}

template <class M, class N>
DOORBELL_HD bool end_drained(M& m, N& n, const PairEnd& e) {
  return m.load(&e.qp->hp->users) == 0 && m.load(&e.qp->mv->post_send_lock) == 0 && n.drained(e.id);
}

template <class M, class N>
DOORBELL_HD void pair_reset(M& m, N& n, PairRecovery& pr) {
  const uint64_t verdict_a = n.applied(pr.a, pr.b), verdict_b = pr.self ? verdict_a : n.applied(pr.b, pr.a);
  for (int i = 0; i < (pr.self ? 1 : 2); ++i) {
    const PairEnd& e = i == 0 ? pr.a : pr.b;
    n.reset(e.id, (i == 0 ? pr.b : pr.a).id);
  }
  for (int i = 0; i < (pr.self ? 1 : 2); ++i) {
    DevQp& q = *(i == 0 ? pr.a : pr.b).qp;
    m.fill(q.mv, 0, sizeof(Mvars));
    m.fill(const_cast<mlx5::Cqe64*>(q.cqe), 0xff, sizeof(mlx5::Cqe64));
    m.fill(q.dbr, 0, sizeof(uint64_t));
    QpHealth& h = *q.hp;
    const uint64_t epoch = m.load(&h.epoch);
    m.store(&h.applied[epoch % kVerdicts], i == 0 ? verdict_a : verdict_b);
    m.store(&h.epoch, epoch + 1);  // the verdict is out before the epoch that announces it
    m.store(&h.state, uint64_t(Health::kRecovering));
  }
  pr.phase = PairRecovery::kIdle;
}

// One step of a pair's recovery; returns what it did (nothing, failed it, reset it, found
// its peer dead — then or while draining, which a dead node never finishes).
enum class RecoveryStep : uint8_t { kNone, kFailed, kReset, kDead };
template <class M, class N>
DOORBELL_HD RecoveryStep recovery_step(M& m, N& n, PairRecovery& pr) {
  switch (pr.phase) {
    case PairRecovery::kIdle:
      if (!pair_failed(m, n, pr)) return RecoveryStep::kNone;
      pair_fail(m, n, pr);
      return pr.phase == PairRecovery::kDead ? RecoveryStep::kDead : RecoveryStep::kFailed;
    case PairRecovery::kDraining:
      if (n.dead(pr.a.id) || n.dead(pr.b.id)) return pair_dead(m, pr), RecoveryStep::kDead;
      if (!end_drained(m, n, pr.a) || (!pr.self && !end_drained(m, n, pr.b))) return RecoveryStep::kNone;
      pair_reset(m, n, pr);
      return RecoveryStep::kReset;
    case PairRecovery::kDead: return RecoveryStep::kNone;
  }
  return RecoveryStep::kNone;
}

}  // namespace doorbell::ibgda
