// N PEs of one process on software NICs joined by a fabric, set up the way an IBGDA host
// does it, through the DEVX driver only: per PE and NIC (num_nics per PE, each its own LID) a
// context, PD, UAR, a queue set of npes * num_rc_per_pe RC QPs with collapsed send CQs, an
// ibuf per QP, RC handles exchanged through an in-process bootstrap table (NIC d of a PE to
// NIC d of each peer: rail-aligned), QPs moved to RTS, the symmetric heap's chunks registered
// on every NIC (lkey per chunk and NIC, rkey per chunk, PE and NIC), and the device state
// each PE's GPU code reads. attach() lets the NIC engines (and the CPU proxies, in the
// CPU-handler variant) run as agents of a gpu_sim scheduler.
#pragma once

#include <array>
#include <cassert>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/heap/symmetric_heap.h"
#include "core/ibgda/failover.h"
#include "sim/ibgda/faults.h"
#include "core/ibgda/dev_state_builder.h"
#include "core/ibgda/state.h"
#include "core/transport/reach_map.h"
#include "hw/gpu_sim/scheduler.h"
#include "hw/mlx5_devx/queue_set.h"
#include "hw/mock_nic/devx/model_devx.h"
#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/link.h"
#include "host/bootstrap/bootstrap.h"

namespace doorbell::ibgda {

// One PE per process (processes launched by mpirun): a process builds PE boot->rank() only
// (npes == boot->size()), exchanges RC handles, heap bases and keys through `boot`, and
// reaches the other PEs' NICs over `links` (their responder halves run there). malloc is
// then collective: every process calls it in the same order, as nvshmem_malloc.
struct Processes {
  bootstrap::Bootstrap* boot = nullptr;
  mock_nic::ShmLinks* links = nullptr;
};

struct WorldConfig {
  uint32_t npes = 2;
  uint32_t num_rc_per_pe = 1;         // per peer and NIC
  uint32_t num_nics = 1;              // NICs per PE (DevState::num_devices)
  uint32_t log_qp_depth = 6;          // WQEBBs per QP (and CQEs per send CQ)
  QpLayout layout = QpLayout::kQpMajor;
  Options opt;
  bool nic_buf_on_gpumem = true;
  uint32_t ibuf_slots = 8;            // fetch slots per QP (power of two)
  // DC: which QPs are DCIs (each PE then has a DCT per NIC, key kDcKey): none, those to the PE
  // itself (NVSHMEM's sends to self), or all. One process only; not with failover.
  DcUse dc = DcUse::kNone;
  heap::HeapConfig heap{0, 64ull << 20, 64ull << 10, 2ull << 30};  // npes filled in
  uint32_t response_delay_max = 0;    // NIC model: late READ / atomic responses
  uint64_t seed = 1;
  // Where every QP's indices begin (WQE, CQ and ibuf counters, the NIC's view, the doorbell
  // record and the CQE's wqe_counter): near 2^16, 2^32 or 2^63 a short run crosses the
  // boundaries a long one would. Recovery resets a QP to 0, as hardware does.
  uint64_t start_index = 0;
  devx::RtsSpec rts;                  // RC timers (ack_timeout, retry_count, rnr_retry) as the driver sets them
  // Failover (failover.h, recovery.cc): a backup QP per main QP, health words, per-thread
  // replay logs, and a host agent that recovers failed QP pairs and watches for stalls.
  bool failover = false;
  uint32_t failover_threads = 256;    // replay logs per PE: at least the threads of a launch
  uint32_t watchdog_polls = 24;       // polls of a stuck QP (its QUERY_QP position) before the host acts
  double watchdog_ns = 20e3;          // ... in simulated time (timed schedule; at least the retry window)
  Processes procs;                    // one PE per process, when procs.boot is set
  // Fast mode: engine actions a NIC agent's step may run while every NIC is untimed (1: one
  // per step, as the other schedules; a test compares the two).
  uint32_t fast_step_actions = 256;
};

// What the recovery agent did, in simulated ns (timed schedule) or the NICs' step clock.
struct RecoveryStats {
  uint32_t suspected = 0, rerung = 0, failed = 0, recovered = 0, dead = 0;
  double max_recovery_ns = 0;  // longest time a pair spent between failure and recovery
};

class ModelWorld {
 public:
  static Result<std::unique_ptr<ModelWorld>> create(const WorldConfig& cfg);
  ~ModelWorld();

