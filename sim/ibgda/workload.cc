// The workload runner's set-up and checks (untraced in fuzz builds); the threads' body, where
// the protocol runs, is workload_launch.cc.
#include "sim/ibgda/workload.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

namespace doorbell::ibgda {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Where the send buffers' bytes start in source_byte's index space (after the sources').
constexpr uint64_t kMsgBytes = uint64_t(1) << 44;

}  // namespace

bool runs_op(const Op& o, uint64_t t, const gpu_sim::LaunchConfig& shape) {
  const uint32_t lane = uint32_t(t % shape.lanes), warp = uint32_t(t / shape.lanes % shape.warps_per_cta);
  return (o.warp < 0 || uint32_t(o.warp) == warp) && (o.lane < 0 || uint32_t(o.lane) == lane);
}

bool owns_slot(const Op& o, uint64_t t, const gpu_sim::LaunchConfig& shape) {
  const uint32_t lane = uint32_t(t % shape.lanes), warp = uint32_t(t / shape.lanes % shape.warps_per_cta);
  if (!runs_op(o, t, shape)) return false;
  return o.scope == Scope::kThread || (lane == 0 && (o.scope == Scope::kWarp || warp == 0));
}

// Distinct bytes per PE and offset (a copy from the wrong place or PE differs): the draw
// for bytes [8k, 8k + 8) of PE pe's index space.
uint64_t WorkloadRun::source_word(uint32_t pe, uint64_t k) const { return splitmix64(w_.seed ^ (uint64_t(pe) << 48) ^ k); }
uint8_t WorkloadRun::source_byte(uint32_t pe, uint64_t i) const { return uint8_t(source_word(pe, i >> 3) >> (8 * (i & 7))); }

namespace {

// The byte ranges [lo, hi) of a source region that some operation reads, merged in place,
// each widened to whole 8-byte words (and clipped to the region's `n` bytes).
void merge_read_ranges(std::vector<std::pair<uint64_t, uint64_t>>& r, uint64_t n) {
  for (auto& [lo, hi] : r) lo = std::min(lo / 8 * 8, n), hi = std::min((hi + 7) / 8 * 8, n);
  std::sort(r.begin(), r.end());
  size_t out = 0;
  for (const auto& [lo, hi] : r)
    if (lo < hi) {
      if (out != 0 && lo <= r[out - 1].second) r[out - 1].second = std::max(r[out - 1].second, hi);
      else r[out++] = {lo, hi};
    }
  r.resize(out);
}

}  // namespace

// Only the bytes operations read: a short program reads a few hundred bytes of its 16 KiB
// region per PE, and drawing all of them was a tenth of a fuzz input's run.
void WorkloadRun::fill_sources() {
  const uint32_t npes = world_.config().npes;
  std::vector<std::pair<uint64_t, uint64_t>> src_ranges, msg_ranges;
  src_ranges.reserve(w_.ops.size());
  for (const Op& o : w_.ops) src_ranges.emplace_back(o.src, o.src + o.bytes);
  if (w_.msgs != nullptr)
    for (const auto& per : *w_.msgs)
      for (const Msg& m : per) msg_ranges.emplace_back(m.src, m.src + m.len);
  merge_read_ranges(src_ranges, w_.src_bytes);
  merge_read_ranges(msg_ranges, w_.msg_send_bytes);
  static_assert(std::endian::native == std::endian::little);
  for (uint32_t pe = 0; pe < npes; ++pe) {
    if (!world_.local(pe)) continue;  // another process fills its own
    for (const auto& [at, ranges, base] : {std::tuple{w_.src, &src_ranges, uint64_t(0)}, std::tuple{w_.msg_send, &msg_ranges, kMsgBytes}}) {
      uint8_t* p = world_.at(pe, at);
      // source_byte's bytes (base and lo are multiples of 8): each word stored as the
      // little-endian word source_byte reads back, the region's last one cut at its end.
      for (const auto& [lo, hi] : *ranges)
        for (uint64_t i = lo; i < hi; i += 8) {
          const uint64_t r = source_word(pe, (base + i) >> 3);
          if (hi - i >= 8) std::memcpy(p + i, &r, 8);  // a constant size: one store
          else std::memcpy(p + i, &r, hi - i);
        }
    }
  }
}

sim::Verdict WorkloadRun::classify(gpu_sim::Scheduler& s, const gpu_sim::RunResult& r, bool failover) const {
  using sim::RunKind;
  // A lookup outside the key tables or the heap bases: the root cause of what followed.
  if (std::string f = heap::take_lookup_fault(); !f.empty()) return {RunKind::kBrokenInvariant, f};
  if (!r.races.empty()) {
    sim::Verdict v{RunKind::kCompleted, {}};
    sim::take_races(r, &v.kind, &v.detail);
    return v;
  }
  std::string bad = s.violation();
  if (bad.empty() && r.outcome == gpu_sim::Outcome::kCompleted) bad = world_.check_invariants();  // once more at the end
  if (!bad.empty()) return {RunKind::kBrokenInvariant, bad};  // the root cause of any hang that follows
  if (r.outcome != gpu_sim::Outcome::kCompleted) return {RunKind::kHang, r.report};
  // With failover, errors recovery saved are no failure; an operation that failed is.
  if (std::string e = world_.first_error(); (!failover && !e.empty()) || failed_ops_ != 0)
    return {RunKind::kError, (failed_ops_ != 0 ? std::to_string(failed_ops_) + " thread(s) saw an operation fail; " : std::string()) + e};
  return {RunKind::kCompleted, {}};
}

// The first of `n` bytes at `got` that differs from PE pe's source bytes from `at` (n when
// none does): a word of the draw per 8 bytes, not one per byte.
uint64_t WorkloadRun::first_difference(const uint8_t* got, uint32_t pe, uint64_t at, uint64_t n) const {
  for (uint64_t i = 0; i < n;) {
    const uint64_t k = (at + i) >> 3, word = source_word(pe, k);
    if (((at + i) & 7) == 0 && n - i >= 8) {  // a whole word: one compare (little-endian, as fill_sources stores it)
      uint64_t have;
      std::memcpy(&have, got + i, 8);
      if (have == word) {
        i += 8;
        continue;
      }
    }
    for (uint64_t b = (at + i) & 7; b < 8 && i < n; ++b, ++i)
      if (got[i] != uint8_t(word >> (8 * b))) return i;
  }
  return n;
}

std::string WorkloadRun::check_bytes() const {
  if (w_.msgs != nullptr)
    for (const auto& per : *w_.msgs)
      for (const Msg& m : per) {
        if (!world_.local(m.to)) continue;  // another process checks its own memory
        if (const uint64_t b = first_difference(world_.at(m.to, w_.msg_recv + m.dst), m.from, kMsgBytes + m.src, m.len); b != m.len)
          return "generated message to pe " + std::to_string(m.to) + ": byte " + std::to_string(b) + " differs";
      }
  const uint32_t npes = world_.config().npes;
  for (uint32_t pe = 0; pe < npes; ++pe)
    for (uint64_t t = 0; t < w_.threads(); ++t)
      for (size_t j = 0; j < w_.ops.size(); ++j) {
        const Op& o = w_.ops[j];
        const bool put = is_put_like(o.kind);
        if (o.pe != pe || (!put && !is_get_like(o.kind)) || !owns_slot(o, t, w_.shape)) continue;
        if (!world_.local(put ? o.target : pe)) continue;  // another process checks its own memory
        const auto what = [&] { return "op " + std::to_string(j) + " of pe " + std::to_string(pe) + " thread " + std::to_string(t); };
        const uint8_t* got = world_.at(put ? o.target : pe, w_.slot_at(t, j));
        if (const uint64_t i = first_difference(got, put ? pe : o.target, o.src, o.bytes); i != o.bytes)
          return what() + ": byte " + std::to_string(i) + " differs";
        if (o.kind == OpKind::kPutSignal) {
          const uint64_t sig = *reinterpret_cast<const uint64_t*>(world_.at(o.target, w_.sig_at(t, j)));
          if (const uint64_t want = o.signal_add ? o.value * o.count : o.value; sig != want)
            return what() + ": its signal word holds " + std::to_string(sig) + ", not " + std::to_string(want);
        }
      }
  if (!read_back_.empty()) return read_back_;
  return {};
}

std::string WorkloadRun::check_atomics() const {
  const std::string bad = atomics_.check([&](uint32_t pe, uint32_t w) -> std::optional<uint64_t> {
    if (!world_.local(pe)) return std::nullopt;  // checked in its own process
    return *reinterpret_cast<const uint64_t*>(world_.at(pe, w_.words + w * 8));
  });
  return bad.empty() ? bad : "atomics: " + bad;
}

Status WorkloadRun::gather_atomics() {
  bootstrap::Bootstrap* boot = world_.config().procs.boot;
  if (boot == nullptr) return {};
  Result<std::vector<std::vector<uint8_t>>> all = bootstrap::allgatherv(*boot, atomics_.encode());
  if (!all) return all.status();
  for (uint32_t r = 0; r < all->size(); ++r)
    if (r != boot->rank() && !atomics_.merge((*all)[r])) return Status(Errc::kBadParam, "atomics from process " + std::to_string(r) + ": not whole records");
  return {};
}

std::string run_workload(ModelWorld& world, const Workload& w, gpu_sim::SchedOptions so, bool each_step) {
  WorkloadRun run(world, w);
  if (!world.config().heap.phantom) run.fill_sources();
  std::string violation;
  if (each_step) {
    so.observe = [&](uint64_t, double) {
      if (violation.empty()) violation = world.check_invariants();
    };
    so.observe_every = 1;
  }
  gpu_sim::Scheduler s(so);
  run.launch(s);
  world.attach(s);
  if (!each_step) world.check_every_store(s);
  const gpu_sim::RunResult r = s.run();
  // One PE per process: answer the others until all have run, then take the atomics they
  // sent this PE (every process does both, whatever its own verdict).
  for (const Status& st : {world.finish_run(), run.gather_atomics()})
    if (!st) return "processes: " + st.to_string();
  if (!violation.empty()) return "broken-invariant: " + violation + "\n" + s.memory_report();
  const sim::Verdict v = run.classify(s, r, world.config().failover);
  if (v.kind == sim::RunKind::kHang) return "hang (" + s.describe() + "):\n" + v.detail;
  // What broke, and what the weak memory model saw read stale (nothing in the SC mode).
  if (v.kind != sim::RunKind::kCompleted) return sim::run_kind_name(v.kind) + std::string(": ") + v.detail + "\n" + s.memory_report();
  for (const std::string& bad : {run.check_bytes(), run.check_atomics()})
    if (!bad.empty()) return "wrong-data: " + bad + "\n" + s.memory_report();
  return {};
}

}  // namespace doorbell::ibgda
