#include "hw/mock_nic/link.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/cpu_relax.h"

namespace doorbell::mock_nic {

// One direction of one pair: head (bytes written) and tail (bytes read) only grow; a message
// is a 4-byte length, 4 spare, an 8-byte sequence number (an answer carries its request's, so
// an answer that comes after its caller gave up is told apart) and its bytes, padded to 16;
// one that would cross the end starts again at the front after a skip marker.
struct ShmLinks::Ring {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) uint8_t data[kRingBytes];

  static constexpr uint32_t kSkip = 0xffffffffu;
  static size_t padded(size_t n) { return (16 + n + 15) & ~size_t(15); }  // payloads 16-byte aligned, for copies

  // Writer: room for a message of up to `cap` bytes, written in place at the returned pointer
  // and then published; null while there is none (the reader has not caught up). *at: where
  // its length word goes; *base: the head it starts from.
  uint8_t* reserve(size_t cap, size_t* at, uint64_t* base) {
    const uint64_t h = head.load(std::memory_order_relaxed), t = tail.load(std::memory_order_acquire);
    const size_t need = padded(cap), pos = size_t(h % kRingBytes), to_end = kRingBytes - pos;
    const size_t skip = need > to_end ? to_end : 0;
    if (h + skip + need - t > kRingBytes) return nullptr;
    if (skip != 0) std::memcpy(data + pos, &kSkip, 4);
    *at = skip != 0 ? 0 : pos;
    *base = h + skip;
    return data + *at + 16;
  }
  void publish(size_t at, uint64_t base, uint64_t seq, size_t len) {
    const uint32_t n = uint32_t(len);
    std::memcpy(data + at, &n, 4);
    std::memcpy(data + at + 8, &seq, 8);
    head.store(base + padded(len), std::memory_order_release);
  }
  // Reader: the oldest message in place (false when empty), released once read.
  struct View {
    const uint8_t* p;
    size_t len;
    uint64_t seq, next_tail;
  };
  bool peek(View* v) const {
    uint64_t t = tail.load(std::memory_order_relaxed);
    if (head.load(std::memory_order_acquire) == t) return false;
    size_t at = size_t(t % kRingBytes);
    uint32_t len;
    std::memcpy(&len, data + at, 4);
    if (len == kSkip) {
      t += kRingBytes - at, at = 0;
      std::memcpy(&len, data, 4);
    }
    std::memcpy(&v->seq, data + at + 8, 8);
    v->p = data + at + 16, v->len = len, v->next_tail = t + padded(len);
    return true;
  }
  void release(const View& v) { tail.store(v.next_tail, std::memory_order_release); }
};

// The rings, then a cache line of round counters per process.
size_t ShmLinks::segment_bytes(uint32_t n) { return sizeof(Ring) * 2 * size_t(n) * n + 64 * size_t(n); }

std::atomic<uint64_t>* ShmLinks::done(uint32_t p) const {
  auto* after = reinterpret_cast<uint8_t*>(static_cast<Ring*>(base_) + 2 * size_t(n_) * n_);
  return reinterpret_cast<std::atomic<uint64_t>*>(after + 64 * size_t(p));
}

bool ShmLinks::serve_until_all_done(std::string* why, double timeout_s) {
  const uint64_t round = ++rounds_;
  done(me_)->store(round, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    serve();
    uint32_t behind = n_;
    for (uint32_t p = 0; p < n_; ++p)
      if (done(p)->load(std::memory_order_acquire) < round) behind = p;
    if (behind == n_) return true;
    if (std::chrono::steady_clock::now() > deadline)
      return *why = "links: process " + std::to_string(behind) + " did not finish round " + std::to_string(round), false;
    std::this_thread::yield();
  }
}

