#include "hw/gpu_sim/weak_memory.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "hw/mem/range.h"

namespace doorbell::gpu_sim {

namespace {
using mem::overlaps;
constexpr uintptr_t kWord = 8, kLine = 64;
constexpr size_t kMaxBuffered = 8;    // per thread; the oldest drains when full
constexpr size_t kTrackAll = 256;     // device writes up to this size start histories
constexpr size_t kNotes = 4;
const char* const kLevel[] = {"its thread only", "its CTA", "the GPU"};

uint64_t mix(uint64_t& s) {  // xorshift64*
  s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}
uint32_t scope_index(exec::Scope s) { return s == exec::Scope::kCta ? 0 : s == exec::Scope::kGpu ? 1 : 2; }
std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}
}  // namespace

const char* memory_model_name(MemoryModel m) { return m == MemoryModel::kWeak ? "weak" : "sc"; }

WeakMemory::WeakMemory(uint64_t seed) : rng_(seed * 0xD1B54A32D192ED03ull | 1) {
  // How eagerly buffers drain and how often loads go stale: drawn per run, so some seeds
  // keep stores buffered for long and others reorder in narrow windows.
  static constexpr uint32_t kDrain[] = {128, 32, 8};
  static constexpr uint32_t kStale[] = {128, 32};
  drain_per_256_ = kDrain[mix(rng_) % 3];
  stale_per_256_ = kStale[mix(rng_) % 2];
  refresh_per_256_ = 64;
  // Drawn from the seed apart from rng_, so runs without unordered landings draw as before.
  static constexpr uint32_t kShowLanded[] = {0, 64, 128};
  show_landed_per_256_ = kShowLanded[((seed * 0x9E3779B97F4A7C15ull) >> 32) % 3];
}

std::string WeakMemory::describe() const {
  std::string d = "drain=" + std::to_string(drain_per_256_) + "/256 stale=" + std::to_string(stale_per_256_) + "/256";
  if (unordered_) d += " landings=unordered (seen " + std::to_string(show_landed_per_256_) + "/256)";
  return d;
}

uint32_t WeakMemory::rand(uint32_t n) { return uint32_t(mix(rng_) >> 33) % n; }

uint32_t WeakMemory::add_thread(uint32_t cta, uint32_t gpu, std::string name) {
  threads_.push_back(Thread{cta, gpu, std::move(name)});
  catch_up(threads_.back());  // a thread starts with a view of everything visible at its launch
  if (cta_level_.size() <= cta) cta_level_.resize(cta + 1);
  if (gpu_level_.size() <= gpu) gpu_level_.resize(gpu + 1);
  return uint32_t(threads_.size() - 1);
}

bool WeakMemory::visible(const Entry& e, uint32_t t) const {
  if (e.thread == t) return true;
  if (e.level >= 2) return e.gpu == threads_[t].gpu;
  return e.level == 1 && threads_[t].cta == e.cta;
}

uint32_t WeakMemory::relation(uint32_t t, uint32_t writer) const {
  if (writer == kNoThread) return 1;
  if (threads_[writer].cta == threads_[t].cta) return 0;
  return threads_[writer].gpu == threads_[t].gpu ? 1 : 2;
}

// An acquire of scope index a (0 .cta, 1 .gpu, 2 .sys) synchronises with a writer at relation
// j <= a, taking what the value released to a reader at that relation.
void WeakMemory::took(uint32_t t, const Rel& r) {
  Thread& th = threads_[t];
  const uint32_t j = relation(t, r.thread);
  for (uint32_t a = 0; a < 3; ++a) {
    const uint64_t view = std::max(a >= j ? r.v[j] : 0, r.inherited);
    th.last[a] = std::max(th.last[a], view), th.pend[a] = std::max(th.pend[a], view);
  }
}

WeakMemory::Rel WeakMemory::own_rel(uint32_t t) const {
  const Thread& th = threads_[t];
  return Rel{{th.fv[0], th.fv[1], th.fv[2]}, t, 0};
}

