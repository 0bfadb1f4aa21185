// The wire between NIC models in different processes of one host: a POSIX shared-memory
// segment holding, for every ordered pair of processes (i, j), a ring of requests i -> j and
// a ring of their responses j -> i. Each ring has one writer and one reader (byte ring,
// length-prefixed messages). call() waits for its request's answer; send() / poll() let a
// NIC keep WRITEs in flight and take their answers later, in order. A process waiting for an
// answer, or for room, serves the requests that reach it (and keeps arrived answers) meanwhile,
// so two NICs asking each other cannot deadlock.
// Messages are written and read in place in the rings (a WRITE's payload is gathered straight
// into its request, a READ's data straight into its answer), so where the segment is pinned
// for the GPU (Dma::pin) device memory is copied to and from it with no bounce.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace doorbell::mock_nic {

class ShmLinks {
  struct Ring;  // one direction of one pair (link.cc)

 public:
  static constexpr size_t kRingBytes = 2u << 20;            // per direction and pair
  static constexpr size_t kMaxMessage = kRingBytes / 2 - 64;  // a request's payload must fit

  // Rank 0 creates the segment `name` for `n` processes (create = true), the others open it
  // once it exists; then every rank calls unlink() after a barrier, so nothing outlives the job.
  static Result<std::unique_ptr<ShmLinks>> open(const std::string& name, uint32_t n, uint32_t me, bool create);
  ~ShmLinks();
  Status unlink();

  uint32_t processes() const { return n_; }
  uint64_t calls() const { return calls_; }    // requests this process sent and had answered
  uint64_t served() const { return served_; }  // requests it answered for the others
  uint32_t me() const { return me_; }
  // Wall time (ns) from each request to its answer (in call(), serving included; from send()
  // to the poll() that took it), and in answering the others' requests (the server, wherever
  // serve() ran): a profile's link figures.
  uint64_t call_ns() const { return call_ns_; }
  uint64_t serve_ns() const { return serve_ns_; }

  // The shared segment (for Dma::pin).
  void* segment() const { return base_; }
  size_t segment_size() const { return bytes_; }

  // Where a server writes its answer, in place in the response ring: room(cap) gives space for
  // up to `cap` bytes (null if cap is over kMaxMessage), done(n) says how many it wrote. An
  // answer never given is empty (the caller reads it as none).
  class Reply {
   public:
    uint8_t* room(size_t cap);
    void done(size_t n) { len_ = n; }

   private:
    friend class ShmLinks;
    Ring* ring_ = nullptr;
    uint8_t* p_ = nullptr;
    size_t cap_ = 0, len_ = 0;
    uint64_t base_ = 0;  // the ring's head before this answer (past any skip)
    size_t at_ = 0;      // where its length word goes
  };
  // How this process answers a request from process `from` (the NIC's responder half); the
  // request is read in place and is valid only during the call.
  using Server = std::function<void(uint32_t from, const uint8_t* request, size_t len, Reply& reply)>;
  void set_server(Server s) { server_ = std::move(s); }

  // Send a request of `len` bytes, written in place by fill(p), to process `to` and wait for
  // its answer, read in place by take(p, n); inbound requests are served while waiting. False
  // (and *why) if the request is over kMaxMessage or `to` does not answer within `timeout_s`.
  using Fill = std::function<void(uint8_t* p)>;
  using Take = std::function<void(const uint8_t* p, size_t n)>;
  bool call(uint32_t to, size_t len, const Fill& fill, const Take& take, std::string* why, double timeout_s = 60);
  // The same with the request and answer as vectors.
  bool call(uint32_t to, const std::vector<uint8_t>& request, std::vector<uint8_t>* response, std::string* why,
            double timeout_s = 60);
  // Requests whose answers are taken later (the NIC's WRITEs in flight): send() posts one and
  // returns its number (0 and *why if `to` takes none within timeout_s); poll() takes its
  // answer once it came (kLost: none within timeout_s of the send; the number is then
  // forgotten, as by forget()). Answers come in the order their requests went; one that
  // arrives while another is awaited is kept until polled.
  uint64_t send(uint32_t to, size_t len, const Fill& fill, std::string* why, double timeout_s = 60);
  enum class Poll { kNotYet, kTaken, kLost };
  Poll poll(uint32_t to, uint64_t seq, const Take& take, double timeout_s = 60);
  void forget(uint32_t to, uint64_t seq);  // its answer, when it comes, is dropped
  // Serve every request waiting now; returns how many.
  size_t serve();
  // Say this process is done with its next round (its own requests answered), then serve the
  // others' requests until every process is: a process that finishes first must still answer.
  // Every process calls it the same number of times; the rounds count up over the links' life.
  bool serve_until_all_done(std::string* why, double timeout_s = 60);

 private:
  ShmLinks(void* base, size_t bytes, uint32_t n, uint32_t me, std::string name)
      : base_(base), bytes_(bytes), n_(n), me_(me), name_(std::move(name)), pending_(n) {}
  Ring* requests(uint32_t from, uint32_t to) const;
  Ring* responses(uint32_t from, uint32_t to) const;  // the responses `from` sends back to `to`
  std::atomic<uint64_t>* done(uint32_t p) const;      // the last round process p finished
  static size_t segment_bytes(uint32_t n);

  void* base_;
  size_t bytes_;
  uint32_t n_, me_;
  std::string name_;
  Server server_;
  // Per peer: requests sent with send() and not yet polled (by number, when sent), and their
  // answers that came while something else was awaited.
  struct Pending {
    std::map<uint64_t, std::chrono::steady_clock::time_point> sent;
    std::map<uint64_t, std::vector<uint8_t>> kept;
  };
  std::vector<Pending> pending_;
  // An arrived answer that is not `seq`'s: kept if a send() awaits it, dropped if its caller gave up.
  void keep(uint32_t from, uint64_t seq, const uint8_t* p, size_t n);
  void keep_arrived(uint32_t from);  // every answer that came, kept
  uint8_t* reserve_request(uint32_t to, size_t len, size_t* at, uint64_t* base, std::string* why, double timeout_s);
  uint64_t rounds_ = 0;            // rounds this process finished
  uint64_t calls_ = 0, served_ = 0;
  uint64_t call_ns_ = 0, serve_ns_ = 0;
  uint64_t next_seq_ = 0;          // this process's requests, numbered
};

}  // namespace doorbell::mock_nic
