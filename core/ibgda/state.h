// IBGDA device state (SPEC §3–§4): what GPU threads see of one PE's QPs — the WQ ring, its
// doorbell record and BlueFlame register, the collapsed send CQ, the internal buffer (ibuf)
// for atomics, and the 64-bit management words, all counted in 64-byte WQEBBs. Every WQE
// this protocol writes is exactly one WQEBB, so WQE index == WQEBB index.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/heap/keys.h"
#include "core/sync/publish_windows.h"
#include "hw/mlx5/cqe.h"

namespace doorbell::ibgda {

// Management words of one QP/CQ pair (device memory; each updated with scoped atomics).
// The reservation head, the publish head, the post lock and the rest each own a 128-byte
// line: submitters polling ready_head do not slow the reservation atomics, nor CASes on the
// lock the prod_idx atomics (gpu/run-post-bench: 8 shared QPs).
inline constexpr size_t kMvarLine = 128;
struct Mvars {
  alignas(kMvarLine) uint64_t resv_head = 0;   // last reserved + 1
  alignas(kMvarLine) uint64_t ready_head = 0;  // every WQE below is fully written
  alignas(kMvarLine) uint64_t prod_idx = 0;    // posted to the NIC (DBR + doorbell)
  uint64_t cons_idx = 0;     // completed
  uint64_t get_head = 0;     // last READ-type WQE + 1
  uint64_t get_tail = 0;     // covered by a completed CST
  uint64_t ibuf_head = 0;    // ibuf fetch slots handed out
  uint64_t ibuf_tail = 0;    // ibuf fetch slots released (in order)
  uint64_t proxy_prod = 0;   // CPU-handler variant: producer index for the host proxy
  // Its own line: every put and get tries it right after it reserves (lock_early), and on
  // prod_idx's line those CASes slowed prod_idx's and cons_idx's users (the shared-QP rows of
  // gpu/run-post-bench, docs/benchmarks.md).
  alignas(kMvarLine) uint64_t post_send_lock = 0;
  // Written WQEBBs counted by window (core/sync/publish_windows.h): submit publishes by them.
  alignas(kMvarLine) uint64_t win_count[sync::kPublishWindows] = {};
};
// Mvars' words, as hang reports and timelines name them (a new word needs a row here).
using MvarMember = uint64_t Mvars::*;
struct MvarWord {
  const char* name;
  MvarMember word;
  bool index;  // only moves forward
};
inline constexpr MvarWord kMvarWords[] = {
    {"resv_head", &Mvars::resv_head, true}, {"ready_head", &Mvars::ready_head, true},
    {"prod_idx", &Mvars::prod_idx, true},   {"cons_idx", &Mvars::cons_idx, true},
    {"get_head", &Mvars::get_head, true},   {"get_tail", &Mvars::get_tail, true},
    {"ibuf_head", &Mvars::ibuf_head, true}, {"ibuf_tail", &Mvars::ibuf_tail, true},
    {"post_send_lock", &Mvars::post_send_lock, false}, {"proxy_prod", &Mvars::proxy_prod, true}};
// proxy_prod is the last word of prod_idx's line (6 after it): a word added anywhere moves it.
static_assert(sizeof(Mvars) == 4 * kMvarLine + sizeof(Mvars::win_count) && offsetof(Mvars, proxy_prod) == 2 * kMvarLine + 6 * 8 &&
                  sizeof(kMvarWords) / sizeof(kMvarWords[0]) == 10,
              "a new management word needs a row in kMvarWords");

inline constexpr uint32_t kIbufSlotBytes = 256;  // one uint64 per lane of a warp

// Health of a QP (seed 002): GOOD, SUSPECTED (stalled; a host watchdog re-rang it) and
// RECOVERING (back after a reset, on probation) carry traffic; a FAILED one sends its
// traffic to the backup QP while the host recovers it.
enum class Health : uint64_t { kGood = 0, kSuspected = 1, kFailed = 2, kRecovering = 3 };
DOORBELL_HD const char* health_name(Health h) {
  switch (h) {
    case Health::kGood: return "GOOD";
    case Health::kSuspected: return "SUSPECTED";
    case Health::kFailed: return "FAILED";
    case Health::kRecovering: return "RECOVERING";
  }
  return "?";
}

inline constexpr uint32_t kVerdicts = 8;  // recoveries a thread may lag behind and still learn the outcome
inline constexpr uint64_t kVerdictUnknown = ~uint64_t(0);  // recovery could not learn how far the responder got

// Failover words of one QP (device memory), shared by its users and the host's recovery.
struct QpHealth {
  uint64_t state = 0;      // Health
  uint64_t users = 0;      // threads inside the send protocol on this QP: recovery waits for 0
  uint64_t epoch = 0;      // resets so far: WQE indices of an older epoch are void
  // The verdict on epoch e, at [e % kVerdicts]: its WQEs below this index reached the
  // responder (from the peer QP's next_rcv_psn); the rest did not and may be replayed.
  uint64_t applied[kVerdicts] = {};
  uint64_t dead = 0;       // the peer is gone: no recovery will come
};

inline constexpr uint32_t kMaxNics = 8;  // NICs per PE

struct DevQp {
  uint32_t qpn = 0;
  uint32_t pe = 0;                     // the PE this QP reaches
  uint32_t dev = 0;                    // the NIC it lives on (its keys: KeyTables' dev)
  uint32_t nwqes = 0;                  // ring size in WQEBBs (power of two) = CQ size
  uint8_t* wq = nullptr;
  uint64_t* dbr = nullptr;             // the 8-byte doorbell record: receive word, send word
  uint64_t* bf = nullptr;              // BlueFlame doorbell register (MMIO)
  const mlx5::Cqe64* cqe = nullptr;    // collapsed CQ: the NIC always writes slot 0
  Mvars* mv = nullptr;
  uint8_t* ibuf = nullptr;             // slot 0: non-fetch AMOs and CST; slots 1..nslots: fetch ring
  uint32_t ibuf_lkey = 0;
  uint32_t ibuf_nslots = 0;            // fetch slots (power of two)
  QpHealth* hp = nullptr;              // failover words (null: no failover)
  bool dci = false;                    // a DC initiator: each WQE to `pe` names DevState::dcts' target
};

// A PE's DC target as a DCI's address vector names it (the half AV: key, DCT number, LID).
struct DcTarget {
  uint64_t key = 0;
  uint32_t dctn = 0;
  uint16_t lid = 0;
};
// Which QPs are DCIs: none (RC to every PE), those to this PE (NVSHMEM 3.4's default: RC has
// no loopback, so it sends to itself over a DCI to its own DCT), or all of them (NVSHMEM with
// no RC QPs).
enum class DcUse : uint8_t { kNone, kSelf, kAll };
inline constexpr uint64_t kDcKey = 0x5623ceaf;  // the DC access key NVSHMEM sets on every DCT

enum class QpLayout : uint8_t {
  kQpMajor,  // NVSHMEM: [QP0->PE0, QP0->PE1, ..., QP1->PE0, ...]
  kPeMajor,  // DeepEP:  [QP0->PE0, QP1->PE0, ..., QP0->PE1, ...]
};

// Planted bugs, each a test of a checker: the protocol code reads them where the bug goes.
struct Plants {
  bool no_idle_doorbell = false;  // drop the "resv_head == new" doorbell rule
  bool no_carry = false;          // drop the 0x10000 carry in poll_cq
  bool cons_store = false;        // poll_cq stores cons_idx instead of raising it (atomic max)
  bool cas_swapped = false;       // compare-swap WQEs carry compare and swap exchanged
  bool early_release = false;     // a fetching atomic frees its ibuf slot, then reads its result
  // (Here, in the padding before drop: DevState, in constant memory on the GPU, keeps its layout.)
  bool partial_landed = false;    // failover takes a transfer whose ring failed between its parts for landed: no replay
  uint32_t drop = 0;              // orderings dropped (ordering.h), host builds only
  bool replay_applied = false;    // failover replays an atomic or write the verdict says was applied
  bool no_replay = false;         // failover drops logged puts / gets of a failed QP
  bool signal_unordered = false;  // failover sends put-with-signal's signal on any path, not behind its data
  bool dev0_keys = false;         // every QP takes NIC 0's keys, whatever NIC it lives on
  bool amo_mask_inverted = false; // a masked compare-swap's swap mask inverted (swap, set, and, or)
  bool signal_first = false;      // put-with-signal posts its signal before its data
  bool p_short = false;           // p's inline header counts one byte less than the value has
  bool warp_get_shifted = false;  // a warp-scope get lands each piece 8 bytes past its place
  bool result_read_late = false;  // a fetching atomic frees its ibuf slot, then copies its result out (plain)
  bool signal_other_qp = false;   // put-with-signal posts its signal on the next QP, not its data's
  bool chunk_of_address = false;  // p / g / atomics find the rkey's chunk from the remote address, not the heap offset
  bool peer_unwrapped = false;    // p to the next PE computes it as my_pe + 1, without wrapping at npes
  bool ibuf_one_too_many = false; // a fetch takes its ibuf slot when nslots + 1 are out, not nslots
  bool quiet_without_cst = false; // quiet after non-blocking gets skips its CST, on a GPU that needs one
  bool fetch_without_cst = false; // a fetching atomic or blocking get skips its CST, on a GPU that needs one
  bool ibuf_release_unowned = false; // a fetch frees an ibuf slot by counting (atomic add), not its own slot in order
};

struct Options {
  uint32_t num_requests_in_batch = 32;  // power of two
  uint32_t num_default_rc_per_pe = 0;   // the DEFAULT pool's QPs per peer and NIC (0: all of them)
  bool may_skip_cst = true;             // GPU has PCIe write ordering (Hopper): no CST needed
  bool cpu_proxy = false;               // UAR not mappable: a CPU thread rings for the GPU
  // WQ rings and DBRs are in GPU memory: the NIC reads them through the GPU's L2, so a
  // GPU-scope fence orders them for it (NVSHMEM's nic_buf_on_gpumem); in host memory only
  // a system-scope fence does.
  bool nic_buf_on_gpumem = false;
  Plants plant;                         // planted bugs: tests of the checkers only
};

// A planted bug's switch, read where the bug goes: on a GPU build it compiles away.
DOORBELL_HD constexpr bool planted(bool on) {
#ifdef __CUDA_ARCH__
  return (void)on, false;
#else
  return on;
#endif
}

struct DevState {
  uint32_t my_pe = 0, npes = 0, num_rc_per_pe = 0;
  uint32_t num_devices = 1;             // NICs per PE: each peer has num_rc_per_pe QPs on each
  DevQp* qps = nullptr;                 // qps_per_set(), in `layout` order
  QpLayout layout = QpLayout::kQpMajor;
  // The QP pools' round-robin counters (seed 002's switch groups), kQpPools of them:
  // [kPoolDefault] over each peer's first num_default_rc_per_pe QPs (per NIC), [kPoolAny]
  // over all num_rc_per_pe (Options::num_default_rc_per_pe).
  uint64_t* group_switches = nullptr;
  Options opt;
  heap::KeyTables keys;
  // Failover (null: off): a backup QP per main QP (same layout), and each thread's log of
  // its non-blocking operations since its last quiet (failover.h), `log_threads` of them.
  DevQp* backups = nullptr;
  struct ReplayLog* logs = nullptr;
  uint32_t log_threads = 0;
  // DC: each PE's DCT on each NIC, [pe * num_devices + dev], as every PE gathered them.
  const DcTarget* dcts = nullptr;
  uint64_t* heap_bases = nullptr;       // per PE
  uint64_t* error = nullptr;            // first error CQE seen (error_word); a root cause replaces a flush
};

inline constexpr uint32_t kPoolDefault = 0, kPoolAny = 1, kQpPools = 2;

// Whether this PE fails over: backup QPs set (core/ibgda/failover.h).
DOORBELL_HD bool failover_on(const DevState& st) { return st.backups != nullptr; }

// A peer's QPs (over every NIC), and a PE's whole main (or backup) set.
DOORBELL_HD constexpr uint32_t rcs_per_peer(const DevState& st) { return st.num_rc_per_pe * st.num_devices; }
// PE pe's heap base. The CPU model checks pe (a PE past the job is a lookup fault, base 0);
// a GPU reads what lies there.
DOORBELL_HD uint64_t heap_base(const DevState& st, uint32_t pe) {
#ifndef __CUDA_ARCH__
  if (pe >= st.npes) {
    heap::note_lookup_fault({"heap bases: PE", pe, st.npes, 0, pe, 0});
    return 0;
  }
#endif
  return st.heap_bases[pe];
}
DOORBELL_HD constexpr uint32_t qps_per_set(const DevState& st) { return st.npes * rcs_per_peer(st); }

// The NIC whose keys a request on `qp` carries.
DOORBELL_HD constexpr uint32_t key_dev(const DevState& st, const DevQp& qp) { return planted(st.opt.plant.dev0_keys) ? 0 : qp.dev; }

// The error word a poller records: syndrome, QPN, a set flag and the CQE's wqe_counter.
DOORBELL_HD constexpr uint64_t error_word(uint8_t syndrome, uint32_t qpn, uint16_t wqe_counter) {
  return (uint64_t(syndrome) << 56) | (uint64_t(qpn & 0xffffff) << 32) | (uint64_t(1) << 31) | wqe_counter;
}
DOORBELL_HD constexpr uint8_t error_syndrome(uint64_t w) { return uint8_t(w >> 56); }
DOORBELL_HD constexpr uint32_t error_qpn(uint64_t w) { return uint32_t(w >> 32) & 0xffffff; }
DOORBELL_HD constexpr uint16_t error_wqe(uint64_t w) { return uint16_t(w); }

}  // namespace doorbell::ibgda