WeakMemory::Rel WeakMemory::device_rel() const { return Rel{{clock_, clock_, clock_}, kNoThread, 0}; }


bool WeakMemory::line_busy(uintptr_t addr, size_t len) const {
  if (lines_.empty()) return false;
  for (uintptr_t l = addr / kLine; l <= (addr + len - 1) / kLine; ++l)
    if (lines_.count(l) != 0) return true;
  return false;
}

// Entries never cross a 64-byte line (store() splits them), so one line indexes each.
void WeakMemory::index(Slot s, bool add) {
  Entry& e = slab_[s];
  const uintptr_t l = e.addr / kLine;
  if (add) {
    lines_[l].push_back(s);
    threads_[e.thread].own.push_back(s);
    return;
  }
  auto it = lines_.find(l);
  std::erase(it->second, s);
  if (it->second.empty()) lines_.erase(it);
  std::erase(threads_[e.thread].own, s);
}

void WeakMemory::promote(Entry& e, uint8_t level) {
  e.level = level;
  e.vis = ++clock_;
  Promoted& q = level == 1 ? cta_level_[e.cta] : gpu_level_[e.gpu];
  // The queue keeps drained entries until they reach its front: prune it when it outgrows
  // what is still buffered (only here does it grow).
  if (q.size() > 2 * live_ + 64) std::erase_if(q, [this, level](const auto& p) { return !promoted(p, level); });
  q.push_back({Slot(&e - slab_.data()), e.seq});
}

bool WeakMemory::promoted(const std::pair<Slot, uint64_t>& q, uint8_t level) const {
  const Entry& e = slab_[q.first];
  return e.live && e.seq == q.second && e.level == level;
}

// The oldest promoted store still buffered at `level`, or null.
const std::pair<WeakMemory::Slot, uint64_t>* WeakMemory::first_promoted(Promoted& q, uint8_t level) {
  while (!q.empty() && !promoted(q.front(), level)) q.pop_front();
  return q.empty() ? nullptr : &q.front();
}

uint64_t WeakMemory::floor_of(const Thread& th, uintptr_t word) const {
  for (const auto& [w, v] : th.floor)
    if (w == word) return v;
  return 0;
}

void WeakMemory::raise_floor(Thread& th, uintptr_t word, uint64_t v) {
  if (v <= th.horizon) return;
  for (auto& [w, f] : th.floor)
    if (w == word) {
      f = std::max(f, v);
      return;
    }
  if (th.floor.size() == 64) {  // too many to track: synchronise instead (only fewer outcomes)
    catch_up(th);
    return;
  }
  th.floor.push_back({word, v});
}

// ---- memory's recent values ----

void WeakMemory::record(uintptr_t word, uint64_t visible_since, const Rel& rel) {
  History& h = hist_[word];
  uint64_t cur;
  std::memcpy(&cur, reinterpret_cast<const void*>(word), kWord);
  for (uint32_t i = std::min<uint32_t>(h.n, 2); i > 0; --i) h.old[i] = h.old[i - 1];
  h.old[0] = {h.start, cur, h.rel};
  h.n = std::min<uint32_t>(h.n + 1, 3);
  h.rel = rel;
  h.landed = nullptr;
  // A store other threads could already see (promoted by a fence) counts from then: a
  // reader that synchronised after that point must not miss it once it drains. (Starts need
  // not grow along the history; view_word scans it from the newest.)
  ++clock_;
  h.start = visible_since != 0 ? visible_since : clock_;
  last_write_ = clock_;
}

// Words a write of [a, a + len) gets a new version for: the ones it covers whole, and partly
// covered ones already tracked (a word is first tracked by a write that covers it whole, so
// reading all 8 of its bytes never leaves the object it belongs to).
bool WeakMemory::trackable(uintptr_t w, uintptr_t a, size_t len) const {
  return (w >= a && w + kWord <= a + len) || hist_.count(w) != 0;
}

