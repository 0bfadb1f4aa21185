// The wire between NIC models in different processes of one host: a POSIX shared-memory
// segment holding, for every ordered pair of processes (i, j), a ring of requests i -> j and
// a ring of their responses j -> i. Each ring has one writer and one reader (byte ring,
// length-prefixed messages). A request is answered before its sender goes on (RC's one
// outstanding request per QP is all the model needs), and a process waiting for an answer
// serves the requests that reach it meanwhile, so two NICs asking each other cannot deadlock.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace doorbell::mock_nic {

class ShmLinks {
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

  // How this process answers a request from process `from` (the NIC's responder half).
  using Server = std::function<void(uint32_t from, const std::vector<uint8_t>& request, std::vector<uint8_t>* response)>;
  void set_server(Server s) { server_ = std::move(s); }

  // Send `request` to process `to` and wait for its response, serving inbound requests while
  // waiting. False (and *why) if `to` does not answer within `timeout_s`.
  bool call(uint32_t to, const std::vector<uint8_t>& request, std::vector<uint8_t>* response, std::string* why,
            double timeout_s = 60);
  // Serve every request waiting now; returns how many.
  size_t serve();
  // Say this process is done with its next round (its own requests answered), then serve the
  // others' requests until every process is: a process that finishes first must still answer.
  // Every process calls it the same number of times; the rounds count up over the links' life.
  bool serve_until_all_done(std::string* why, double timeout_s = 60);

 private:
  struct Ring;
  ShmLinks(void* base, size_t bytes, uint32_t n, uint32_t me, std::string name)
      : base_(base), bytes_(bytes), n_(n), me_(me), name_(std::move(name)) {}
  Ring* requests(uint32_t from, uint32_t to) const;
  Ring* responses(uint32_t from, uint32_t to) const;  // the responses `from` sends back to `to`
  std::atomic<uint64_t>* done(uint32_t p) const;      // the last round process p finished
  static size_t segment_bytes(uint32_t n);

  void* base_;
  size_t bytes_;
  uint32_t n_, me_;
  std::string name_;
  Server server_;
  std::vector<uint8_t> in_, out_;  // scratch
  uint64_t rounds_ = 0;            // rounds this process finished
  uint64_t calls_ = 0, served_ = 0;
  uint64_t next_seq_ = 0;          // this process's requests, numbered
};

}  // namespace doorbell::mock_nic
