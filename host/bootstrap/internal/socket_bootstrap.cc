#include "host/bootstrap/internal/socket_bootstrap.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace doorbell::bootstrap::internal {

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string rank_name(uint32_t r) { return "rank " + std::to_string(r); }

Status io_all(int fd, void* p, size_t n, bool send, const std::string& peer) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pf{fd, short(send ? POLLOUT : POLLIN), 0};
    const int ready = poll(&pf, 1, kIoTimeoutMs);
    if (ready == 0) return Status(Errc::kInternal, "bootstrap: " + peer + " silent for " + std::to_string(kIoTimeoutMs / 1000) + " s");
    if (ready < 0 && errno == EINTR) continue;
    const ssize_t k = send ? ::send(fd, b, n, MSG_NOSIGNAL) : ::recv(fd, b, n, 0);
    if (k == 0) return Status(Errc::kInternal, "bootstrap: " + peer + " closed its connection (did it exit?)");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status(Errc::kInternal, sys_error("bootstrap: " + std::string(send ? "send to " : "receive from ") + peer));
    }
    b += k, n -= size_t(k);
  }
  return {};
}

Status send_frame(int fd, const void* p, size_t n, const std::string& peer) {
  uint64_t len = n;
  if (Status s = io_all(fd, &len, sizeof len, true, peer); !s) return s;
  return io_all(fd, const_cast<void*>(p), n, true, peer);
}

Result<uint64_t> recv_frame(int fd, void* p, size_t n, const std::string& peer) {
  uint64_t len = 0;
  if (Status s = io_all(fd, &len, sizeof len, false, peer); !s) return s;
  if (len == n) {
    if (Status s = io_all(fd, p, n, false, peer); !s) return s;
    return len;
  }
  uint8_t drop[4096];
  for (uint64_t left = len; left > 0;) {
    const size_t k = size_t(std::min<uint64_t>(left, sizeof drop));
    if (Status s = io_all(fd, drop, k, false, peer); !s) return s;
    left -= k;
  }
  return len;
}

void close_all(std::vector<int>& fds) {
  for (int& fd : fds)
    if (fd >= 0) close(fd), fd = -1;
}

Status SocketBootstrap::allgather(void* buf, size_t bytes) {
  auto* b = static_cast<uint8_t*>(buf);
  if (rank_ != 0) {
    if (Status s = send_frame(star_[0], b + rank_ * bytes, bytes, "rank 0"); !s) return s;
    Result<uint64_t> all = recv_frame(star_[0], b, bytes * size_, "rank 0");
    if (!all) return all.status();
    if (*all != bytes * size_) return Status(Errc::kBadState, "bootstrap: rank 0 answered an exchange with the wrong size");
    return {};
  }
  for (uint32_t r = 1; r < size_; ++r) {
    Result<uint64_t> len = recv_frame(star_[r], b + r * bytes, bytes, rank_name(r));
    if (!len) return len.status();
    if (*len != bytes)
      return Status(Errc::kBadState, "bootstrap: exchange of " + std::to_string(*len) + " bytes by " + rank_name(r) + ", of " +
                                         std::to_string(bytes) + " by rank 0 (the ranks called different exchanges)");
  }
  for (uint32_t r = 1; r < size_; ++r)
    if (Status s = send_frame(star_[r], b, bytes * size_, rank_name(r)); !s) return s;
  return {};
}

Status SocketBootstrap::barrier() {
  std::vector<uint8_t> b(size_);
  return allgather(b.data(), 1);
}

Status SocketBootstrap::send_bytes(uint32_t peer, const void* buf, size_t bytes) {
  Result<int> fd = p2p_fd(peer, true);
  if (!fd) return fd.status();
  return send_frame(*fd, buf, bytes, rank_name(peer));
}

Result<uint64_t> SocketBootstrap::recv_bytes(uint32_t peer, void* buf, size_t bytes) {
  Result<int> fd = p2p_fd(peer, false);
  if (!fd) return fd.status();
  return recv_frame(*fd, buf, bytes, rank_name(peer));
}

}  // namespace doorbell::bootstrap::internal