void WeakMemory::device_write(const void* addr, size_t len, const char*, uint64_t) {
  if (len == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const bool all = len <= kTrackAll;  // bulk payloads: only words GPU threads already track
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord)
    if (all ? trackable(w, a, len) : hist_.count(w) != 0) record(w, 0, device_rel());
}

void WeakMemory::landing(const void* addr, size_t len, const char* what, uint64_t index, uint32_t by) {
  if (!unordered_) return device_write(addr, len, what, index);
  if (len == 0) return;
  constexpr size_t kTrackLanding = 4096;  // the first bytes of a larger landing only
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord)
    if (w - a < kTrackLanding ? trackable(w, a, len) : hist_.count(w) != 0) {
      record(w, 0, device_rel());
      History& h = hist_[w];
      h.landed = what;
      h.landed_index = index;
      h.landed_by = by;
      landed_.push_back(w);
    }
}

void WeakMemory::flush_landings(uint32_t by) {
  std::erase_if(landed_, [&](uintptr_t w) {
    auto h = hist_.find(w);
    if (h == hist_.end() || h->second.landed == nullptr) return true;
    if (by != kNoThread && h->second.landed_by != by) return false;
    h->second.landed = nullptr;
    return true;
  });
}

void WeakMemory::device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || lines_.empty()) return;
  for (uintptr_t l = a / kLine; l <= (a + len - 1) / kLine; ++l) {
    auto li = lines_.find(l);
    if (li == lines_.end()) continue;
    const Entry* hit = nullptr;
    for (Slot q : li->second)
      if (overlaps(slab_[q].addr, slab_[q].len, a, len)) {
        hit = &slab_[q];
        break;
      }
    if (hit == nullptr) continue;
    const Entry& e = *hit;
    ++device_stale_;
    // The first note of each kind: a stale WQE is not hidden behind many benign DBR reads.
    for (DeviceNote& n : device_notes_)
      if (std::strcmp(n.what, what) == 0) {
        ++n.count;
        return;
      }
    if (device_notes_.size() == kNotes) return;
    std::ostringstream os;
    const uintptr_t lo = std::max(a, e.addr), hi = std::min(a + len, e.addr + e.len);
    os << who << " read " << what << " " << index << " at " << name_of(addr) << " while " << threads_[e.thread].name
       << "'s store to its bytes " << (lo - a) << ".." << (hi - a - 1) << " was still buffered, visible to " << kLevel[e.level]
       << ": the device used an older value";
    device_notes_.push_back({what, os.str(), 1});
    return;
  }
}

// ---- store buffers ----

void WeakMemory::store(uint32_t t, void* addr, const void* src, size_t len) {
  auto a = reinterpret_cast<uintptr_t>(addr);
  const auto* b = static_cast<const uint8_t*>(src);
  while (len != 0) {
    const uint32_t n = uint32_t(std::min<size_t>(len, kLine - (a % kLine)));
    Slot s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = Slot(slab_.size());
      slab_.emplace_back();
    }
    Entry& e = slab_[s];
    e.live = true;
    e.seq = ++seq_;
    e.vis = 0;
    e.addr = a;
    e.len = n;
    e.thread = t;
    e.cta = threads_[t].cta;
    e.gpu = threads_[t].gpu;
    e.level = 0;
    e.rel = own_rel(t);
    std::memcpy(e.bytes, b, n);
    ++live_;
    index(s, true);
    if (threads_[t].own.size() > kMaxBuffered) drain(threads_[t].own.front());
    a += n, b += n, len -= n;
  }
  // The store buffer drains as the thread runs: now and then one of its older stores lands.
  if (threads_[t].own.size() > 1 && rand(256) < drain_per_256_) drain_random_own(t);
}