ShmLinks::Ring* ShmLinks::requests(uint32_t from, uint32_t to) const {
  return static_cast<Ring*>(base_) + 2 * (size_t(from) * n_ + to);
}
ShmLinks::Ring* ShmLinks::responses(uint32_t from, uint32_t to) const {
  return static_cast<Ring*>(base_) + 2 * (size_t(from) * n_ + to) + 1;
}

Result<std::unique_ptr<ShmLinks>> ShmLinks::open(const std::string& name, uint32_t n, uint32_t me, bool create) {
  if (n == 0 || me >= n) return Status(Errc::kBadParam, "links: process " + std::to_string(me) + " of " + std::to_string(n));
  const size_t bytes = segment_bytes(n);
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Status(Errc::kBadState, "links: shm_open " + name + ": " + std::strerror(errno));
  struct stat st{};
  if (!create && (fstat(fd, &st) != 0 || size_t(st.st_size) < bytes)) {  // made, not yet sized: not ready
    close(fd);
    return Status(Errc::kBadState, "links: " + name + " is not ready yet (" + std::to_string(st.st_size) + " of " + std::to_string(bytes) + " bytes)");
  }
  if (create && ftruncate(fd, off_t(bytes)) != 0) {
    const std::string e = std::strerror(errno);
    close(fd);
    shm_unlink(name.c_str());
    return Status(Errc::kNoResource, "links: cannot size " + name + " to " + std::to_string(bytes) + " bytes: " + e);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Status(Errc::kNoResource, std::string("links: mmap: ") + std::strerror(errno));
  // A fresh segment is zero-filled: every ring starts empty.
  return std::unique_ptr<ShmLinks>(new ShmLinks(p, bytes, n, me, name));
}

ShmLinks::~ShmLinks() { munmap(base_, bytes_); }

Status ShmLinks::unlink() {
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) return Status(Errc::kBadState, "links: shm_unlink " + name_ + ": " + std::strerror(errno));
  return {};
}

uint8_t* ShmLinks::Reply::room(size_t cap) {
  if (cap > kMaxMessage) return nullptr;
  if (p_ == nullptr)
    while ((p_ = ring_->reserve(cap, &at_, &base_)) == nullptr) cpu_relax();  // the caller reads it at once
  cap_ = cap;
  return p_;
}

size_t ShmLinks::serve() {
  size_t n = 0;
  for (uint32_t from = 0; from < n_; ++from) {
    if (from == me_) continue;
    Ring::View v;
    while (requests(from, me_)->peek(&v)) {
      Reply r;
      r.ring_ = responses(me_, from);
      const auto t0 = std::chrono::steady_clock::now();
      if (server_) server_(from, v.p, v.len, r);
      serve_ns_ += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
      requests(from, me_)->release(v);
      if (r.p_ == nullptr) r.room(0);  // no answer given: an empty one, read as none
      r.ring_->publish(r.at_, r.base_, v.seq, std::min(r.len_, r.cap_));
      ++n;
    }
  }
  served_ += n;
  return n;
}

bool ShmLinks::call(uint32_t to, const std::vector<uint8_t>& request, std::vector<uint8_t>* response, std::string* why,
                    double timeout_s) {
  return call(
      to, request.size(), [&request](uint8_t* p) { std::memcpy(p, request.data(), request.size()); },
      [response](const uint8_t* p, size_t n) { response->assign(p, p + n); }, why, timeout_s);
}

void ShmLinks::keep(uint32_t from, uint64_t seq, const uint8_t* p, size_t n) {
  Pending& pd = pending_[from];
  if (pd.sent.count(seq) != 0) pd.kept[seq].assign(p, p + n);
}

void ShmLinks::keep_arrived(uint32_t from) {
  Ring* in = responses(from, me_);
  Ring::View v;
  while (in->peek(&v)) keep(from, v.seq, v.p, v.len), in->release(v);
}

