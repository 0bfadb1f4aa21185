// The socket backends' common half (tcp.cc, fork.cc): whole transfers with a bounded wait,
// messages framed as a length and the bytes, the collectives over a star around rank 0, and
// point-to-point messages on connections of their own, so that a message and an exchange
// never share a stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap::internal {

inline constexpr int kIoTimeoutMs = 300'000;  // a peer silent this long is gone

// "what: strerror(errno)".
std::string sys_error(const std::string& what);
// "rank 3".
std::string rank_name(uint32_t r);
// All `n` bytes to or from `fd`, each wait bounded by kIoTimeoutMs; EOF is a peer that went away.
Status io_all(int fd, void* p, size_t n, bool send, const std::string& peer);
// One frame: the length, then the bytes.
Status send_frame(int fd, const void* p, size_t n, const std::string& peer);
// One frame; returns the length sent. Its bytes land in `p` only when it is `n` (another
// length is read and dropped, so the stream stays in step).
Result<uint64_t> recv_frame(int fd, void* p, size_t n, const std::string& peer);
// Closes every fd that is open (>= 0) and marks it closed.
void close_all(std::vector<int>& fds);

// A backend over stream sockets. The derived class fills `star_` (rank 0: a connection to each
// rank, its own slot unused; the others: [0], to rank 0) and says which connection carries
// each point-to-point direction.
class SocketBootstrap : public Bootstrap {
 public:
  SocketBootstrap(uint32_t rank, uint32_t size) : rank_(rank), size_(size), star_(size, -1) {}
  ~SocketBootstrap() override { close_all(star_); }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  // Rank 0 takes every rank's block (checking all called the same exchange) and sends the
  // whole buffer back.
  Status allgather(void* buf, size_t bytes) override;
  Status barrier() override;

 protected:
  // The connection carrying this rank's messages to `peer` (`sending`) or peer's to this one;
  // a backend may open it here, on first use.
  virtual Result<int> p2p_fd(uint32_t peer, bool sending) = 0;

  const uint32_t rank_, size_;
  std::vector<int> star_;

 private:
  Status send_bytes(uint32_t peer, const void* buf, size_t bytes) final;
  Result<uint64_t> recv_bytes(uint32_t peer, void* buf, size_t bytes) final;
};

}  // namespace doorbell::bootstrap::internal