void WeakMemory::drain_random_own(uint32_t t) {
  const std::vector<Slot>& own = threads_[t].own;
  if (!own.empty()) drain(own[rand(uint32_t(own.size()))]);
}

// Drain store `s` to memory, after every older store to any of its bytes, whoever made it:
// per address, stores land in store order, the order loads list them in.
void WeakMemory::drain(Slot s) {
  if (!slab_[s].live) return;
  for (;;) {
    const Entry& e = slab_[s];
    Slot older = s;
    for (Slot o : lines_.at(e.addr / kLine)) {
      if (slab_[o].seq >= e.seq) break;
      if (overlaps(slab_[o].addr, slab_[o].len, e.addr, e.len)) {
        older = o;
        break;
      }
    }
    if (older == s) break;
    drain(older);
  }
  index(s, false);
  Entry& e = slab_[s];
  e.live = false;
  free_.push_back(s);
  --live_;
  Thread& owner = threads_[e.thread];
  for (uintptr_t w = e.addr & ~(kWord - 1); w < e.addr + e.len; w += kWord)
    if (trackable(w, e.addr, e.len)) {
      record(w, e.level != 0 ? e.vis : 0, e.rel);
      raise_floor(owner, w, hist_[w].start);  // the writer never reads below its own store
    }
  std::memcpy(reinterpret_cast<void*>(e.addr), e.bytes, e.len);
}

bool WeakMemory::drain_thread(uint32_t t) {
  if (threads_[t].own.empty()) return false;
  while (!threads_[t].own.empty()) drain(threads_[t].own.front());
  return true;
}

void WeakMemory::catch_up(Thread& th) {
  th.horizon = clock_;
  th.floor.clear();
}

void WeakMemory::advance(Thread& th, uint64_t view) {
  if (view <= th.horizon) return;
  th.horizon = view;
  std::erase_if(th.floor, [view](const auto& f) { return f.second <= view; });
}

// Stores a fence of scope s by t must carry: t's own, and (cumulativity) what t's CTA or GPU
// could already see.
bool WeakMemory::covered(const Entry& e, uint32_t t, exec::Scope s) const {
  const uint8_t to = s == exec::Scope::kCta ? 1 : s == exec::Scope::kGpu ? 2 : 3;
  if (e.level >= to) return false;
  return e.thread == t || (to >= 2 && e.level == 1 && e.cta == threads_[t].cta) || (to == 3 && e.level == 2 && e.gpu == threads_[t].gpu);
}

bool WeakMemory::fence_step(uint32_t t, exec::Scope s, uint64_t upto) {
  const Thread& th = threads_[t];
  // The thread's own stores the fence carries land in an order drawn from the seed; what it
  // carries by cumulativity (already visible to its CTA or the GPU) lands oldest first.
  Slot own[kMaxBuffered + 1];
  uint32_t n = 0;
  for (Slot q : th.own)
    if (covered(slab_[q], t, s)) own[n++] = q;
  // Oldest first, so what a fence carries by cumulativity is bounded by the stores made
  // before it began (upto): others fencing meanwhile cannot keep it going.
  const std::pair<Slot, uint64_t>* cum = s != exec::Scope::kCta ? first_promoted(cta_level_[th.cta], 1) : nullptr;
  if (s == exec::Scope::kSystem)
    if (const auto* g = first_promoted(gpu_level_[th.gpu], 2); g != nullptr && (cum == nullptr || g->second < cum->second)) cum = g;
  if (cum != nullptr && cum->second > upto) cum = nullptr;
  if (n == 0 && cum == nullptr) return false;
  const Slot q = n != 0 && (cum == nullptr || rand(2) == 0) ? own[rand(n)] : cum->first;
  if (s == exec::Scope::kSystem || (s == exec::Scope::kGpu && gpu_reaches_devices_)) drain(q);
  else promote(slab_[q], s == exec::Scope::kCta ? 1 : 2);
  return true;
}

