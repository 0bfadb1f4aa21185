#include "hw/gpu_sim/race_detector.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace doorbell::gpu_sim {

namespace {
constexpr uintptr_t kWord = 8;
constexpr size_t kKeptReleases = 16;
uintptr_t word_of(const void* p) { return reinterpret_cast<uintptr_t>(p) & ~(kWord - 1); }
}  // namespace

void RaceDetector::Clock::join(const Clock& o) {
  if (o.c.size() > c.size()) c.resize(o.c.size(), 0);
  for (size_t i = 0; i < o.c.size(); ++i) c[i] = std::max(c[i], o.c[i]);
}

void RaceDetector::Clock::raise(Tid t, uint32_t v) {
  if (c.size() <= t) c.resize(t + 1, 0);
  c[t] = std::max(c[t], v);
}

RaceDetector::Tid RaceDetector::add_thread(std::string name, Tid parent) {
  const Tid t = Tid(threads_.size());
  threads_.emplace_back();
  Thread& th = threads_.back();
  th.name = std::move(name);
  if (parent != kNoThread) {
    th.clock = threads_[parent].clock;  // ordered after what the parent did so far...
    th.dep = threads_[parent].dep;
    tick(parent, 0);                    // ...and not before what it does next
  }
  th.clock.raise(t, 1);
  th.dep.raise(t, 1);
  return t;
}

void RaceDetector::tick(Tid t, uintptr_t word) {
  Thread& th = threads_[t];
  if (th.releases.size() == kKeptReleases) th.releases.erase(th.releases.begin());
  th.releases.push_back({th.clock.c[t], word, false});
  ++th.clock.c[t];
  th.dep.c[t] = th.clock.c[t];
}

namespace {
template <class S, size_t N>
bool seen_in(const S (&seen)[N], uintptr_t word, uint32_t version) {
  for (const S& s : seen)
    if (s.word == word && s.version == version) return true;
  return false;
}
}  // namespace

void RaceDetector::acquire_load(Tid t, const void* addr) {
  auto it = sync_.find(word_of(addr));
  if (it == sync_.end()) return;
  Thread& th = threads_[t];
  if (!it->second.sync.c.empty()) th.acquired = it->first;
  if (seen_in(th.took, it->first, it->second.version)) return;
  th.took[th.took_next++ % kSeen] = {it->first, it->second.version};
  th.clock.join(it->second.sync);
  th.dep.join(it->second.sync);
  th.dep.join(it->second.dep);
}

void RaceDetector::relaxed_load(Tid t, const void* addr) {
  auto it = sync_.find(word_of(addr));
  if (it == sync_.end()) return;
  Thread& th = threads_[t];
  if (seen_in(th.took, it->first, it->second.version) || seen_in(th.pended, it->first, it->second.version)) return;
  th.pended[th.pended_next++ % kSeen] = {it->first, it->second.version};
  if (!it->second.sync.c.empty()) {
    th.pending.join(it->second.sync);
    th.has_pending = true;
  }
  th.dep.join(it->second.dep);
}

void RaceDetector::publish(Tid t, uintptr_t word, bool release) {
  Thread& th = threads_[t];
  Word& w = sync_[word];
  ++w.version;
  if (release) w.sync.join(th.clock);
  else if (!th.fenced.c.empty()) w.sync.join(th.fenced);
  // What follows the store through dep: the thread's chains so far, and of its own accesses
  // those its last release covers (a release store covers itself).
  const uint32_t own = th.dep.c[t];
  th.dep.c[t] = release ? own : th.fenced.at(t);
  w.dep.join(th.dep);
  th.dep.c[t] = own;
}

void RaceDetector::release_store(Tid t, const void* addr) {
  publish(t, word_of(addr), true);
  tick(t, word_of(addr));
}

