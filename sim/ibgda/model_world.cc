#include "sim/ibgda/model_world.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>

#include "core/ibgda/queue.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "hw/mem/os_va_space.h"
#include "hw/mlx5_devx/driver.h"

namespace doorbell::ibgda {

namespace {
constexpr uint32_t kAllAccess = mock_nic::kLocalWrite | mock_nic::kRemoteWrite | mock_nic::kRemoteRead | mock_nic::kRemoteAtomic;

Status check_opt(const Options& o) {
  if ((o.num_requests_in_batch & (o.num_requests_in_batch - 1)) != 0 || o.num_requests_in_batch == 0)
    return Status(Errc::kBadParam, "world: num_requests_in_batch must be a power of two");
  return {};
}
}  // namespace

Result<std::unique_ptr<ModelWorld>> ModelWorld::create(const WorldConfig& cfg) {
  if (cfg.npes == 0 || cfg.num_rc_per_pe == 0) return Status(Errc::kBadParam, "world: need at least one PE and one RC QP per PE");
  if (cfg.num_nics == 0 || cfg.num_nics > kMaxNics) return Status(Errc::kBadParam, "world: num_nics must be 1..8");
  if (uint64_t(cfg.npes) * cfg.num_nics >= 0xc000) return Status(Errc::kBadParam, "world: more NICs than unicast LIDs");
  if (Status st = check_opt(cfg.opt); !st) return st;
  if (cfg.opt.num_default_rc_per_pe > cfg.num_rc_per_pe) return Status(Errc::kBadParam, "world: the DEFAULT pool is larger than num_rc_per_pe");
  if (cfg.dc != DcUse::kNone && (cfg.procs.boot != nullptr || cfg.failover))
    return Status(Errc::kBadParam, "world: DC runs in one process and without failover (the process link and the backup QPs are RC)");
  if ((cfg.ibuf_slots & (cfg.ibuf_slots - 1)) != 0 || cfg.ibuf_slots == 0)
    return Status(Errc::kBadParam, "world: ibuf_slots must be a power of two");
  if (cfg.procs.boot != nullptr) {
    if (cfg.procs.links == nullptr) return Status(Errc::kBadParam, "world: one PE per process needs the links between the processes");
    if (cfg.procs.boot->size() != cfg.npes)
      return Status(Errc::kBadParam, "world: one PE per process, but " + std::to_string(cfg.npes) + " PEs in " +
                                         std::to_string(cfg.procs.boot->size()) + " processes");
    if (cfg.failover) return Status(Errc::kNotSupported, "world: failover across processes is not built yet (its recovery agent reaches every PE)");
    if (cfg.heap.phantom) return Status(Errc::kNotSupported, "world: phantom memory does not cross processes (it has no bytes to send)");
  }
  std::unique_ptr<ModelWorld> w(new ModelWorld(cfg));
  if (Status st = w->build(); !st) return st;
  w->save();
  if (Status st = w->begin(); !st) return st;
  return w;
}

namespace {

// Every field but the run's own (opt, start_index, fast_step_actions) is the world's shape. A
// field added to WorldConfig must be sorted into one or the other here.
static_assert(sizeof(WorldConfig) == 192, "a new WorldConfig field: compare it here, or let rewind() set it");
auto shape_of(const WorldConfig& w) {
  return std::tie(w.npes, w.num_rc_per_pe, w.num_nics, w.log_qp_depth, w.layout, w.nic_buf_on_gpumem, w.ibuf_slots, w.dc, w.heap.npes,
                  w.heap.heap_bytes, w.heap.granularity, w.heap.max_handle_bytes, w.heap.phantom, w.response_delay_max, w.seed,
                  w.rts.ack_timeout, w.rts.retry_count, w.rts.rnr_retry, w.rts.sq_psn, w.rts.log_sra_max, w.failover,
                  w.failover_threads, w.watchdog_polls, w.watchdog_ns, w.procs.boot, w.procs.links);
}

}  // namespace

bool ModelWorld::fits(const WorldConfig& c) const { return shape_of(cfg_) == shape_of(c); }

uint64_t ModelWorld::shape_hash(const WorldConfig& c) {
  return std::apply(
      [](const auto&... v) {
        uint64_t h = 0xcbf29ce484222325ull;
        ((h = (h ^ std::hash<std::decay_t<decltype(v)>>{}(v)) * 0x100000001b3ull), ...);
        return h;
      },
      shape_of(c));
}

void ModelWorld::save() {
  saved_.assign(cfg_.npes, {});
  for (uint32_t p = 0; p < cfg_.npes; ++p) {
    if (!local(p)) continue;
    Pe& pe = *pes_[p];
    saved_[p] = {pe.mvars, pe.backup_mvars, pe.qps(), pe.qps(true)};
    for (Dev& d : pe.devs) d.nic->save_run_state(), d.devx->save_blocks();
  }
}

Status ModelWorld::begin() {
  for (auto& pe : pes_)
    if (pe != nullptr)
      for (std::vector<DevQp>* set : {&pe->qps(), &pe->qps(true)})
        for (DevQp& d : *set)
          if (Status st = start_at(*pe, d, cfg_.start_index); !st) return st;
  return {};
}

Status ModelWorld::rewind(const WorldConfig& c) {
  if (!rewindable()) return Status(Errc::kBadState, "world: one with failover, faults injected or one PE per process cannot be rewound");
  if (!fits(c)) return Status(Errc::kBadParam, "world: a rewind cannot change the world's shape (only opt and start_index)");
  if (Status st = check_opt(c.opt); !st) return st;
  for (uint32_t p = 0; p < cfg_.npes; ++p) {
    Pe& pe = *pes_[p];
    for (Dev& d : pe.devs) {
      if (Status st = d.nic->restore_run_state(); !st) return st;
      if (Status st = d.devx->restore_blocks(); !st) return st;
    }
    // In place: every DevQp points into these vectors.
    const Saved& sv = saved_[p];
    std::copy(sv.mvars.begin(), sv.mvars.end(), pe.mvars.begin());
    std::copy(sv.qps.begin(), sv.qps.end(), pe.qps().begin());
    std::fill(std::begin(pe.group_switch), std::end(pe.group_switch), 0), pe.error = 0;
    pe.state().opt = c.opt;
    pe.state().opt.nic_buf_on_gpumem = cfg_.nic_buf_on_gpumem;
  }
  heap_->reset();
  last_checked_.clear();
  routes_.clear();
  doorbell_observer_ = nullptr;
  on_nic_trace(nullptr);  // the observers of the run before: gone with it
  ticks_ = 0;
  stepping_ = nullptr;
  recovery_ = {};
  cfg_.opt = c.opt;
  cfg_.start_index = c.start_index;
  cfg_.fast_step_actions = c.fast_step_actions;
  return begin();
}

ModelWorld::~ModelWorld() {
  if (cfg_.procs.links != nullptr) cfg_.procs.links->set_server(nullptr);  // the links outlive this world
  for (auto& pe : pes_) {
    if (pe == nullptr) continue;
    for (size_t i = 0; i < pe->ibufs.size(); ++i) {
      mock_nic::ModelDevx& devx = *pe->devs[pe->ibuf_devs[i]].devx;
      (void)devx.dereg_mr(pe->ibuf_mrs[i]);
      devx.free(pe->ibufs[i]);
    }
    for (Dev& d : pe->devs) d.queues.reset(), d.backup_queues.reset();
  }
  // Heap chunk MRs go with each ModelDevx; the heap's memory must outlive them.
  for (auto& pe : pes_)
    if (pe != nullptr)
      for (Dev& d : pe->devs) d.devx.reset();
  heap_.reset();
}

std::string ModelWorld::where(uint32_t pe, uint32_t dev) const {
  return "pe " + std::to_string(pe) + (cfg_.num_nics > 1 ? " nic " + std::to_string(dev) : "");
}

template <class T>
Result<std::vector<T>> ModelWorld::gather(const T& mine) {
  std::vector<T> all(cfg_.npes);
  all[cfg_.procs.boot->rank()] = mine;
  if (Status st = cfg_.procs.boot->allgather(all.data(), sizeof(T)); !st) return st;
  return all;
}

Result<std::vector<uint32_t>> ModelWorld::qpn_table(bool backup) {
  const uint32_t n = cfg_.npes, ndev = cfg_.num_nics, nqs = n * cfg_.num_rc_per_pe;
  std::vector<uint32_t> t(size_t(n) * ndev * nqs);
  for (uint32_t p = 0; p < n; ++p)
    for (uint32_t dev = 0; dev < ndev && local(p); ++dev)
      for (uint32_t i = 0; i < nqs; ++i) t[(size_t(p) * ndev + dev) * nqs + i] = queue_set(pes_[p]->devs[dev], backup).qp(i).id;
  if (cfg_.procs.boot == nullptr) return t;
  // One PE per process: each contributes its own PE's block, in place.
  if (Status st = cfg_.procs.boot->allgather(t.data(), size_t(ndev) * nqs * sizeof(uint32_t)); !st) return st;
  return t;
}

Status ModelWorld::connect_all(bool backup) {
  const uint32_t n = cfg_.npes, nqs = n * cfg_.num_rc_per_pe;
  Result<std::vector<uint32_t>> qpns = qpn_table(backup);
  if (!qpns) return qpns.status();
  for (uint32_t p = 0; p < n; ++p)
    for (uint32_t dev = 0; dev < cfg_.num_nics && local(p); ++dev) {
      devx::Driver drv(*pes_[p]->devs[dev].devx);
      for (uint32_t rc = 0; rc < cfg_.num_rc_per_pe; ++rc)
        for (uint32_t peer = 0; peer < n; ++peer) {
          const devx::Obj& qp = queue_set(pes_[p]->devs[dev], backup).qp(rc * n + peer);
          devx::RtrSpec r;
          if (!is_dci(p, peer)) {  // a DCI names its target in each WQE: it is connected to no one
            r.remote_qpn = (*qpns)[(size_t(peer) * cfg_.num_nics + dev) * nqs + rc * n + p];
            r.dlid = lid(peer, dev);
          }
          if (Status st = drv.rst2init(qp, {}); !st) return st;
          if (Status st = drv.init2rtr(qp, r); !st) return st;
          if (Status st = drv.rtr2rts(qp, cfg_.rts); !st) return st;
        }
    }
  return {};
}

// The device view of one queue set of a PE: a DevQp per QP in layout order, each with its
// management words, ibuf (registered) and, with failover, health words.
Status ModelWorld::fill_qps(Pe& pe, bool backup) {
  const uint32_t n = cfg_.npes, ndev = cfg_.num_nics, ngroup = cfg_.num_rc_per_pe * ndev, nqp = n * ngroup;
  std::vector<Mvars>& mvars = backup ? pe.backup_mvars : pe.mvars;
  std::vector<QpHealth>& health = backup ? pe.backup_health : pe.health;
  mvars.resize(nqp);
  if (cfg_.failover) health.resize(nqp);
  // Member g of a peer's group lives on NIC g % ndev (qp_select.h), as QP g / ndev of that
  // NIC's set for the peer.
  for (uint32_t g = 0; g < ngroup; ++g)
    for (uint32_t peer = 0; peer < n; ++peer) {
      Dev& dv = pe.devs[g % ndev];
      devx::QueueSet& qs = queue_set(dv, backup);
      const uint32_t qi = (g / ndev) * n + peer;  // queue-set order (QP-major)
      Result<void*> ib = dv.devx->alloc(uint64_t(cfg_.ibuf_slots + 1) * kIbufSlotBytes, cfg_.nic_buf_on_gpumem);
      if (!ib) return ib.status();
      Result<devx::Mr> mr = dv.devx->reg_mr(dv.pdn, *ib, uint64_t(cfg_.ibuf_slots + 1) * kIbufSlotBytes, mock_nic::kLocalWrite);
      if (!mr) return mr.status();
      pe.ibufs.push_back(static_cast<uint8_t*>(*ib));
      pe.ibuf_mrs.push_back(*mr);
      pe.ibuf_devs.push_back(g % ndev);
      const uint32_t slot = pe.b.slot(g, peer);
      pe.b.set_qp(backup, g, peer,
                  {qs.qp(qi).id, g % ndev, qs.wq(qi), reinterpret_cast<uint64_t*>(qs.qp_dbr(qi)),
                   reinterpret_cast<uint64_t*>(dv.uar.reg_addr), qs.cq_buf(qi), &mvars[slot], pe.ibufs.back(), mr->lkey,
                   cfg_.failover ? &health[slot] : nullptr, is_dci(pe.state().my_pe, peer)});
    }
  return {};
}

// A fresh QP whose counters begin at `s`: its words, the NIC's position, the doorbell record
// it would have been rung with, and a collapsed CQE that reports WQE s - 1 done.
Status ModelWorld::start_at(Pe& pe, DevQp& d, uint64_t s) {
  if (s == 0) return {};
  if (Status st = pe.devs[d.dev].nic->start_sq_at(d.qpn, s); !st) return st;
  Mvars& m = *d.mv;
  m.resv_head = m.ready_head = m.prod_idx = m.cons_idx = m.get_head = m.get_tail = s;
  m.ibuf_head = m.ibuf_tail = m.proxy_prod = s;
  sync::windows_start_at(windows(d), s);
  *d.dbr = mlx5::dbr_word(s);
  auto* cqe = const_cast<mlx5::Cqe64*>(d.cqe);
  cqe->wqe_counter.set(uint16_t(s - 1));
  return {};
}

Status ModelWorld::build() {
  const uint32_t n = cfg_.npes, nrc = cfg_.num_rc_per_pe, ndev = cfg_.num_nics;
  for (uint32_t p = 0; p < n; ++p) {
    if (cfg_.procs.boot != nullptr && p != cfg_.procs.boot->rank()) {  // another process's PE: its NICs are reached over the links
      pes_.push_back(nullptr);
      for (uint32_t d = 0; d < ndev; ++d)
        if (Status st = fabric_.attach_remote(lid(p, d), cfg_.procs.links, p); !st) return st;
      continue;
    }
    auto pe = std::make_unique<Pe>(StateShape{p, n, nrc, ndev, cfg_.layout, cfg_.log_qp_depth, cfg_.ibuf_slots, cfg_.heap.granularity,
                                              cfg_.failover});
    pe->devs.resize(ndev);
    for (uint32_t d = 0; d < ndev; ++d) {
      Dev& dv = pe->devs[d];
      mock_nic::NicConfig nc;
      nc.lid = lid(p, d);
      nc.response_delay_max = cfg_.response_delay_max;
      nc.seed = cfg_.seed * 7919 + p * ndev + d;
      dv.nic = std::make_unique<mock_nic::Nic>(mem_, nc);
      if (Status st = fabric_.attach(*dv.nic); !st) return st;
      dv.devx = std::make_unique<mock_nic::ModelDevx>(*dv.nic, "model_pe" + std::to_string(p) + (ndev > 1 ? "_nic" + std::to_string(d) : ""));
      Result<uint32_t> pd = dv.devx->alloc_pd();
      Result<devx::Uar> uar = dv.devx->alloc_uar();
      if (!pd || !uar) return Status(Errc::kInternal, "world: PD/UAR allocation failed");
      dv.pdn = *pd;
      dv.uar = *uar;
      devx::QueueSetSpec qs;
      qs.num_qps = n * nrc;
      qs.log_sq_size = cfg_.log_qp_depth;
      qs.gpu_memory = cfg_.nic_buf_on_gpumem;
      qs.pdn = dv.pdn;
      qs.uar_page = dv.uar.page_id;
      if (cfg_.dc != DcUse::kNone) {  // DCIs where is_dci says, and this NIC's DCT (receives from an SRQ)
        qs.dci.resize(qs.num_qps);
        for (uint32_t i = 0; i < qs.num_qps; ++i) qs.dci[i] = is_dci(p, i % n);
        Result<devx::Obj> srq = dv.devx->create_srq(dv.pdn, 16);
        Result<devx::Obj> rcq = srq ? dv.devx->create_verbs_cq(64) : Result<devx::Obj>(srq.status());
        if (!rcq) return rcq.status();
        devx::DctSpec ds;
        ds.pdn = dv.pdn, ds.cqn = rcq->id, ds.srqn = srq->id, ds.dc_key = kDcKey;
        Result<devx::Obj> dct = devx::Driver(*dv.devx).create_dct(ds);
        if (!dct) return dct.status();
        dv.dct = *dct;
      }
      for (bool backup : {false, true}) {
        if (backup && !cfg_.failover) break;
        Result<std::unique_ptr<devx::QueueSet>> q = devx::QueueSet::create(*dv.devx, *dv.devx, qs);
        if (!q) return q.status();
        (backup ? dv.backup_queues : dv.queues) = std::move(*q);
      }
    }
    pes_.push_back(std::move(pe));
  }
  if (cfg_.procs.links != nullptr)  // requests from the other processes: the NIC they name answers
    cfg_.procs.links->set_server([this](uint32_t, const uint8_t* req, size_t len, mock_nic::ShmLinks::Reply& r) { fabric_.serve(req, len, r); });
  for (bool backup : {false, true})
    if (!backup || cfg_.failover)
      if (Status st = connect_all(backup); !st) return st;
  for (uint32_t p = 0; p < n; ++p) {
    if (!local(p)) continue;
    Pe& pe = *pes_[p];
    for (bool backup : {false, true})
      if (!backup || cfg_.failover)
        if (Status st = fill_qps(pe, backup); !st) return st;
    DevState& s = pe.state();
    if (cfg_.dc != DcUse::kNone) {  // every PE's DCTs, as NVSHMEM all-gathers their address vectors
      for (uint32_t q = 0; q < n; ++q)
        for (uint32_t d = 0; d < ndev; ++d) pe.dcts.push_back({kDcKey, pes_[q]->devs[d].dct.id, lid(q, d)});
      s.dcts = pe.dcts.data();
    }
    s.group_switches = pe.group_switch;
    s.opt = cfg_.opt;
    s.opt.nic_buf_on_gpumem = cfg_.nic_buf_on_gpumem;
    s.error = &pe.error;
    if (cfg_.failover) {
      pe.logs.resize(cfg_.failover_threads);
      s.logs = pe.logs.data();
      s.log_threads = cfg_.failover_threads;
    }
  }
  heap::HeapConfig hc = cfg_.heap;
  hc.npes = cfg_.procs.boot != nullptr ? 1 : n;  // one PE per process: this process's heap only
  Result<std::unique_ptr<heap::SymmetricHeap>> h = heap::SymmetricHeap::create(
      hc, mem::os_va_space(), [this](uint32_t chunk, const std::vector<uint8_t*>& addrs, uint64_t bytes) { return register_chunk(chunk, addrs, bytes); });
  if (!h) return h.status();
  heap_ = std::move(*h);
  std::vector<uint64_t> bases(n);
  for (uint32_t p = 0; p < n; ++p)
    if (local(p)) bases[p] = reinterpret_cast<uint64_t>(at(p, 0));
  if (cfg_.procs.boot != nullptr) {
    Result<std::vector<uint64_t>> all = gather(bases[cfg_.procs.boot->rank()]);
    if (!all) return all.status();
    bases = *all;
  }
  for (auto& pe : pes_)
    if (pe != nullptr) pe->heap_bases = bases, pe->state().heap_bases = pe->heap_bases.data();
  return {};
}

// `addrs`: the chunk on each PE of this process's heap (every PE, or this process's one).
Status ModelWorld::register_chunk(uint32_t chunk, const std::vector<uint8_t*>& heap_addrs, uint64_t bytes) {
  const uint32_t n = cfg_.npes, ndev = cfg_.num_nics;
  std::vector<ChunkReg> regs(n);
  for (uint32_t p = 0; p < n; ++p) {
    if (!local(p)) continue;
    uint8_t* addr = heap_addrs[cfg_.procs.boot != nullptr ? 0 : p];
    const mem::MemKind kind = mem::MemKind::kGpu;  // the heap is GPU memory
    if (Status st = mem_.map_external(addr, bytes, kind, "heap", cfg_.heap.phantom); !st) return st;
    regs[p].addr = reinterpret_cast<uint64_t>(addr);
    for (uint32_t d = 0; d < ndev; ++d) {
      Dev& dv = pes_[p]->devs[d];
      Result<devx::Mr> mr = dv.devx->reg_mr(dv.pdn, addr, bytes, kAllAccess);
      if (!mr) return mr.status();
      regs[p].keys[d] = mr->lkey;  // each NIC's registration has its own key
    }
  }
  if (cfg_.procs.boot != nullptr) {  // the other processes' registrations of the chunk
    Result<std::vector<ChunkReg>> all = gather(regs[cfg_.procs.boot->rank()]);
    if (!all) return all.status();
    regs = *all;
  }
  for (uint32_t p = 0; p < n; ++p)
    if (local(p)) pes_[p]->b.set_chunk(chunk, regs.data(), bytes);
  return {};
}

void ModelWorld::inject(const std::vector<WorldFault>& faults) {
  faulted_ = faulted_ || !faults.empty();
  // A fault of a PE's node (link, stall, doorbells, death) hits each of its NICs; a QP error
  // hits the QP of group member 0 to the target, on its NIC.
  for (const WorldFault& f : faults) {
    if (!local(f.pe)) continue;  // another process's PE: its own world injects it
    DevState& st = pes_[f.pe]->state();
    if (f.kind == WorldFault::kQpError) {
      const DevQp& q = st.qps[qp_slot(st, 0, f.target)];
      nic_of(f.pe, q).faults().qp_errors.push_back({f.at_ns, q.qpn});
      continue;
    }
    if (f.kind == WorldFault::kStaleRkey) {  // the variant byte: the key of a registration that no longer exists
      for (uint32_t c = 0; c < st.keys.nchunks; ++c)
        for (uint32_t d = 0; d < st.keys.ndevs; ++d) heap::rkey_entry(st.keys, c, f.target, d).key ^= 0x80;
      continue;
    }
    if (f.kind == WorldFault::kStaleDcKey) {  // pe's address vectors for target's DCTs carry another key
      for (uint32_t d = 0; d < cfg_.num_nics && !pes_[f.pe]->dcts.empty(); ++d) pes_[f.pe]->dcts[size_t(f.target) * cfg_.num_nics + d].key ^= 1;
      continue;
    }
    if (f.kind == WorldFault::kLateCqes) {
      for (const std::vector<DevQp>* set : {&pes_[f.pe]->qps(), &pes_[f.pe]->qps(true)})
        for (const DevQp& q : *set) {
          mock_nic::Nic& nic = nic_of(f.pe, q);
          (void)nic.set_completion_delay(nic.qp(q.qpn)->attr.send_cqn, f.count);
        }
      continue;
    }
    for (Dev& dv : pes_[f.pe]->devs) (void)dv.nic->inject(f.kind, f.at_ns, f.for_ns, f.count);
  }
}

bool ModelWorld::untimed() const {
  for (const auto& pe : pes_)
    if (pe)
      for (const Dev& d : pe->devs)
        if (!d.nic->untimed()) return false;
  return true;
}

void ModelWorld::on_nic_trace(std::function<void(uint32_t pe, double when, const trace::Event&)> fn) {
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (uint32_t d = 0; d < cfg_.num_nics && local(p); ++d) {
      mock_nic::Nic* nic = pes_[p]->devs[d].nic.get();
      if (!fn) nic->set_trace(nullptr);
      else nic->set_trace([fn, p, nic](const trace::Event& e) { fn(p, nic->clock_ns(), e); });
    }
}

void ModelWorld::DoorbellRoute::note() {
  if (timed) rung_ns = std::max(rung_ns, s->now());  // what the timed schedule waits for
  if (world->doorbell_observer_) world->doorbell_observer_(pe, s->now());
}

void ModelWorld::DoorbellRoute::ring(void* route, uint64_t addr, uint64_t value) {
  auto& r = *static_cast<DoorbellRoute*>(route);
  if (r.timed || r.world->doorbell_observer_) [[unlikely]] r.note();
  r.nic->mmio_write64(addr, value);
}

void ModelWorld::attach(gpu_sim::Scheduler& s) {
  // The scheduler holds pointers into routes_ (map_mmio): a world serves one scheduler at a
  // time, and routes_ is not resized until the next attach (or rewind) replaces it.
  routes_.assign(size_t(cfg_.npes) * cfg_.num_nics, {});
  if (cfg_.failover) add_recovery_agent(s);
  // Every management word, by name, for hang reports: each QP's (and backup's) indices, lock
  // and proxy word, its CQE's last word and, with failover, its health words. Named once: the
  // words stay where they are for the world's life.
  if (watched_.empty())
    for (uint32_t p = 0; p < cfg_.npes; ++p) {
      if (!local(p)) continue;
      for (const std::vector<DevQp>* set : {&pes_[p]->qps(), &pes_[p]->qps(true)})
        for (size_t i = 0; i < set->size(); ++i) {
          const DevQp& q = (*set)[i];
          const std::string pfx = "pe" + std::to_string(p) + (set == &pes_[p]->qps() ? ".qp" : ".backup") + std::to_string(i) + ".";
          for (const MvarWord& w : kMvarWords) watched_.push_back({pfx + w.name, &(q.mv->*w.word)});
          watched_.push_back({pfx + "cqe", reinterpret_cast<const uint64_t*>(reinterpret_cast<const uint8_t*>(q.cqe) + 56)});
          if (q.hp != nullptr) {  // (a hang report names what a failover wait polls, not its address)
            watched_.push_back({pfx + "health", &q.hp->state});
            watched_.push_back({pfx + "users", &q.hp->users});
            watched_.push_back({pfx + "epoch", &q.hp->epoch});
          }
        }
    }
  s.watch(&watched_);
  // ibuf slot 0: where every non-fetching atomic's result lands and nobody reads. The heaps,
  // rings, CQs and ibufs by name, for race reports.
  if (gpu_sim::RaceDetector* r = s.race())
    for (uint32_t p = 0; p < cfg_.npes; ++p) {
      if (!local(p)) continue;
      const std::string pe = "pe" + std::to_string(p);
      if (!cfg_.heap.phantom) r->name_range(reinterpret_cast<const void*>(pes_[p]->heap_bases[p]), cfg_.heap.heap_bytes, pe + ".heap");
      for (const std::vector<DevQp>* set : {&pes_[p]->qps(), &pes_[p]->qps(true)})
        for (size_t i = 0; i < set->size(); ++i) {
          const DevQp& q = (*set)[i];
          const std::string qp = pe + (set == &pes_[p]->qps() ? ".qp" : ".backup") + std::to_string(i);
          r->ignore(q.ibuf, kIbufSlotBytes);
          r->name_range(q.ibuf, size_t(q.ibuf_nslots + 1) * kIbufSlotBytes, qp + ".ibuf");
          r->name_range(q.wq, size_t(q.nwqes) * mlx5::kWqebb, qp + ".ring");
          r->name_range(q.cqe, sizeof(mlx5::Cqe64), qp + ".cqe");
        }
    }
  s.add_reporter([this] {
    const std::string e = nic_errors();
    return e.empty() ? e : "NIC errors and events:\n" + e;
  });
  // NIC buffers in GPU memory: the NICs read them through L2, where GPU scope reaches. A
  // protocol told it may not skip CSTs runs on a GPU without GPUDirect RDMA write ordering
  // (CUDA's attribute decides both on hardware): response data may land unseen until a CST.
  if (s.weak() != nullptr) {
    s.weak()->set_gpu_scope_reaches_devices(cfg_.nic_buf_on_gpumem);
    s.weak()->set_unordered_landings(!cfg_.opt.may_skip_cst);
  }
  const models::CostModel costs = s.options().costs;
  if (cfg_.procs.links != nullptr)  // the other processes' requests: their responder halves run here, between this process's steps
    s.add_agent("links", [this](gpu_sim::AgentCtx& a) {
      for (;;) {
        a.point();
        if (cfg_.procs.links->serve() != 0) a.changed();
        else if (!a.spin("links: no request from another process")) return;
      }
    });
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (uint32_t dev = 0; dev < cfg_.num_nics && local(p); ++dev) {
      mock_nic::Nic* nic = pes_[p]->devs[dev].nic.get();
      DoorbellRoute& route = routes_[p * cfg_.num_nics + dev];
      double* rung_ns = &route.rung_ns;
      const std::string name = "nic" + std::to_string(p) + (cfg_.num_nics > 1 ? "." + std::to_string(dev) : "");
      nic->set_observer(s.device_observer(), name);  // a system-scope observer of GPU memory
      // Every UAR page of this NIC: stores there are doorbells (and, in simulated time, the
      // NIC cannot act on one before it was rung).
      const bool timed = s.options().policy == gpu_sim::Policy::kTimed;
      route = {this, nic, &s, p, timed, 0};
      s.map_mmio(nic->uar_va(0), uint64_t(1) << 32, &DoorbellRoute::ring, &route);
      // Timers (retries, link outages) run on simulated time in the timed schedule, else on a
      // step clock every NIC shares: each engine action is action_ns.
      // Fast mode switches to no other agent between two steps of this one, so while no NIC's
      // work depends on time (Nic::untimed) a step may run many engine actions: a doorbell's
      // worth of WQEs through one progress() call rather than an agent step per WQE. It ends
      // as that many one-action steps would, but for the order of QPs with work (one QP's run,
      // then the next) and the step clock, which then moves with each action that moves the
      // engine's time (step_clock()) and takes the rest at the step's end.
      const bool fast = s.options().policy == gpu_sim::Policy::kRunToCompletion;
      const double action_ns = nic->config().action_ns;
      if (timed) nic->set_clock([&s] { return s.now(); });
      else nic->set_clock([this, action_ns] { return double(step_clock()) * action_ns; });
      // Untimed, an engine with nothing to do sleeps until a QP of its gets work (a doorbell),
      // as hardware does, if the schedule lets it (SchedOptions::park_idle).
      const bool park = s.options().park_idle && !timed;
      s.add_agent(name, [this, nic, rung_ns, costs, timed, fast, action_ns, park, &s](gpu_sim::AgentCtx& a) {
        if (timed) nic->set_cqe_hook([&a](const void* cqe) { a.wrote(cqe); });  // GPU pollers wait for this time
        if (park) nic->set_wake_hook([&s, id = a.id()] { s.wake(id); });
        struct Unhook {
          mock_nic::Nic* n;
          ~Unhook() { n->set_cqe_hook(nullptr), n->set_wake_hook(nullptr); }
        } unhook{nic};
        for (;;) {
          a.point();
          a.wait_until_ns(*rung_ns);
          const uint64_t bytes = nic->bytes_moved();
          const bool many = fast && cfg_.fast_step_actions > 1 && untimed();
          if (many) stepping_ = nic, step_from_ = nic->now();
          const size_t done = nic->progress(many ? cfg_.fast_step_actions : 1);
          stepping_ = nullptr;
          if (done != 0) {
            a.advance(costs.nic_wqe_ns +
                      double(nic->bytes_moved() - bytes) / std::min(costs.wire_bytes_per_ns, costs.pcie_bytes_per_ns));
            ticks_ += many ? done : 1;  // done >= the engine time the step moved (landings count, but move none)
            a.changed(nic->now());
          } else if (const double t = nic->next_timer_ns(); t != std::numeric_limits<double>::infinity()) {
            // Only a timer can move this NIC on: let time pass to it.
            if (timed) a.wait_until_ns(t);
            else ticks_ = std::max(ticks_ + 1, uint64_t(std::ceil(t / action_ns)));
            a.changed(ticks_);
          } else if (park && nic->sleeps_until_kicked()) {
            if (!a.park("nic engine: idle (no doorbell), parked")) return;
          } else if (!a.spin(nic->waiting().empty() ? "nic engine: idle (no doorbell)" : nic->waiting().c_str())) {
            return;
          }
        }
      });
      if (cfg_.opt.cpu_proxy) {  // one proxy per NIC, ringing for that NIC's QPs
        Pe* pe = pes_[p].get();
        // Idle, it may park until a GPU thread stores one of its QPs' proxy words — where a
        // store is seen when made (no weak memory) and only GPU threads write them (no failover).
        const bool park_proxy = park && s.weak() == nullptr && !cfg_.failover;
        const uint32_t proxy = s.add_agent("proxy" + name.substr(3), [this, pe, dev, costs, park_proxy](gpu_sim::AgentCtx& a) {
          std::vector<uint64_t> rung(pe->qps().size(), cfg_.start_index);
          for (;;) {
            a.point();
            bool did = false;
            for (size_t i = 0; i < pe->qps().size(); ++i) {
              const DevQp& q = pe->qps()[i];
              if (q.dev != dev) continue;
              const uint64_t prod = __atomic_load_n(&q.mv->proxy_prod, __ATOMIC_ACQUIRE);  // memory: the host's view
              if (prod <= rung[i]) continue;
              a.acquired(&q.mv->proxy_prod);
              a.observe(&q.mv->proxy_prod);                          // published by the GPU at that time
              a.advance(costs.proxy_post_ns * double(prod - rung[i]));  // IBRC-style: each request posted
              ring_qp(a, cfg_.opt, q, prod, true);  // the host rings for the GPU
              rung[i] = prod;
              did = true;
            }
            if (did) a.changed();
            else if (park_proxy ? !a.park("cpu proxy: idle, parked") : !a.spin("cpu proxy: idle")) return;
          }
        });
        if (park_proxy)
          for (const DevQp& q : pe->qps())
            if (q.dev == dev) s.wake_on_store(&q.mv->proxy_prod, sizeof q.mv->proxy_prod, proxy);
      }
    }
}

Status ModelWorld::finish_run() {
  if (cfg_.procs.links == nullptr) return {};
  std::string why;
  if (!cfg_.procs.links->serve_until_all_done(&why)) return Status(Errc::kBadState, "world: " + why);
  return {};
}

namespace {

// The first broken queue invariant of one QP (its words now and, if `was` is given, at the
// last check, in kMvarWords' order), or "".
std::string first_violation(const Mvars& m, const uint64_t* was, uint64_t fetched, uint32_t depth) {
  for (size_t i = 0; i < std::size(kMvarWords); ++i) {  // indices only move forward
    const MvarWord& w = kMvarWords[i];
    if (was != nullptr && w.index && m.*w.word < was[i])
      return std::string(w.name) + " moved back from " + std::to_string(was[i]) + " to " + std::to_string(m.*w.word);
  }
  if (!(m.cons_idx <= m.prod_idx)) return "cons > prod";
  if (!(m.prod_idx <= m.ready_head)) return "prod > ready";
  if (!(m.ready_head <= m.resv_head)) return "ready > resv";
  if (m.ready_head - m.cons_idx > depth) return "ready - cons > depth";
  if (m.ibuf_tail > m.ibuf_head) return "ibuf tail > head";
  if (fetched > m.ready_head) return "NIC fetched beyond ready_head";
  return {};
}

}  // namespace

std::string ModelWorld::check_qp(uint32_t p, bool backup, uint32_t slot) {
  const DevQp& q = pes_[p]->qps(backup)[slot];
  const Mvars& m = *q.mv;
  const uint64_t fetched = nic_of(p, q).qp(q.qpn)->head;
  const uint32_t nqp = qps_per_set(pes_[p]->state());
  if (last_checked_.empty()) last_checked_.resize(size_t(cfg_.npes) * 2 * nqp);  // zeros: below any start
  Checked& was = last_checked_[(size_t(p) * 2 + backup) * nqp + slot];
  // A failed QP's words are reset by its recovery, which then opens a new epoch: indices
  // only move forward within an epoch.
  const bool same_epoch = q.hp == nullptr || (q.hp->state != uint64_t(Health::kFailed) && q.hp->epoch == was.epoch);
  constexpr size_t kIbufTail = 7;  // kMvarWords' row of ibuf_tail
  static_assert(kMvarWords[kIbufTail].word == &Mvars::ibuf_tail);
  std::string bad = first_violation(m, same_epoch ? was.words.data() : nullptr, fetched, q.nwqes);
  if (bad.empty() && same_epoch && check_ibuf_ && m.ibuf_tail > was.words[kIbufTail])
    bad = ibuf_freed_early(p, q, was.words[kIbufTail], m.ibuf_tail);
  for (size_t i = 0; i < std::size(kMvarWords); ++i) was.words[i] = m.*kMvarWords[i].word;
  was.epoch = q.hp != nullptr ? q.hp->epoch : 0;
  if (bad.empty()) return bad;
  return where(p, q.dev) + " qpn " + std::to_string(q.qpn) + ": " + bad + " (resv " + std::to_string(m.resv_head) + " ready " +
         std::to_string(m.ready_head) + " prod " + std::to_string(m.prod_idx) + " cons " + std::to_string(m.cons_idx) + " nic head " +
         std::to_string(fetched) + ")";
}

std::string ModelWorld::check_invariants() {
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (bool backup : {false, true})
      if (local(p))
      for (uint32_t slot = 0; slot < pes_[p]->qps(backup).size(); ++slot)
        if (std::string bad = check_qp(p, backup, slot); !bad.empty()) return bad;
  return {};
}

void ModelWorld::check_every_store(gpu_sim::Scheduler& s) {
  // The ibuf's position rule reads the ring and the NIC as they are when ibuf_tail lands: in
  // the weak model the next owner may see the release (and write its WQE) before it lands.
  check_ibuf_ = s.weak() == nullptr;
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (bool backup : {false, true}) {
      if (!local(p)) continue;
      const std::vector<Mvars>& mv = backup ? pes_[p]->backup_mvars : pes_[p]->mvars;
      if (mv.empty()) continue;
      s.check_stores(mv.data(), mv.size() * sizeof(Mvars), [this, p, backup, base = mv.data()](const void* addr) {
        return check_qp(p, backup, uint32_t((static_cast<const uint8_t*>(addr) - reinterpret_cast<const uint8_t*>(base)) / sizeof(Mvars)));
      });
    }
}

Result<transport::ReachMap> ModelWorld::reach_map() const {
  struct IbgdaTransport : transport::Transport {
    const ModelWorld* w;
    explicit IbgdaTransport(const ModelWorld* world) : w(world) { name = "ibgda"; }
    uint32_t can_reach(uint32_t pe, uint32_t peer) const override {
      if (!w->local(pe)) return 0;  // another process's PE: its QPs' states are known there
      for (const DevQp& q : w->pes_[pe]->qps())
        if (q.pe == peer && w->nic_of(pe, q).qp(q.qpn)->state != mock_nic::QpState::kRts) return 0;
      return transport::kRead | transport::kWrite | transport::kAtomics;
    }
  } ib(this);
  return transport::ReachMap::build(cfg_.npes, {&ib});
}

std::string ModelWorld::first_error() const {
  std::string out;
  for (uint32_t p = 0; p < cfg_.npes && out.empty(); ++p)
    if (const uint64_t w = local(p) ? pes_[p]->error : 0; w != 0)
      out = "pe " + std::to_string(p) + ": error CQE " + mlx5::syndrome_name(mlx5::CqeSyndrome(error_syndrome(w))) +
            " on qpn " + std::to_string(error_qpn(w)) + " at wqe " + std::to_string(error_wqe(w));
  // The root cause: the earliest failed WQE any NIC recorded (flushes are not recorded).
  const mock_nic::ErrorRecord* first = nullptr;
  uint32_t first_pe = 0, first_dev = 0;
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (uint32_t d = 0; d < cfg_.num_nics && local(p); ++d)
      for (const mock_nic::ErrorRecord& e : pes_[p]->devs[d].nic->errors())
        if (first == nullptr || e.when_ns < first->when_ns) first = &e, first_pe = p, first_dev = d;
  if (first != nullptr) {
    char v[8];
    std::snprintf(v, sizeof v, "0x%02x", first->vendor);
    out += std::string(out.empty() ? "" : "; ") + "root cause: " + where(first_pe, first_dev) + " qpn " +
           std::to_string(first->qpn) + " wqe " + std::to_string(first->wqe_idx) + " " +
           mlx5::opcode_name(mlx5::WqeOpcode(first->wqe_opcode)) + " " +
           mlx5::syndrome_name(mlx5::CqeSyndrome(first->syndrome)) + " (vendor " + v + ")";
  }
  return out;
}

std::string ModelWorld::nic_errors() const {
  std::string out;
  for (uint32_t p = 0; p < cfg_.npes; ++p)
    for (uint32_t d = 0; d < cfg_.num_nics && local(p); ++d) {
      const mock_nic::Nic& n = *pes_[p]->devs[d].nic;
      const std::string name = "  nic" + std::to_string(p) + (cfg_.num_nics > 1 ? "." + std::to_string(d) : "");
      for (const mock_nic::ErrorRecord& e : n.errors())
        out += name + ": qpn " + std::to_string(e.qpn) + " wqe " + std::to_string(e.wqe_idx) + " " +
               mlx5::syndrome_name(mlx5::CqeSyndrome(e.syndrome)) + " vendor " + std::to_string(e.vendor) + "\n";
      for (const mock_nic::AsyncEvent& e : n.events())
        out += name + ": async event " + mock_nic::async_event_name(e.kind) + " on " + std::to_string(e.object) + "\n";
      if (!n.waiting().empty()) out += name + ": " + n.waiting() + "\n";
    }
  return out;
}

}  // namespace doorbell::ibgda