void WeakMemory::fence(uint32_t t, exec::Scope s) {
  const uint64_t upto = seq_;
  while (fence_step(t, s, upto)) {
  }
  fenced(t, s);
}

// Fences are fence.sc: those whose scopes include each other's threads are totally ordered,
// and the later one sees what the earlier one made visible (SB+fences is forbidden). So a fence
// also acquires up to the last fence of its CTA (any scope), of its GPU (.gpu or wider, when it
// is .gpu or wider) and of the system (.sys, when it is .sys).
void WeakMemory::fenced(uint32_t t, exec::Scope s) {
  Thread& th = threads_[t];
  const uint32_t a = scope_index(s);
  if (sc_cta_.size() <= th.cta) sc_cta_.resize(th.cta + 1, 0);
  if (sc_gpu_.size() <= th.gpu) sc_gpu_.resize(th.gpu + 1, 0);
  uint64_t view = std::max(th.pend[a], sc_cta_[th.cta]);
  if (a >= 1) view = std::max(view, sc_gpu_[th.gpu]);
  if (a == 2) view = std::max(view, sc_sys_);
  advance(th, view);
  for (uint32_t j = 0; j <= a; ++j) th.fv[j] = clock_;  // what its later stores release, per reach
  sc_cta_[th.cta] = clock_;
  if (a >= 1) sc_gpu_[th.gpu] = clock_;
  if (a == 2) sc_sys_ = clock_;
}

void WeakMemory::acquired(uint32_t t, exec::Scope s) {
  Thread& th = threads_[t];
  advance(th, th.last[scope_index(s)]);
}

void WeakMemory::synced(uint32_t t) { catch_up(threads_[t]); }

void WeakMemory::rmw_begin(uint32_t t, void* addr, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t l = a / kLine; l <= (a + len - 1) / kLine; ++l) {
    auto li = lines_.find(l);
    if (li == lines_.end()) continue;
    const std::vector<Slot> slots = li->second;
    for (Slot q : slots)
      if (slab_[q].live && overlaps(slab_[q].addr, slab_[q].len, a, len) && visible(slab_[q], t)) drain(q);
  }
}

void WeakMemory::rmw(uint32_t t, void* addr, size_t len, bool writes) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord) {
    auto h = hist_.find(w);
    if (h != hist_.end()) took(t, h->second.rel);  // it read the newest value: a fence after it acquires
    if (writes) {
      // A release sequence goes on through the atomic. The replaced value's views are by reach
      // from its writer, not from t: its widest one (v[0], its writer's last fence of any
      // scope) is handed on to every acquire of any scope, which over-synchronises (a
      // too-narrow release passed on by another's atomic is not found) but never loses it.
      Rel r = own_rel(t);
      if (h != hist_.end()) r.inherited = std::max(h->second.rel.inherited, h->second.rel.v[0]);
      record(w, 0, r);
      h = hist_.find(w);
    }
    raise_floor(threads_[t], w, h != hist_.end() ? h->second.start : 0);
  }
}

bool WeakMemory::store_changes(const void* addr, const void* src, size_t len) const {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  return line_busy(a, len) || std::memcmp(addr, src, len) != 0;
}

// ---- loads ----