void RaceDetector::relaxed_store(Tid t, const void* addr) {
  publish(t, word_of(addr), false);
  Thread& th = threads_[t];
  if (th.fenced.c.empty()) return;
  if (th.releases.size() == kKeptReleases) th.releases.erase(th.releases.begin());
  th.releases.push_back({th.fenced.at(t), word_of(addr), true});
}

void RaceDetector::rmw(Tid t, const void* addr) {
  relaxed_load(t, addr);
  relaxed_store(t, addr);
}

void RaceDetector::fence(Tid t) {
  Thread& th = threads_[t];
  if (th.has_pending) {
    th.clock.join(th.pending);
    th.dep.join(th.pending);
    std::fill(th.pending.c.begin(), th.pending.c.end(), 0);
    th.has_pending = false;
  }
  for (Seen& s : th.pended) s = {};  // pending is empty again
  th.fenced = th.clock;
  tick(t, 0);
}

void RaceDetector::barrier(std::span<const Tid> threads, bool dep_only) {
  Clock all, dep;
  uintptr_t acquired = 0;  // for reports: what one of them took, the others now hold too
  for (Tid t : threads) {
    if (!dep_only) all.join(threads_[t].clock);
    dep.join(threads_[t].dep);
    if (threads_[t].acquired != 0) acquired = threads_[t].acquired;
  }
  for (Tid t : threads) {
    if (!dep_only && acquired != 0) threads_[t].acquired = acquired;
    if (!dep_only) threads_[t].clock.join(all);
    threads_[t].dep.join(dep);
    tick(t, 0);  // what it does next is after the barrier
  }
}

void RaceDetector::release_to(Tid t, const void* key, uint64_t sub) {
  keys_[{key, sub}].join(threads_[t].clock);
  tick(t, 0);
}

void RaceDetector::acquire_from(Tid t, const void* key, uint64_t sub) {
  auto it = keys_.find({key, sub});
  if (it == keys_.end()) return;
  threads_[t].clock.join(it->second);
  threads_[t].dep.join(it->second);
}

void RaceDetector::acquire_thread(Tid t, Tid u) {
  threads_[t].clock.join(threads_[u].clock);
  threads_[t].dep.join(threads_[u].dep);
}

uint32_t RaceDetector::label_id(const char* label) {
  auto [it, fresh] = label_ids_.try_emplace(label, uint32_t(labels_.size()));
  if (fresh) labels_.push_back(label);
  return it->second;
}

const char* RaceDetector::site(const char* file, uint32_t line) {
  const uint64_t key = reinterpret_cast<uintptr_t>(file) * 0x9e3779b97f4a7c15ull ^ line;
  auto [it, fresh] = sites_.try_emplace(key, nullptr);
  if (fresh) {
    std::string f = file;
    // From the repository's top folder on: the build's absolute path says nothing.
    for (const char* top : {"/core/", "/hw/", "/sim/", "/host/", "/scenarios/", "/tests/", "/tools/", "/bench/", "/fuzz/"})
      if (size_t at = f.rfind(top); at != std::string::npos) {
        f = f.substr(at + 1);
        break;
      }
    site_names_.push_back(f + ":" + std::to_string(line));
    it->second = site_names_.back().c_str();
  }
  return it->second;
}

void RaceDetector::ignore(const void* addr, size_t len) {
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  ignored_.insert(std::upper_bound(ignored_.begin(), ignored_.end(), std::pair{lo, lo + len}), {lo, lo + len});
}

bool RaceDetector::ignored(uintptr_t lo, uintptr_t hi) const {
  auto it = std::upper_bound(ignored_.begin(), ignored_.end(), std::pair{lo, ~uintptr_t{0}});
  return it != ignored_.begin() && std::prev(it)->first <= lo && hi <= std::prev(it)->second;
}