// Room for a request to `to`, serving inbound requests (and keeping arrived answers, which
// must not fill the peer's answer ring while it waits to answer) until there is.
uint8_t* ShmLinks::reserve_request(uint32_t to, size_t len, size_t* at, uint64_t* base, std::string* why, double timeout_s) {
  if (len > kMaxMessage) {
    *why = "links: a request of " + std::to_string(len) + " bytes is larger than the link's " + std::to_string(kMaxMessage);
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  uint8_t* p;
  while ((p = requests(me_, to)->reserve(len, at, base)) == nullptr) {
    serve();
    keep_arrived(to);
    if (std::chrono::steady_clock::now() > deadline) return *why = "links: process " + std::to_string(to) + " takes no requests", nullptr;
  }
  return p;
}

uint64_t ShmLinks::send(uint32_t to, size_t len, const Fill& fill, std::string* why, double timeout_s) {
  size_t at;
  uint64_t base;
  uint8_t* p = reserve_request(to, len, &at, &base, why, timeout_s);
  if (p == nullptr) return 0;
  const uint64_t seq = ++next_seq_;
  fill(p);
  requests(me_, to)->publish(at, base, seq, len);
  pending_[to].sent[seq] = std::chrono::steady_clock::now();
  return seq;
}

ShmLinks::Poll ShmLinks::poll(uint32_t to, uint64_t seq, const Take& take, double timeout_s) {
  Pending& pd = pending_[to];
  const auto sent = pd.sent.find(seq);
  if (sent == pd.sent.end()) return Poll::kLost;  // forgotten
  if (auto k = pd.kept.find(seq); k != pd.kept.end()) {
    take(k->second.data(), k->second.size());
    call_ns_ += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - sent->second).count());
    pd.kept.erase(k), pd.sent.erase(sent), ++calls_;
    return Poll::kTaken;
  }
  Ring* in = responses(to, me_);
  Ring::View v;
  while (in->peek(&v)) {
    if (v.seq == seq) {
      take(v.p, v.len);
      in->release(v);
      call_ns_ += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - sent->second).count());
      pd.sent.erase(sent), ++calls_;
      return Poll::kTaken;
    }
    keep(to, v.seq, v.p, v.len);
    in->release(v);
  }
  if (std::chrono::steady_clock::now() - sent->second > std::chrono::duration<double>(timeout_s)) return pd.sent.erase(sent), Poll::kLost;
  return Poll::kNotYet;
}

void ShmLinks::forget(uint32_t to, uint64_t seq) {
  pending_[to].sent.erase(seq);
  pending_[to].kept.erase(seq);
}

bool ShmLinks::call(uint32_t to, size_t len, const Fill& fill, const Take& take, std::string* why, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  // Every way out adds the call's wall time.
  struct Timed {
    std::chrono::steady_clock::time_point t0;
    uint64_t* ns;
    ~Timed() { *ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()); }
  } timed{start, &call_ns_};
  size_t at;
  uint64_t base;
  uint8_t* p = reserve_request(to, len, &at, &base, why, timeout_s);
  if (p == nullptr) return false;
  const uint64_t seq = ++next_seq_;
  fill(p);
  requests(me_, to)->publish(at, base, seq, len);
  Ring* in = responses(to, me_);
  for (uint32_t spins = 0;; ++spins) {
    Ring::View v;
    if (in->peek(&v)) {
      const bool mine = v.seq == seq;  // else a send()'s (kept) or the late answer of a call that gave up (dropped)
      if (mine) take(v.p, v.len);
      else keep(to, v.seq, v.p, v.len);
      in->release(v);
      if (mine) return ++calls_, true;
      continue;
    }
    if (serve() == 0 && (spins & 255) == 255) {
      if (std::chrono::steady_clock::now() > deadline)
        return *why = "links: process " + std::to_string(to) + " did not answer within " + std::to_string(int(timeout_s)) + " s", false;
    }
    cpu_relax();  // the answer takes microseconds: a yield could give the core away for a tick
  }
}

}  // namespace doorbell::mock_nic