// The 8 bytes at `word` as thread t may see them. Candidates in coherence order: memory's
// recent values, then buffered stores visible to t (its own included). t may read any of
// them not superseded before its view (its last acquire or fence) and not older than what it
// read or stored before.
uint64_t WeakMemory::view_word(uint32_t t, uintptr_t word, uintptr_t lo, uintptr_t hi) {
  // Memory is read only in [lo, hi), the bytes the load wants: the rest of the word may lie
  // outside the object (a tracked word's history holds whole words, read when it was safe).
  auto h = hist_.find(word);
  uint64_t cur = 0;
  if (h != hist_.end()) std::memcpy(&cur, reinterpret_cast<const void*>(word), kWord);
  else std::memcpy(reinterpret_cast<uint8_t*>(&cur) + (lo - word), reinterpret_cast<const void*>(lo), hi - lo);
  auto li = lines_.empty() ? lines_.end() : lines_.find(word / kLine);
  if (h == hist_.end() && li == lines_.end()) return cur;  // nothing to choose from: memory
  Thread& th = threads_[t];
  struct Cand {
    uint64_t start, value;
    Rel rel;
  };
  constexpr uint32_t kMax = 16;
  Cand c[kMax];
  uint32_t n = 0, own = 0;  // own: the first candidate at or after t's newest own store
  if (h != hist_.end()) {
    for (uint32_t i = h->second.n; i > 0; --i) c[n++] = {h->second.old[i - 1].start, h->second.old[i - 1].value, h->second.old[i - 1].rel};
    c[n++] = {h->second.start, cur, h->second.rel};
  } else {
    c[n++] = {0, cur, Rel{}};
  }
  // Unordered landings: memory's value, landed by a NIC and not yet flushed, may stay unseen
  // (coherence aside: a thread that saw it keeps seeing it).
  const uint32_t mem = n - 1;
  const bool hide = h != hist_.end() && h->second.landed != nullptr && h->second.n != 0 &&
                    floor_of(th, word) < h->second.start && rand(256) >= show_landed_per_256_;
  if (li != lines_.end())
    for (Slot q : li->second) {
      const Entry& e = slab_[q];
      if (!overlaps(e.addr, e.len, word, kWord)) continue;
      if (!visible(e, t)) {
        if (e.level == 2) {  // fenced at .gpu, read from another GPU
          ++scope_missed_;
          if (scope_notes_.size() < kNotes) scope_notes_.push_back({t, e.thread, word});
        }
        continue;
      }
      uint64_t v = c[n - 1].value;
      const uintptr_t lo = std::max(e.addr, word), hi = std::min(e.addr + e.len, word + kWord);
      std::memcpy(reinterpret_cast<uint8_t*>(&v) + (lo - word), e.bytes + (lo - e.addr), hi - lo);
      if (n == kMax) {  // too many: the oldest candidate goes (one stale choice fewer)
        for (uint32_t i = 0; i + 1 < kMax; ++i) c[i] = c[i + 1];
        --n;
        own = own > 0 ? own - 1 : 0;
      }
      c[n++] = {e.thread == t ? 0 : e.vis, v, e.rel};
      if (e.thread == t) own = n - 1;
    }
  if (hide && n - 1 == mem) {
    ++landed_hidden_;
    if (landed_notes_.size() < kNotes) landed_notes_.push_back({t, word, c[mem - 1].value, c[mem].value, h->second.landed, h->second.landed_index});
    raise_floor(th, word, c[mem - 1].start);
    took(t, c[mem - 1].rel);
    return c[mem - 1].value;
  }
  uint32_t pick = n - 1;
  if (n - own > 1 && rand(256) < stale_per_256_) {
    const uint64_t bound = std::max(th.horizon, floor_of(th, word));
    uint32_t first = n - 1;  // the oldest candidate still readable: superseded after `bound`
    while (first > own && c[first].start > bound) --first;
    pick = first + rand(n - first);
  }
  if (pick != n - 1) {
    ++thread_stale_;
    if (thread_notes_.size() == kNotes) thread_notes_.erase(thread_notes_.begin());
    thread_notes_.push_back({t, word, c[pick].value, c[n - 1].value, nullptr, 0});
  }
  // A landing a load has seen is in the GPU's L2: visible from then on, to every thread
  // (else a later load could be hidden back to the older value).
  if (pick == mem && h != hist_.end() && h->second.landed != nullptr) h->second.landed = nullptr;
  raise_floor(th, word, c[pick].start);
  took(t, c[pick].rel);
  return c[pick].value;
}