template <bool kWrite>
void RaceDetector::access(Tid t, const void* addr, size_t len, const char* label, uint64_t index) {
  const auto lo = reinterpret_cast<uintptr_t>(addr), hi = lo + len;
  if (len == 0 || (!ignored_.empty() && ignored(lo, hi))) return;
  const uint32_t lid = label_id(label);
  const Access cur{t, epoch(t), lid, 0, index};
  for (uintptr_t w = lo & ~(kWord - 1); w < hi; w += kWord) {
    const uintptr_t a = std::max(w, lo), b = std::min(w + kWord, hi);
    const auto mask = uint8_t(((1u << (b - a)) - 1) << (a - w));
    Shadow& sh = shadow_[w];
    for (const Access& x : sh.w)
      if (x.tid != kNoThread && (x.mask & mask) && !ordered(x, t, kWrite)) conflict(x, true, t, kWrite, w, label, index);
    if constexpr (kWrite) {
      for (Access& r : sh.r) {
        if (r.tid == kNoThread || !(r.mask & mask)) continue;
        if (!ordered(r, t, true)) conflict(r, false, t, true, w, label, index);
        if ((r.mask & ~mask) == 0) r = Access{};  // what it read is overwritten
      }
      // Bytes this write covers leave the older records; the thread's own bytes written in
      // the same epoch stay with it (an earlier epoch's are ordered before this write).
      uint8_t keep = 0;
      Access* slot = nullptr;
      for (Access& x : sh.w) {
        if (x.tid == t && x.epoch == cur.epoch) keep |= x.mask, x.mask = 0;
        x.mask = uint8_t(x.mask & ~mask);
        if (x.mask == 0) x = Access{};
      }
      for (Access& x : sh.w)
        if (slot == nullptr && x.tid == kNoThread) slot = &x;
      if (slot == nullptr)  // both held by others: forget one ordered before this write, else the first
        for (Access& x : sh.w)
          if (slot == nullptr && ordered(x, t, true)) slot = &x;
      if (slot == nullptr) slot = &sh.w[0];
      *slot = cur;
      slot->mask = uint8_t(mask | keep);
    } else {
      Access* slot = nullptr;
      for (Access& r : sh.r)
        if (r.tid == t) slot = &r;
      if (slot != nullptr) {
        const uint8_t keep = slot->epoch == cur.epoch ? slot->mask : 0;
        *slot = cur;
        slot->mask = uint8_t(mask | keep);
        continue;
      }
      for (Access& r : sh.r)
        if (slot == nullptr && (r.tid == kNoThread || ordered(r, t, false))) slot = &r;  // a read before this one: implied by it
      if (slot == nullptr) slot = &sh.r[(epoch(t) + t) % kReads];  // full of concurrent readers: one is forgotten
      *slot = cur;
      slot->mask = mask;
    }
  }
}

void RaceDetector::read(Tid t, const void* addr, size_t len, const char* label, uint64_t index) { access<false>(t, addr, len, label, index); }
void RaceDetector::write(Tid t, const void* addr, size_t len, const char* label, uint64_t index) { access<true>(t, addr, len, label, index); }

void RaceDetector::device_read(Tid t, const void* addr, size_t len, const char* label, uint64_t index) {
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  if (len <= 64)  // a doorbell record, a flag; a payload or a WQE ring carries no release
    for (uintptr_t w = lo & ~(kWord - 1); w < lo + len; w += kWord) acquire_load(t, reinterpret_cast<const void*>(w));
  access<false>(t, addr, len, label, index);
}

void RaceDetector::device_write(Tid t, const void* addr, size_t len, const char* label, uint64_t index) {
  access<true>(t, addr, len, label, index);
  device_rewrite(t, addr, len);
}

void RaceDetector::device_rewrite(Tid t, const void* addr, size_t len) {
  if (len > 64) return;  // a payload: its words release nothing
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t w = lo & ~(kWord - 1); w < lo + len; w += kWord) publish(t, w, true);
  tick(t, lo & ~(kWord - 1));
}

void RaceDetector::device_atomic(Tid t, const void* addr) {
  acquire_load(t, addr);
  release_store(t, addr);
}

