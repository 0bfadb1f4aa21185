#include "hw/gpu_sim/weak_memory.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace doorbell::gpu_sim {

namespace {
constexpr uintptr_t kWord = 8, kLine = 64;
constexpr size_t kMaxBuffered = 64;   // per thread; the oldest drains when full
constexpr size_t kTrackAll = 256;     // device writes up to this size start histories
constexpr size_t kNotes = 4;
const char* const kLevel[] = {"its thread only", "its CTA", "the GPU"};

uint64_t mix(uint64_t& s) {  // xorshift64*
  s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}
bool overlaps(uintptr_t a, size_t alen, uintptr_t b, size_t blen) { return a < b + blen && b < a + alen; }
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
}

std::string WeakMemory::describe() const {
  return "drain=" + std::to_string(drain_per_256_) + "/256 stale=" + std::to_string(stale_per_256_) + "/256";
}

uint32_t WeakMemory::rand(uint32_t n) { return uint32_t(mix(rng_) >> 33) % n; }

uint32_t WeakMemory::add_thread(uint32_t cta, std::string name) {
  threads_.push_back(Thread{cta, std::move(name)});
  return uint32_t(threads_.size() - 1);
}

bool WeakMemory::visible(const Entry& e, uint32_t t) const {
  if (e.thread == t || e.level >= 2) return true;
  return e.level == 1 && threads_[t].cta == e.cta;
}

bool WeakMemory::line_busy(uintptr_t addr, size_t len) const {
  if (lines_.empty()) return false;
  for (uintptr_t l = addr / kLine; l <= (addr + len - 1) / kLine; ++l)
    if (lines_.count(l) != 0) return true;
  return false;
}

void WeakMemory::count_lines(const Entry& e, int delta) {
  for (uintptr_t l = e.addr / kLine; l <= (e.addr + e.len - 1) / kLine; ++l) {
    uint32_t& c = lines_[l];
    c += uint32_t(delta);
    if (c == 0) lines_.erase(l);
  }
}

// ---- memory's recent values ----

void WeakMemory::record(uintptr_t word, uint64_t visible_since) {
  History& h = hist_[word];
  uint64_t cur;
  std::memcpy(&cur, reinterpret_cast<const void*>(word), kWord);
  for (uint32_t i = std::min<uint32_t>(h.n, 2); i > 0; --i) h.old[i] = h.old[i - 1];
  h.old[0] = {h.start, cur};
  h.n = std::min<uint32_t>(h.n + 1, 3);
  // A store other threads could already see (promoted by a fence) counts from then: a
  // reader that synchronised after that point must not miss it once it drains.
  ++clock_;
  h.start = visible_since != 0 ? std::max(visible_since, h.old[0].start) : clock_;
}

void WeakMemory::device_write(const void* addr, size_t len) {
  if (len == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const bool all = len <= kTrackAll;  // bulk payloads: only words GPU threads already track
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord)
    if (all || hist_.count(w) != 0) record(w, 0);
}

void WeakMemory::device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (len == 0 || !line_busy(a, len)) return;
  for (const Entry& e : pending_) {
    if (!overlaps(e.addr, e.len, a, len)) continue;
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
  const auto* s = static_cast<const uint8_t*>(src);
  while (len != 0) {
    const uint32_t n = uint32_t(std::min<size_t>(len, kLine - (a % kLine)));
    Entry e;
    e.seq = ++seq_;
    e.vis = 0;
    e.addr = a;
    e.len = n;
    e.thread = t;
    e.cta = threads_[t].cta;
    e.level = 0;
    std::memcpy(e.bytes, s, n);
    pending_.push_back(e);
    count_lines(e, +1);
    if (++threads_[t].buffered > kMaxBuffered) {
      for (const Entry& o : pending_)
        if (o.thread == t) {
          drain(o.seq);
          break;
        }
    }
    a += n, s += n, len -= n;
  }
}