void WeakMemory::load(uint32_t t, const void* addr, void* dst, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::fill(std::begin(threads_[t].last), std::end(threads_[t].last), 0);
  auto* d = static_cast<uint8_t*>(dst);
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord) {
    const uintptr_t lo = std::max(a, w), hi = std::min(a + len, w + kWord);
    const uint64_t v = view_word(t, w, lo, hi);
    std::memcpy(d + (lo - a), reinterpret_cast<const uint8_t*>(&v) + (lo - w), hi - lo);
  }
}

// ---- scheduling ----

bool WeakMemory::step() {
  if (live_ == 0 || rand(256) >= drain_per_256_) return false;
  // Some thread's buffer drains one store (a few tries to find a thread with any).
  for (int tries = 0; tries < 4; ++tries) {
    const uint32_t t = rand(uint32_t(threads_.size()));
    if (!threads_[t].own.empty()) {
      drain_random_own(t);
      return true;
    }
  }
  for (Slot s = 0; s < slab_.size(); ++s)
    if (slab_[s].live) {
      drain(s);
      break;
    }
  return true;
}

void WeakMemory::polled(uint32_t t) {
  if (rand(256) >= refresh_per_256_) return;
  catch_up(threads_[t]);
  flush_landings(kNoThread);  // landed data too becomes visible in the end
}

bool WeakMemory::settle() {
  bool changed = live_ != 0 || !landed_.empty();
  flush_landings(kNoThread);
  for (uint32_t t = 0; t < threads_.size(); ++t) (void)drain_thread(t);
  for (Thread& th : threads_) {
    changed |= th.horizon < last_write_;  // it may still read a value written over since
    catch_up(th);
  }
  return changed;
}

// ---- reports ----

std::string WeakMemory::name_of(const void* addr) const {
  if (namer_) return namer_(addr);
  return hex(reinterpret_cast<uintptr_t>(addr));
}

std::string WeakMemory::report() const {
  if (device_stale_ == 0 && thread_stale_ == 0 && landed_hidden_ == 0 && scope_missed_ == 0) return {};
  std::ostringstream os;
  os << "weak memory (" << describe() << "): " << device_stale_ << " device reads missed buffered stores, "
     << thread_stale_ << " thread loads read superseded values";
  if (landed_hidden_ != 0) os << ", " << landed_hidden_ << " thread loads missed data a NIC landed that no CST had flushed";
  if (scope_missed_ != 0) os << ", " << scope_missed_ << " thread loads missed stores another GPU fenced at .gpu";
  os << "\n";
  for (const DeviceNote& n : device_notes_)
    os << "  stale: " << n.text << (n.count > 1 ? " (and " + std::to_string(n.count - 1) + " more such reads)" : "") << "\n";
  for (const ScopeNote& n : scope_notes_) {
    const Thread& r = threads_[n.thread];
    const Thread& w = threads_[n.writer];
    os << "  missed store: " << r.name << " (GPU " << r.gpu << ") read " << name_of(reinterpret_cast<const void*>(n.word)) << " while "
       << w.name << "'s store to it was visible on GPU " << w.gpu
       << " only (fenced at .gpu, which reaches that GPU's threads, not another's)\n";
  }
  for (const StaleLoad& s : landed_notes_)
    os << "  stale load: " << threads_[s.thread].name << " read " << name_of(reinterpret_cast<const void*>(s.word)) << " = " << hex(s.got)
       << ", not " << hex(s.newest) << " that the NIC's " << s.landed << " " << s.landed_index
       << " landed: GPUDirect RDMA writes are unordered on this GPU and no CST flushed them before the load\n";
  for (const StaleLoad& s : thread_notes_)
    os << "  stale load: " << threads_[s.thread].name << " read " << name_of(reinterpret_cast<const void*>(s.word)) << " = "
       << hex(s.got) << ", a value superseded by " << hex(s.newest) << " after its last acquire or fence\n";
  return os.str();
}

}  // namespace doorbell::gpu_sim