  // Another run on this world instead of a new one (WorldPool): everything a run changed —
  // the NICs' run state, the queues' and ibufs' bytes, the management words, the heap's
  // allocations and their bytes — goes back to how create() left it, for config `c`, which
  // may differ from this world's only in the run's own fields (opt, start_index). The heap
  // keeps the chunks earlier runs mapped, so only a write outside every allocation could
  // tell the difference. Not for worlds with failover, faults injected or one PE per
  // process (rewindable()).
  bool fits(const WorldConfig& c) const;
  // A hash of what fits() compares: equal for configs that fit the same world.
  static uint64_t shape_hash(const WorldConfig& c);
  bool rewindable() const { return !cfg_.failover && cfg_.procs.boot == nullptr && !faulted_; }
  Status rewind(const WorldConfig& c);

  const WorldConfig& config() const { return cfg_; }
  // Whether PE `pe` lives in this process (all do, unless one PE per process): only a local
  // PE has a state, NICs and memory here.
  bool local(uint32_t pe) const { return pes_[pe] != nullptr; }
  DevState& state(uint32_t pe) { return pes_[pe]->state(); }
  heap::SymmetricHeap& heap() { return *heap_; }
  mock_nic::Nic& nic(uint32_t pe, uint32_t dev = 0) { return *pes_[pe]->devs[dev].nic; }
  mock_nic::Fabric& fabric() { return fabric_; }
  // Symmetric allocation (same offset on every PE); grows the heap and the key tables.
  Result<uint64_t> malloc(uint64_t bytes, uint64_t align = 64) { return heap_->alloc(bytes, align); }
  uint8_t* at(uint32_t pe, uint64_t off) {  // a local PE's
    assert(local(pe));
    return heap_->base(cfg_.procs.boot != nullptr ? 0 : pe) + off;
  }
  // After a run, one PE per process: answer the other processes' requests until every one
  // has finished its run too (a process done first still owns memory the others write).
  // Nothing to do in one process.
  Status finish_run();

  // Faults for the coming run (before attach).
  void inject(const std::vector<WorldFault>& faults);
  // NIC engines (and CPU proxies) become daemon agents; UAR stores are routed to the NICs.
  void attach(gpu_sim::Scheduler& s);
  // Told of every doorbell (PE, simulated or step time) — for timelines.
  void on_doorbell(std::function<void(uint32_t pe, double when)> fn) { doorbell_observer_ = std::move(fn); }
  // Every trace event of this process's NICs (hw/trace), with its PE and the NIC's time (ns).
  void on_nic_trace(std::function<void(uint32_t pe, double when, const trace::Event&)> fn);
  // Queue-index invariants of every QP: cons <= prod <= ready <= resv, ready - cons <= depth,
  // ibuf head - tail <= nslots, the NIC has fetched nothing beyond ready_head, and no index
  // moved back since the last call. Empty when they hold; else a description of the first
  // violation.
  std::string check_invariants();
  // The same for one QP at each change of its words, through the scheduler (for runs too
  // large to check every QP at every step): the first violation is s.violation().
  void check_every_store(gpu_sim::Scheduler& s);
  // Which transport carries RMA / AMO between each pair of PEs (SPEC §2): here the one
  // transport is IBGDA, which reaches a peer when every QP to it is in RTS.
  Result<transport::ReachMap> reach_map() const;
  // The first error a PE's poller recorded ("pe N: error CQE S on qpn Q at wqe W") and the
  // root cause the NICs recorded (the first failed WQE that was not a flush, with QP, WQE
  // index, opcode, syndrome and vendor code), or empty when nothing failed.
  std::string first_error() const;
  // The NICs' root-cause records and async events, one line each (hang reports).
  std::string nic_errors() const;
  const RecoveryStats& recovery_stats() const { return recovery_; }