// Drain store `seq` to memory, after every older overlapping store its thread could see
// (per-address order: a later store never lands under an earlier one it followed).
void WeakMemory::drain(uint64_t seq) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [seq](const Entry& e) { return e.seq == seq; });
  if (it == pending_.end()) return;
  for (;;) {
    it = std::find_if(pending_.begin(), pending_.end(), [seq](const Entry& e) { return e.seq == seq; });
    const Entry& e = *it;
    auto older = std::find_if(pending_.begin(), it, [&](const Entry& o) {
      return overlaps(o.addr, o.len, e.addr, e.len) && visible(o, e.thread);
    });
    if (older == it) break;
    drain(older->seq);
  }
  const Entry e = *it;
  pending_.erase(it);
  count_lines(e, -1);
  --threads_[e.thread].buffered;
  Thread& owner = threads_[e.thread];
  for (uintptr_t w = e.addr & ~(kWord - 1); w < e.addr + e.len; w += kWord) {
    record(w, e.level != 0 ? e.vis : 0);
    owner.floor[w] = hist_[w].start;  // the writer never reads below its own store
  }
  std::memcpy(reinterpret_cast<void*>(e.addr), e.bytes, e.len);
}

void WeakMemory::drain_matching(const std::function<bool(const Entry&)>& pred) {
  std::vector<uint64_t> seqs;
  for (const Entry& e : pending_)
    if (pred(e)) seqs.push_back(e.seq);
  for (uint64_t s : seqs) drain(s);
}

bool WeakMemory::drain_thread(uint32_t t) {
  if (threads_[t].buffered == 0) return false;
  drain_matching([t](const Entry& e) { return e.thread == t; });
  return true;
}

void WeakMemory::catch_up(Thread& th) {
  th.horizon = clock_;
  th.floor.clear();
}

// Stores a fence of scope s by t must carry: t's own, and (cumulativity) what t's CTA or GPU
// could already see.
bool WeakMemory::covered(const Entry& e, uint32_t t, exec::Scope s) const {
  const uint8_t to = s == exec::Scope::kCta ? 1 : s == exec::Scope::kGpu ? 2 : 3;
  if (e.level >= to) return false;
  return e.thread == t || (to >= 2 && e.level == 1 && e.cta == threads_[t].cta) || (to == 3 && e.level == 2);
}

bool WeakMemory::fence_step(uint32_t t, exec::Scope s) {
  uint32_t n = 0;
  for (const Entry& e : pending_) n += covered(e, t, s);
  if (n == 0) return false;
  uint32_t k = rand(n);
  for (Entry& e : pending_)
    if (covered(e, t, s) && k-- == 0) {
      if (s == exec::Scope::kSystem) drain(e.seq);
      else e.level = s == exec::Scope::kCta ? 1 : 2, e.vis = ++clock_;
      return true;
    }
  return false;
}

void WeakMemory::fence(uint32_t t, exec::Scope s) {
  while (fence_step(t, s)) {
  }
  catch_up(threads_[t]);
}

void WeakMemory::acquired(uint32_t t) { catch_up(threads_[t]); }

void WeakMemory::rmw(uint32_t t, void* addr, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (line_busy(a, len)) drain_matching([&](const Entry& e) { return overlaps(e.addr, e.len, a, len) && visible(e, t); });
  Thread& th = threads_[t];
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord) {
    record(w, 0);
    th.floor[w] = clock_;
  }
}

// ---- loads ----

