#include "host/verbs_shim/model.h"

#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/cpu_relax.h"
#include "base/steady_ns.h"
#include "hw/mlx5/wqe.h"

namespace doorbell::shim {

namespace {

// SIGUSR1 asks the engine thread for the hang report (a handler may only set a flag).
std::atomic<bool> g_report_asked{false};
void ask_report(int) { g_report_asked.store(true, std::memory_order_relaxed); }

uint32_t env_u32(const char* name, uint32_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? uint32_t(std::strtoul(v, nullptr, 10)) : dflt;
}

}  // namespace

Model* Model::get(std::string* why) {
  static std::mutex made_mu;
  static Model* made = nullptr;
  static std::string failed;
  std::lock_guard<std::mutex> lock(made_mu);
  if (made == nullptr && failed.empty()) {
    auto* m = new Model();
    if (Status st = m->start(&failed); !st) {
      failed = "doorbell verbs shim: " + (failed.empty() ? st.to_string() : failed);
      delete m;
    } else {
      made = m;
      // At exit the engine stops and the counters are said; the model itself stays (objects a
      // program still holds point into it, and a late verbs call must not build a second one).
      std::atexit([] {
        made->stop();
        const Stats s = made->stats();
        if (std::getenv("DOORBELL_SHIM_QUIET") == nullptr)
          std::fprintf(stderr,
                       "doorbell verbs shim (rank %u, lid %u): %llu doorbells, %llu WQEs executed by the model NIC, %llu engine "
                       "actions, %llu requests to other processes, %llu served for them\n",
                       made->rank_, made->nic_->lid(), (unsigned long long)s.doorbells, (unsigned long long)s.wqes,
                       (unsigned long long)s.actions, (unsigned long long)s.remote_calls, (unsigned long long)s.remote_served);
        if (std::getenv("DOORBELL_SHIM_QUIET") == nullptr) std::fputs(made->profile().c_str(), stderr);
        if (made->dma_ != nullptr && !made->dma_->error().empty())
          std::fprintf(stderr, "doorbell verbs shim: device copies failed: %s\n", made->dma_->error().c_str());
        // A check that fired fails the run, whatever the program itself concluded.
        if (const size_t n = made->report_checks(); n != 0) {
          std::fprintf(stderr, "doorbell verbs shim (rank %u): %zu queue check(s) fired; exit status 3\n", made->rank_, n);
          std::fflush(nullptr);
          std::_Exit(3);
        }
      });
    }
  }
  if (made == nullptr && why != nullptr) *why = failed;
  return made;
}

Status Model::start(std::string* why) {
  rank_ = env_u32("DOORBELL_SHIM_RANK", 0);
  nranks_ = env_u32("DOORBELL_SHIM_NRANKS", 1);
  if (nranks_ == 0 || rank_ >= nranks_ || nranks_ >= 0xbfff)
    return Status(Errc::kBadParam, "DOORBELL_SHIM_RANK " + std::to_string(rank_) + " is not below DOORBELL_SHIM_NRANKS " + std::to_string(nranks_));
  mock_nic::NicConfig cfg;
  cfg.lid = uint16_t(rank_ + 1);
  // The harness's checks on the program's queues: on unless DOORBELL_SHIM_CHECKS=0.
  const char* checks = std::getenv("DOORBELL_SHIM_CHECKS");
  cfg.audit = checks == nullptr || std::strcmp(checks, "0") != 0;
  cfg.async_link_writes = true;  // a WRITE to the other process does not wait for its answer
  if (const char* spec = std::getenv("DOORBELL_SHIM_FAULTS"); spec != nullptr && *spec != 0) {
    const char* s = std::getenv("DOORBELL_SHIM_SEED");
    const uint64_t seed = s != nullptr && *s != 0 ? std::strtoull(s, nullptr, 0) : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
    Result<ShimFaults> f = parse_shim_faults(spec, seed);
    if (!f) return *why = f.status().message(), f.status();
    faults_ = std::move(*f);
    cfg.seed = faults_.seed;
    for (const ShimFault& x : faults_.list)
      if (x.kind == mock_nic::kLateResponses) cfg.response_delay_max = x.count;
    std::fprintf(stderr, "doorbell verbs shim (rank %u): faults '%s', seed %llu; repeat with DOORBELL_SHIM_FAULTS='%s' DOORBELL_SHIM_SEED=%llu\n",
                 rank_, faults_.spec.c_str(), (unsigned long long)faults_.seed, faults_.spec.c_str(), (unsigned long long)faults_.seed);
  }
  nic_ = std::make_unique<mock_nic::Nic>(mem_, cfg);
  if (!faults_.list.empty()) {
    // Fault times are the program's: wall clock from here on.
    const auto t0 = std::chrono::steady_clock::now();
    nic_->set_clock([t0] { return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()); });
    // The node's faults now; qp_error and late_cqes when their QP or CQ is made, late_responses above.
    for (const ShimFault& x : faults_.list) (void)nic_->inject(x.kind, x.at_ns, x.for_ns, x.count);
  }
  if (Status st = fabric_.attach(*nic_); !st) return st;
  if (nranks_ > 1) {
    const char* name = std::getenv("DOORBELL_SHIM_LINKS");
    if (name == nullptr || name[0] != '/')
      return Status(Errc::kBadParam, "several processes (DOORBELL_SHIM_NRANKS) need DOORBELL_SHIM_LINKS=/name, the same in each");
    // Rank 0 creates the segment; the others wait for it (a job's processes start together).
    for (int tries = 0;; ++tries) {
      auto l = mock_nic::ShmLinks::open(name, nranks_, rank_, rank_ == 0);
      if (l) {
        links_ = std::move(*l);
        break;
      }
      if (rank_ == 0 || tries > 3000) return l.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (uint32_t r = 0; r < nranks_; ++r)
      if (r != rank_)
        if (Status st = fabric_.attach_remote(uint16_t(r + 1), links_.get(), r); !st) return st;
    links_->set_server([this](uint32_t, const uint8_t* req, size_t len, mock_nic::ShmLinks::Reply& r) { fabric_.serve(req, len, r); });
  }
  // DOORBELL_SHIM_DMA=cuda: registered memory may be device memory (the CUDA plugin moves it).
  if (const char* dma = std::getenv("DOORBELL_SHIM_DMA"); dma != nullptr && std::strcmp(dma, "cuda") == 0) {
    std::string no;
    dma_ = make_cuda_dma(int(env_u32("DOORBELL_SHIM_CUDA_DEVICE", 0)), &no);
    if (dma_ == nullptr) return *why = "DOORBELL_SHIM_DMA=cuda: " + no, Status(Errc::kNotSupported, *why);
    nic_->set_dma(dma_.get());
    // The links' rings page-locked: a WRITE's bytes go from device memory into them, and a
    // READ's out of them, at copy-engine speed (pageable memory is a third as fast).
    if (std::string no; links_ != nullptr && !dma_->pin(links_->segment(), links_->segment_size(), &no))
      std::fprintf(stderr, "doorbell verbs shim: the links stay pageable (%s)\n", no.c_str());
  }
  if (struct sigaction old{}; sigaction(SIGUSR1, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {  // the program's own handler stays
    struct sigaction sa{};
    sa.sa_handler = ask_report;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  hang_ns_ = double(env_u32("DOORBELL_SHIM_HANG_S", 0)) * 1e9;
  if (const char* t = std::getenv("DOORBELL_SHIM_TRACE"); t != nullptr && std::strcmp(t, "1") != 0 && *t != 0)
    timeline_ = std::make_unique<Timeline>(t, rank_);
  engine_ = std::thread([this] { run(); });
  return {};
}

// The hang report (mu held): the queues as the NIC sees them, the counters, the links.
void Model::report_hang(const char* why) {
  std::fprintf(stderr,
               "doorbell verbs shim (rank %u, lid %u): hang report (%s): %llu doorbells, %llu engine actions, %llu requests out, %llu served\n%s",
               rank_, nic_->lid(), why, (unsigned long long)doorbells_, (unsigned long long)actions_,
               (unsigned long long)(links_ ? links_->calls() : 0), (unsigned long long)(links_ ? links_->served() : 0), nic_->queue_report().c_str());
}

// Work a program is waiting for: WQEs in a doorbell record the engine has not finished, or
// something in flight (the hang watch reports only then, not for a program that is idle).
bool Model::work_outstanding() const {
  for (uint32_t q : qpns_)
    if (const mock_nic::Qp* qp = nic_->qp(q); qp != nullptr && qp->dbr != nullptr && qp->state != mock_nic::QpState::kRst &&
                                              (uint16_t(qp->dbr->snd.get()) != uint16_t(qp->head) || !qp->inflight.empty()))
      return true;
  return false;
}

void Model::stop() {
  stop_ = true;
  if (engine_.joinable()) engine_.join();
  if (std::string why; timeline_ != nullptr && !timeline_->write(&why)) std::fprintf(stderr, "doorbell verbs shim: %s\n", why.c_str());
  if (links_ != nullptr) (void)links_->unlink();
}

Status Model::map(void* addr, uint64_t len) {
  const auto va = reinterpret_cast<uint64_t>(addr);
  auto it = maps_.upper_bound(va);
  if (it != maps_.begin()) {
    auto prev = std::prev(it);
    if (va >= prev->first && va + len <= prev->first + prev->second.len) return ++prev->second.users, Status();
  }
  if (Status st = mem_.map_external(addr, len, mem::MemKind::kHost, "program memory"); !st)
    return Status(st.code(), "the range at " + std::to_string(va) + " (+" + std::to_string(len) + ") overlaps memory the model has mapped otherwise: " + st.message());
  maps_[va] = {len, 1};
  return {};
}

void Model::unmap(void* addr) {
  const auto va = reinterpret_cast<uint64_t>(addr);
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return;
  --it;
  if (va >= it->first + it->second.len || --it->second.users != 0) return;
  (void)mem_.free(it->first);
  maps_.erase(it);
}

Model::UarPage* Model::add_uar(uint32_t page) {
  auto u = std::make_unique<UarPage>();
  u->page = page;
  u->mem = static_cast<uint8_t*>(std::aligned_alloc(4096, 4096));
  std::memset(u->mem, 0, 4096);
  uars_.push_back(std::move(u));
  return uars_.back().get();
}

void Model::remove_uar(UarPage* u) {
  for (auto it = uars_.begin(); it != uars_.end(); ++it)
    if (it->get() == u) {
      std::free(u->mem);
      uars_.erase(it);
      return;
    }
}

// A BlueFlame word that changed is a doorbell (the program stored a new ctrl segment's first
// 8 bytes there): the model takes it as that store. Only the last store to a word is seen, so
// when QPs share the page every one of them is rung (each then reads its own doorbell record).
bool Model::ring_changed(uint64_t now_ns) {
  bool any = false;
  for (size_t i = 0; i < qpns_.size(); ++i)  // the profile's proxy clock starts when a record moves
    if (const mock_nic::Qp* qp = nic_->qp(qpns_[i]); qp != nullptr && qp->dbr != nullptr) {
      DbrWatch& w = dbr_watch_[i];
      if (const uint16_t d = uint16_t(qp->dbr->snd.get()); d != w.dbr) {
        w.dbr = d;
        if (!w.moved) w.moved = true, w.since_ns = now_ns;
      }
    }
  for (auto& u : uars_)
    for (int b = 0; b < 2; ++b) {
      const uint32_t off = mlx5::kBfOffset + b * mlx5::kBfSize;
      const uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(u->mem + off), __ATOMIC_ACQUIRE);
      if (v == u->seen[b]) continue;
      u->seen[b] = v;
      look_gap_ns_ += now_ns - last_look_ns_;
      for (size_t i = 0; i < qpns_.size(); ++i)
        if (const mock_nic::Qp* qp = nic_->qp(qpns_[i]); qp != nullptr && qp->attr.uar_page == u->page)
          if (DbrWatch& w = dbr_watch_[i]; w.moved) proxy_ns_ += now_ns - w.since_ns, ++proxy_n_, w.moved = false;
      nic_->uar_write64(u->page, off, v);
      for (uint32_t q : qpns_) {
        const uint64_t named = mlx5::doorbell_value(0, q);  // a doorbell for QP q: the NIC reads its QPN
        if (const mock_nic::Qp* qp = nic_->qp(q); qp != nullptr && qp->attr.uar_page == u->page && (named >> 32) != (v >> 32))
          nic_->uar_write64(u->page, off, named, false);
      }
      ++doorbells_;
      any = true;
    }
  return any;
}

void Model::run() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // the idle sleep's 50 us, not 50 us plus 50 us of slack
  auto idle_since = std::chrono::steady_clock::now();
  // DOORBELL_SHIM_TRACE=1: a line a second while anything changed, and each new NIC error;
  // DOORBELL_SHIM_TRACE=file.json: the timeline instead (timeline.h).
  const bool trace = std::getenv("DOORBELL_SHIM_TRACE") != nullptr && timeline_ == nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  auto last = std::chrono::steady_clock::now();
  uint64_t traced_actions = ~0ull;
  size_t traced_errors = 0;
  auto last_moved = std::chrono::steady_clock::now();
  bool hang_said = false;
  last_look_ns_ = steady_ns();
  while (!stop_.load(std::memory_order_relaxed)) {
    if (trace && std::chrono::steady_clock::now() - last > std::chrono::seconds(1)) {
      std::lock_guard<std::mutex> lock(mu);
      last = std::chrono::steady_clock::now();
      for (; traced_errors < nic_->errors().size(); ++traced_errors) {
        const mock_nic::ErrorRecord& e = nic_->errors()[traced_errors];
        std::fprintf(stderr, "doorbell verbs shim (lid %u): error on qpn %u wqe %llu: opcode 0x%x syndrome 0x%x vendor 0x%x\n", nic_->lid(),
                     e.qpn, (unsigned long long)e.wqe_idx, e.wqe_opcode, e.syndrome, e.vendor);
      }
      if (actions_ != traced_actions)
        std::fprintf(stderr, "doorbell verbs shim (lid %u): %llu doorbells, %llu engine actions, %llu requests out, %llu served%s%s\n",
                     nic_->lid(), (unsigned long long)doorbells_, (unsigned long long)actions_,
                     (unsigned long long)(links_ ? links_->calls() : 0), (unsigned long long)(links_ ? links_->served() : 0),
                     nic_->waiting().empty() ? "" : "; waiting: ", nic_->waiting().c_str());
      traced_actions = actions_;
    }
    size_t did = 0;
    bool nic_idle = false;  // nothing in flight at the NIC (a WRITE's answer due from the peer is work)
    {
      std::lock_guard<std::mutex> lock(mu);
      const uint64_t look = steady_ns();
      did += ring_changed(look) ? 1 : 0;
      const size_t acts = nic_->progress(1024);
      if (acts != 0) progress_ns_ += steady_ns() - look;
      actions_ += acts;
      did += acts;
      if (links_ != nullptr) did += links_->serve();
      if (nic_->audit().size() != reported_checks_) report_checks();
      if (timeline_ != nullptr && did != 0)
        timeline_->sample(*nic_, qpns_, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (g_report_asked.exchange(false, std::memory_order_relaxed)) report_hang("SIGUSR1");
      last_look_ns_ = steady_ns();  // a doorbell's watch delay runs from here to the next look
      nic_idle = did == 0 && nic_->idle();
      // DOORBELL_SHIM_HANG_S: nothing moved for that long while work is outstanding.
      const auto now = std::chrono::steady_clock::now();
      if (did != 0) last_moved = now, hang_said = false;
      else if (hang_ns_ > 0 && !hang_said && double((now - last_moved).count()) > hang_ns_ && work_outstanding()) {
        report_hang("nothing moved for DOORBELL_SHIM_HANG_S with work outstanding");
        hang_said = true;
      }
    }
    // Busy, the thread stays on its core (a NIC's engine does not sleep): a yield could give
    // the core away for a scheduler tick. Idle for 200 us, with nothing in flight (a WRITE's
    // answer due from the peer is work), it sleeps 50 us at a time.
    if (did != 0) idle_since = std::chrono::steady_clock::now();
    else if (std::chrono::steady_clock::now() - idle_since > std::chrono::microseconds(200) && nic_idle)
      std::this_thread::sleep_for(std::chrono::microseconds(50)), ++sleeps_;
    else cpu_relax();
  }
}

// Each check finding not yet said goes to stderr as it fires (mu held, or the engine stopped);
// returns how many fired in all.
size_t Model::report_checks() {
  const std::vector<std::string>& lines = nic_->audit();
  for (; reported_checks_ < lines.size(); ++reported_checks_)
    std::fprintf(stderr, "doorbell verbs shim (rank %u, lid %u): check: %s\n", rank_, nic_->lid(), lines[reported_checks_].c_str());
  return lines.size();
}

// A QP or CQ the program made: the faults that wait for it (qp_error on the k-th QP,
// late_cqes on every CQ, its delay drawn from the seed).
void Model::count_qp(uint32_t qpn) {
  for (const ShimFault& f : faults_.list)
    if (f.kind == mock_nic::kQpError && f.qp == qps_made_) nic_->faults().qp_errors.push_back({f.at_ns, qpn});
  ++qps_made_;
  qpns_.push_back(qpn);
  dbr_watch_.emplace_back();
}

void Model::count_cq(uint32_t cqn) {
  for (const ShimFault& f : faults_.list)
    if (f.kind == mock_nic::kLateCqes) (void)nic_->set_completion_delay(cqn, (faults_.seed ^ (uint64_t(cqn) * 0x9e3779b97f4a7c15ull)) % (f.count + 1));
}

void Model::retire_qp(uint32_t qpn) {
  for (auto it = qpns_.begin(); it != qpns_.end(); ++it)
    if (*it == qpn) {
      if (const mock_nic::Qp* qp = nic_->qp(qpn)) retired_wqes_ += qp->stats.wqes;
      dbr_watch_.erase(dbr_watch_.begin() + (it - qpns_.begin()));
      qpns_.erase(it);
      return;
    }
}

Model::Tallies Model::tallies() {
  Tallies t;
  t.proxy_ns = proxy_ns_, t.proxy_n = proxy_n_, t.watch_ns = look_gap_ns_, t.doorbells = doorbells_, t.sleeps = sleeps_;
  t.progress_ns = progress_ns_, t.wqes = stats_locked().wqes;
  if (links_ != nullptr) t.calls = links_->calls(), t.call_ns = links_->call_ns(), t.served = links_->served(), t.serve_ns = links_->serve_ns();
  if (dma_ != nullptr) t.copies = dma_->tallies();
  return t;
}

std::string Model::profile(bool restart) {
  std::lock_guard<std::mutex> lock(mu);
  const Tallies now = tallies(), &b = since_;
  const auto us = [](uint64_t ns, uint64_t n) { return n != 0 ? double(ns) / 1e3 / double(n) : 0.0; };
  const uint64_t wqes = now.wqes - b.wqes, proxy_n = now.proxy_n - b.proxy_n, dbs = now.doorbells - b.doorbells;
  const uint64_t calls = now.calls - b.calls, served = now.served - b.served;
  char line[640];
  const std::string who = "doorbell verbs shim (rank " + std::to_string(rank_) + ") profile" + (restarted_ ? " (since the last restart): " : ": ");
  std::snprintf(line, sizeof line,
                "client proxy (doorbell record moved -> BlueFlame store) %llu, %.1f us each; doorbell watch: %.1f us from the "
                "engine's previous pass to the look that saw it, %llu idle sleeps; engine: %llu WQEs, %.2f us of progress each (its "
                "link calls and copies included)\n",
                (unsigned long long)proxy_n, us(now.proxy_ns - b.proxy_ns, proxy_n), us(now.watch_ns - b.watch_ns, dbs),
                (unsigned long long)(now.sleeps - b.sleeps), (unsigned long long)wqes, us(now.progress_ns - b.progress_ns, wqes));
  std::string out = who + line;
  if (links_ != nullptr) {
    std::snprintf(line, sizeof line,
                  "link: %llu requests, %.1f us each to the answer (serving the peer meanwhile included); %llu served, %.1f us each\n",
                  (unsigned long long)calls, us(now.call_ns - b.call_ns, calls), (unsigned long long)served, us(now.serve_ns - b.serve_ns, served));
    out += who + line;
  }
  if (!now.copies.empty()) {
    std::string c;
    for (size_t k = 0; k < now.copies.size(); ++k) {
      const mock_nic::Dma::Tally& t = now.copies[k];
      const mock_nic::Dma::Tally was = k < b.copies.size() ? b.copies[k] : mock_nic::Dma::Tally{t.what, 0, 0, 0};
      const uint64_t n = t.n - was.n, ns = t.ns - was.ns;
      if (n == 0) continue;
      std::snprintf(line, sizeof line, "%s%s %llu, %.1f us each, %.2f GB/s", c.empty() ? "" : "; ", t.what, (unsigned long long)n, us(ns, n),
                    ns != 0 ? double(t.bytes - was.bytes) / double(ns) : 0.0);
      c += line;
    }
    out += who + "device copies: " + (c.empty() ? "none" : c) + "\n";
  }
  if (restart) since_ = now, restarted_ = true;
  return out;
}

Stats Model::stats() {
  std::lock_guard<std::mutex> lock(mu);
  return stats_locked();
}

Stats Model::stats_locked() {
  Stats s;
  s.doorbells = doorbells_, s.actions = actions_, s.wqes = retired_wqes_;
  for (uint32_t q : qpns_)
    if (const mock_nic::Qp* qp = nic_->qp(q)) s.wqes += qp->stats.wqes;
  if (links_ != nullptr) s.remote_calls = links_->calls(), s.remote_served = links_->served();
  return s;
}

}  // namespace doorbell::shim