 private:
  struct Dev {  // one NIC of a PE and what the host made on it
    std::unique_ptr<mock_nic::Nic> nic;
    std::unique_ptr<mock_nic::ModelDevx> devx;
    uint32_t pdn = 0;
    devx::Uar uar;
    std::unique_ptr<devx::QueueSet> queues, backup_queues;  // npes * num_rc_per_pe, QP-major
    devx::Obj dct{};  // DC: this NIC's DCT (its SRQ and CQ beside it)
  };
  // Whether queue-set QP (rc * npes + peer) of PE p is a DCI.
  bool is_dci(uint32_t p, uint32_t peer) const { return cfg_.dc == DcUse::kAll || (cfg_.dc == DcUse::kSelf && peer == p); }
  struct Pe {
    explicit Pe(const StateShape& s) : b(s) {}
    DevState& state() { return b.state(); }
    std::vector<DevQp>& qps(bool backup = false) { return b.qps(backup); }  // layout order
    DevStateBuilder b;
    std::vector<Dev> devs;
    std::vector<Mvars> mvars, backup_mvars;
    std::vector<QpHealth> health, backup_health;
    std::vector<ReplayLog> logs;
    std::vector<uint8_t*> ibufs;
    std::vector<devx::Mr> ibuf_mrs;
    std::vector<uint32_t> ibuf_devs;    // the NIC each ibuf is registered on
    std::vector<uint64_t> heap_bases;
    std::vector<DcTarget> dcts;  // every PE's DCTs, [pe * num_nics + dev]: this PE's view (a fault may stale one)
    uint64_t group_switch[kQpPools] = {}, error = 0;
  };
  explicit ModelWorld(const WorldConfig& c) : cfg_(c) {}
  Status build();
  // After build(): keep what rewind() puts back; then begin(), every run's first step: each
  // QP's counters at cfg_.start_index.
  void save();
  Status begin();
  Status connect_all(bool backup);  // RST -> RTS, on each NIC QP (rc * npes + peer) of PE p to (rc * npes + p) of peer
  // Every PE's QPNs, [(pe * num_nics + dev) * npes * num_rc_per_pe + queue-set index]: from
  // the local queue sets, the others' through the bootstrap.
  Result<std::vector<uint32_t>> qpn_table(bool backup);
  // What each process contributes to an exchange of fixed-size blocks, gathered.
  template <class T>
  Result<std::vector<T>> gather(const T& mine);
  uint16_t lid(uint32_t pe, uint32_t dev) const { return uint16_t(pe * cfg_.num_nics + dev + 1); }  // one NIC per PE: LID pe + 1
  static devx::QueueSet& queue_set(Dev& d, bool backup) { return backup ? *d.backup_queues : *d.queues; }
  mock_nic::Nic& nic_of(uint32_t pe, const DevQp& q) const { return *pes_[pe]->devs[q.dev].nic; }
  // "pe P" or, with several NICs, "pe P nic D": where a QPN is unique.
  std::string where(uint32_t pe, uint32_t dev) const;
  Status fill_qps(Pe& pe, bool backup);
  static Status start_at(Pe& pe, DevQp& d, uint64_t s);
  void add_recovery_agent(gpu_sim::Scheduler& s);  // recovery.cc
  Status register_chunk(uint32_t chunk, const std::vector<uint8_t*>& addrs, uint64_t bytes);

  WorldConfig cfg_;
  mem::AddressSpace mem_;
  mock_nic::Fabric fabric_;
  std::vector<std::unique_ptr<Pe>> pes_;
  // Where a NIC's UAR stores go (Scheduler::map_mmio's pointer form), one per NIC (pe *
  // num_nics + dev); rung_ns is, in the timed schedule, its latest doorbell's time.
  struct DoorbellRoute {
    ModelWorld* world;
    mock_nic::Nic* nic;
    const gpu_sim::Scheduler* s;
    uint32_t pe;
    bool timed;
    double rung_ns;
    static void ring(void* route, uint64_t addr, uint64_t value);
    [[gnu::noinline]] void note();  // the time and the observer, where asked for
  };
  std::vector<DoorbellRoute> routes_;
  uint64_t ticks_ = 0;               // untimed schedules: the NICs' shared step clock
  // Fast mode: the NIC inside a step of many actions (WorldConfig::fast_step_actions), and its
  // engine time when the step began. The step clock adds the engine time the step has moved
  // so far; ticks_ takes the step's actions when it ends. Only while every NIC here is
  // untimed (a peer's link is asked too).
  bool untimed() const;
  const mock_nic::Nic* stepping_ = nullptr;
  uint64_t step_from_ = 0;
  uint64_t step_clock() const { return ticks_ + (stepping_ != nullptr ? stepping_->now() - step_from_ : 0); }
  RecoveryStats recovery_;
  std::function<void(uint32_t, double)> doorbell_observer_;
  std::string check_qp(uint32_t pe, bool backup, uint32_t slot);
  std::string ibuf_freed_early(uint32_t pe, const DevQp& q, uint64_t from, uint64_t to) const;  // ibuf_check.cc
  struct Checked {  // the words only (an Mvars is three padded cache lines)
    std::array<uint64_t, std::size(kMvarWords)> words{};
    uint64_t epoch = 0;
  };
  std::vector<Checked> last_checked_;  // every QP's words when last checked, by (pe, backup, slot)
  bool check_ibuf_ = false;            // ibuf_freed_early at each move of ibuf_tail (SC runs)
  std::unique_ptr<heap::SymmetricHeap> heap_;
  bool faulted_ = false;  // inject() was given faults: they change keys and NICs beyond a rewind
  struct Saved {          // a PE's words after build(), for rewind()
    std::vector<Mvars> mvars, backup_mvars;
    std::vector<DevQp> qps, backups;
  };
  std::vector<Saved> saved_;  // by PE
  gpu_sim::Scheduler::WatchTable watched_;  // every management word, named (attach)
};

}  // namespace doorbell::ibgda