// The 8 bytes at `word` as thread t may see them. Candidates in coherence order: memory's
// recent values, then buffered stores visible to t (its own included). t may read any of
// them not superseded before its view (its last acquire or fence) and not older than what it
// read or stored before.
uint64_t WeakMemory::view_word(uint32_t t, uintptr_t word) {
  Thread& th = threads_[t];
  struct Cand {
    uint64_t start, value;
  };
  constexpr uint32_t kMax = 16;
  Cand c[kMax];
  uint32_t n = 0, own = 0;  // own: the first candidate at or after t's newest own store
  uint64_t cur;
  std::memcpy(&cur, reinterpret_cast<const void*>(word), kWord);
  auto h = hist_.find(word);
  if (h != hist_.end()) {
    for (uint32_t i = h->second.n; i > 0; --i) c[n++] = {h->second.old[i - 1].start, h->second.old[i - 1].value};
    c[n++] = {h->second.start, cur};
  } else {
    c[n++] = {0, cur};
  }
  if (line_busy(word, kWord))
    for (const Entry& e : pending_) {
      if (!visible(e, t) || !overlaps(e.addr, e.len, word, kWord)) continue;
      uint64_t v = c[n - 1].value;
      const uintptr_t lo = std::max(e.addr, word), hi = std::min(e.addr + e.len, word + kWord);
      std::memcpy(reinterpret_cast<uint8_t*>(&v) + (lo - word), e.bytes + (lo - e.addr), hi - lo);
      if (n == kMax) {  // too many: fold the oldest pending candidate away
        for (uint32_t i = 1; i + 1 < kMax; ++i) c[i] = c[i + 1];
        --n;
        own = own > 0 ? own - 1 : 0;
      }
      c[n++] = {e.thread == t ? 0 : e.vis, v};
      if (e.thread == t) own = n - 1;
    }
  uint32_t pick = n - 1;
  if (n - own > 1 && rand(256) < stale_per_256_) {
    auto f = th.floor.find(word);
    const uint64_t bound = std::max(th.horizon, f == th.floor.end() ? 0 : f->second);
    uint32_t first = n - 1;  // the oldest candidate still readable: superseded after `bound`
    while (first > own && c[first].start > bound) --first;
    pick = first + rand(n - first);
  }
  if (pick != n - 1) {
    ++thread_stale_;
    if (thread_notes_.size() == kNotes) thread_notes_.erase(thread_notes_.begin());
    thread_notes_.push_back({t, word, c[pick].value, c[n - 1].value});
  }
  if (c[pick].start > th.horizon) {
    uint64_t& fl = th.floor[word];
    fl = std::max(fl, c[pick].start);
  }
  return c[pick].value;
}

void WeakMemory::load(uint32_t t, const void* addr, void* dst, size_t len) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  auto* d = static_cast<uint8_t*>(dst);
  for (uintptr_t w = a & ~(kWord - 1); w < a + len; w += kWord) {
    if (!line_busy(w, kWord) && hist_.count(w) == 0) {  // nothing to choose from: memory
      const uintptr_t lo = std::max(a, w), hi = std::min(a + len, w + kWord);
      std::memcpy(d + (lo - a), reinterpret_cast<const void*>(lo), hi - lo);
      continue;
    }
    const uint64_t v = view_word(t, w);
    const uintptr_t lo = std::max(a, w), hi = std::min(a + len, w + kWord);
    std::memcpy(d + (lo - a), reinterpret_cast<const uint8_t*>(&v) + (lo - w), hi - lo);
  }
}

// ---- scheduling ----

bool WeakMemory::step() {
  if (pending_.empty() || rand(256) >= drain_per_256_) return false;
  drain(pending_[rand(uint32_t(pending_.size()))].seq);
  return true;
}

void WeakMemory::polled(uint32_t t) {
  if (rand(256) < refresh_per_256_) catch_up(threads_[t]);
}

bool WeakMemory::settle() {
  bool changed = !pending_.empty();
  drain_matching([](const Entry&) { return true; });
  for (Thread& th : threads_) {
    changed |= th.horizon != clock_;
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
  if (device_stale_ == 0 && thread_stale_ == 0) return {};
  std::ostringstream os;
  os << "weak memory (" << describe() << "): " << device_stale_ << " device reads missed buffered stores, "
     << thread_stale_ << " thread loads read superseded values\n";
  for (const DeviceNote& n : device_notes_)
    os << "  stale: " << n.text << (n.count > 1 ? " (and " + std::to_string(n.count - 1) + " more such reads)" : "") << "\n";
  for (const StaleLoad& s : thread_notes_)
    os << "  stale load: " << threads_[s.thread].name << " read " << name_of(reinterpret_cast<const void*>(s.word)) << " = "
       << hex(s.got) << ", a value superseded by " << hex(s.newest) << " after its last acquire or fence\n";
  return os.str();
}

}  // namespace doorbell::gpu_sim