void RaceDetector::name_range(const void* base, size_t len, std::string name) {
  const auto lo = reinterpret_cast<uintptr_t>(base);
  if (len != 0) ranges_[lo] = {lo + len, std::move(name)};
}

std::string RaceDetector::range_name(const void* addr) const {
  const auto word = reinterpret_cast<uintptr_t>(addr);
  auto it = ranges_.upper_bound(word);
  if (it == ranges_.begin() || word >= std::prev(it)->second.hi) return {};
  --it;
  char b[32];
  std::snprintf(b, sizeof b, "+0x%llx", static_cast<unsigned long long>(word - it->first));
  return it->second.name + b;
}

std::string RaceDetector::name_of(uintptr_t word) const {
  std::string n = namer_ ? namer_(reinterpret_cast<const void*>(word)) : std::string();
  if (n.empty()) n = range_name(reinterpret_cast<const void*>(word));
  if (!n.empty()) return n;
  char b[48];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(word));
  return b;
}

std::string RaceDetector::describe(const Access& a, bool write) const {
  std::string s = std::string(write ? "write" : "read") + " by " + threads_[a.tid].name + " at " + labels_[a.label];
  if (a.index != kNoIndex) s += " [" + std::to_string(a.index) + "]";
  return s;
}

void RaceDetector::conflict(const Access& earlier, bool earlier_write, Tid t, bool write, uintptr_t word, const char* label,
                            uint64_t index) {
  ++races_;
  const uint64_t key = (uint64_t(earlier.label) << 32 | label_id(label)) * 2 + (earlier_write ? 1 : 0);
  if (reported_.contains(key) || reports_.size() == kMaxReports) return;
  reported_[key] = true;
  std::ostringstream os;
  uint8_t m = earlier.mask;
  const unsigned first = m != 0 ? unsigned(__builtin_ctz(m)) : 0;
  os << "data race on the word at " << name_of(word) << " (byte " << first << " on):\n"
     << "  " << describe(earlier, earlier_write) << "\n"
     << "  " << describe(Access{t, epoch(t), label_id(label), 0, index}, write) << "\n";
  // The flag that should have ordered them: what the first thread released after its access.
  const Thread& u = threads_[earlier.tid];
  const Release* after = nullptr;
  bool fenced = false;
  for (const Release& r : u.releases)
    if (r.epoch >= earlier.epoch) {
      if (r.word != 0) {
        after = &r;
        break;
      }
      fenced = true;
    }
  if (after != nullptr)
    os << "  not ordered: " << u.name << " released " << name_of(after->word) << " after its access, but "
       << threads_[t].name << " did not acquire that release (or what followed it) before its own\n";
  else if (fenced)
    os << "  not ordered: " << u.name << " fenced after its access but published nothing after it (its flag or index "
       << "was stored before the access)\n";
  else {
    const Release* before = nullptr;  // its last publication before the access, if any
    for (const Release& r : u.releases)  // (a fenced store may have come after the access, in its epoch)
      if (r.epoch < earlier.epoch && r.word != 0 && !r.fenced) before = &r;
    os << "  not ordered: " << u.name << " released nothing after its access";
    if (before != nullptr) os << "; it released " << name_of(before->word) << " before it (the hand-over came first)";
    else os << " (the flag, index or barrier that should hand the bytes over is missing)";
    os << "\n";
  }
  if (threads_[t].acquired != 0)
    os << "  " << threads_[t].name << " last took the releases of " << name_of(threads_[t].acquired) << "\n";
  reports_.push_back(os.str());
}

std::string RaceDetector::report() const {
  std::string s;
  for (const std::string& r : reports_) s += r;
  if (races_ > reports_.size())
    s += "(" + std::to_string(races_) + " racing accesses in all; the first of each pair of sites is shown)\n";
  return s;
}

}  // namespace doorbell::gpu_sim
