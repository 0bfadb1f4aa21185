// The TCP bootstrap: a star around rank 0. Every message is a length and the bytes; rank 0
// checks that every rank takes part in the same exchange (the same block size).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap {

namespace {

constexpr uint32_t kMagic = 0x64'6f'6f'72;  // "door"
constexpr int kIoTimeoutMs = 300'000;        // a peer silent this long is gone

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// "host:port" -> an IPv4 address.
Result<sockaddr_in> parse_uid(const std::string& uid) {
  const size_t colon = uid.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == uid.size())
    return Status(Errc::kBadParam, "bootstrap: unique id '" + uid + "' is not host:port");
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const std::string host = uid.substr(0, colon), port = uid.substr(colon + 1);
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0 || res == nullptr)
    return Status(Errc::kBadParam, "bootstrap: cannot resolve '" + uid + "': " + gai_strerror(e));
  sockaddr_in a;
  std::memcpy(&a, res->ai_addr, sizeof a);
  freeaddrinfo(res);
  return a;
}

// Whole transfers, each wait bounded by kIoTimeoutMs; EOF is a peer that went away.
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

class Tcp final : public Bootstrap {
 public:
  Tcp(uint32_t rank, uint32_t size) : rank_(rank), size_(size), fds_(size, -1) {}
  ~Tcp() override {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  const char* name() const override { return "tcp"; }

  Status start(const sockaddr_in& root, const std::string& uid, double timeout_s) {
    return rank_ == 0 ? accept_all(root, uid, timeout_s) : connect_root(root, uid, timeout_s);
  }

  Status allgather(void* buf, size_t bytes) override {
    auto* b = static_cast<uint8_t*>(buf);
    if (rank_ != 0) {
      uint64_t len = bytes;
      if (Status s = io_all(fds_[0], &len, sizeof len, true, "rank 0"); !s) return s;
      if (Status s = io_all(fds_[0], b + rank_ * bytes, bytes, true, "rank 0"); !s) return s;
      return io_all(fds_[0], b, bytes * size_, false, "rank 0");
    }
    for (uint32_t r = 1; r < size_; ++r) {
      const std::string who = "rank " + std::to_string(r);
      uint64_t len = 0;
      if (Status s = io_all(fds_[r], &len, sizeof len, false, who); !s) return s;
      if (len != bytes)
        return Status(Errc::kBadState, "bootstrap: exchange of " + std::to_string(len) + " bytes by " + who + ", of " +
                                           std::to_string(bytes) + " by rank 0 (the ranks called different exchanges)");
      if (Status s = io_all(fds_[r], b + r * bytes, bytes, false, who); !s) return s;
    }
    for (uint32_t r = 1; r < size_; ++r)
      if (Status s = io_all(fds_[r], b, bytes * size_, true, "rank " + std::to_string(r)); !s) return s;
    return {};
  }

  Status barrier() override {
    std::vector<uint8_t> b(size_);
    return allgather(b.data(), 1);
  }

 private:
  Status accept_all(sockaddr_in root, const std::string& uid, double timeout_s) {
    const int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) return Status(Errc::kInternal, sys_error("bootstrap: socket"));
    const int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{lfd};
    if (bind(lfd, reinterpret_cast<sockaddr*>(&root), sizeof root) != 0 || listen(lfd, int(size_)) != 0)
      return Status(Errc::kBadState, sys_error("bootstrap: rank 0 cannot listen at " + uid));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (uint32_t joined = 1; joined < size_;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      pollfd pf{lfd, POLLIN, 0};
      if (left <= 0 || poll(&pf, 1, int(left)) == 0)
        return Status(Errc::kBadState, "bootstrap: rank 0 at " + uid + ": " + std::to_string(joined) + " of " + std::to_string(size_) +
                                           " ranks joined within " + std::to_string(int(timeout_s)) + " s");
      const int fd = accept(lfd, nullptr, nullptr);
      if (fd < 0) continue;
      uint32_t hello[3];
      if (Status s = io_all(fd, hello, sizeof hello, false, "a joining rank"); !s) {
        close(fd);
        return s;
      }
      const uint32_t r = hello[1];
      if (hello[0] != kMagic || hello[2] != size_ || r == 0 || r >= size_ || fds_[r] >= 0) {
        close(fd);
        return Status(Errc::kBadParam, "bootstrap: rank 0 at " + uid + ": a process joined as rank " + std::to_string(r) + " of " +
                                           std::to_string(hello[2]) + " (this job has " + std::to_string(size_) + " ranks" +
                                           (hello[0] != kMagic ? ", and it is not a doorbell bootstrap" : "") + ")");
      }
      fds_[r] = fd;
      ++joined;
    }
    return {};
  }

  Status connect_root(sockaddr_in root, const std::string& uid, double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) return Status(Errc::kInternal, sys_error("bootstrap: socket"));
      if (connect(fd, reinterpret_cast<sockaddr*>(&root), sizeof root) == 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fds_[0] = fd;
        const uint32_t hello[3] = {kMagic, rank_, size_};
        return io_all(fd, const_cast<uint32_t*>(hello), sizeof hello, true, "rank 0");
      }
      const std::string why = std::strerror(errno);
      close(fd);
      if (std::chrono::steady_clock::now() >= deadline)
        return Status(Errc::kBadState, "bootstrap: rank " + std::to_string(rank_) + " could not reach rank 0 at " + uid + ": " + why +
                                           " (tried for " + std::to_string(int(timeout_s)) + " s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  uint32_t rank_, size_;
  std::vector<int> fds_;  // rank 0: one per rank (its own unused); others: [0] is rank 0
};

}  // namespace

Result<std::unique_ptr<Bootstrap>> tcp(const std::string& uid, uint32_t rank, uint32_t size, double timeout_s) {
  if (size == 0 || rank >= size)
    return Status(Errc::kBadParam, "bootstrap: rank " + std::to_string(rank) + " of a job of " + std::to_string(size));
  Result<sockaddr_in> root = parse_uid(uid);
  if (!root) return root.status();
  auto b = std::make_unique<Tcp>(rank, size);
  if (Status s = b->start(*root, uid, timeout_s); !s) return s;
  return std::unique_ptr<Bootstrap>(std::move(b));
}

Result<std::string> tcp_unique_id(const std::string& host) {
  std::string h = host;
  if (h.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    h = name;
    if (!parse_uid(h + ":1")) h = "127.0.0.1";  // a hostname that does not resolve: loopback
  }
  Result<sockaddr_in> a = parse_uid(h + ":0");
  if (!a) return a.status();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status(Errc::kInternal, sys_error("bootstrap: socket"));
  socklen_t len = sizeof *a;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&*a), sizeof *a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&*a), &len) == 0;
  const std::string err = ok ? "" : sys_error("bootstrap: no free port on " + h);
  close(fd);  // rank 0 binds it again (SO_REUSEADDR)
  if (!ok) return Status(Errc::kNoResource, err);
  return h + ":" + std::to_string(ntohs(a->sin_port));
}

}  // namespace doorbell::bootstrap
