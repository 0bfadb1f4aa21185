// The TCP bootstrap: a star around rank 0 for the exchanges (rank 0 checks that every rank
// takes part in the same one), and direct connections for messages: every rank listens on a
// port of its own, announced in the first exchange, and a pair's first message in each
// direction opens that direction's connection (the sender connects, the receiver accepts), so
// no rank waits for another to call in and no relay is needed.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "host/bootstrap/bootstrap.h"
#include "host/bootstrap/internal/socket_bootstrap.h"

namespace doorbell::bootstrap {

namespace {

using internal::io_all;
using internal::kIoTimeoutMs;
using internal::rank_name;
using internal::sys_error;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x64'6f'6f'72;  // "door"

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

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

// A socket listening at `at` (port 0: any free one).
Result<int> listen_at(sockaddr_in at, uint32_t backlog, const std::string& who) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(Errc::kInternal, sys_error("bootstrap: socket"));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || listen(fd, int(backlog)) != 0) {
    const std::string err = sys_error("bootstrap: " + who + " cannot listen");
    close(fd);
    return Status(Errc::kBadState, err);
  }
  return fd;
}

// Waits (until `deadline`) for a connection on `lfd`, reads its hello and files it under the
// rank it names in `by_rank` (which `me`, the listener, is not). False: nobody came in time.
Result<bool> accept_one(int lfd, Clock::time_point deadline, uint32_t me, uint32_t size, std::vector<int>& by_rank,
                        const std::string& who) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  pollfd pf{lfd, POLLIN, 0};
  const int ready = left <= 0 ? 0 : poll(&pf, 1, int(std::min<int64_t>(left, kIoTimeoutMs)));
  if (ready == 0) return false;
  const int fd = ready < 0 ? -1 : accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return true;  // interrupted, or the connection went away: wait again
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  uint32_t hello[3];
  if (Status s = io_all(fd, hello, sizeof hello, false, "a connecting rank"); !s) {
    close(fd);
    return s;
  }
  const uint32_t r = hello[1];
  if (hello[0] != kMagic || hello[2] != size || r >= size || r == me || by_rank[r] >= 0) {
    close(fd);
    return Status(Errc::kBadParam, "bootstrap: " + who + ": a process connected as rank " + std::to_string(r) + " of " +
                                       std::to_string(hello[2]) + " (this job has " + std::to_string(size) + " ranks" +
                                       (hello[0] != kMagic ? ", and it is not a doorbell bootstrap" : "") + ")");
  }
  by_rank[r] = fd;
  return true;
}

// Connects to `to` (retrying until `deadline`: it may not listen yet) and says who this is.
Result<int> connect_to(const sockaddr_in& to, Clock::time_point deadline, uint32_t rank, uint32_t size, const std::string& who) {
  for (;;) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status(Errc::kInternal, sys_error("bootstrap: socket"));
    if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      uint32_t hello[3] = {kMagic, rank, size};
      if (Status s = io_all(fd, hello, sizeof hello, true, who); !s) {
        close(fd);
        return s;
      }
      return fd;
    }
    const std::string why = std::strerror(errno);
    close(fd);
    if (Clock::now() >= deadline) return Status(Errc::kBadState, "bootstrap: " + rank_name(rank) + " could not reach " + who + ": " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class Tcp final : public internal::SocketBootstrap {
 public:
  Tcp(uint32_t rank, uint32_t size, double timeout_s)
      : SocketBootstrap(rank, size), timeout_(timeout_s), out_(size, -1), in_(size, -1), addrs_(size) {}
  ~Tcp() override {
    internal::close_all(out_);
    internal::close_all(in_);
    if (listen_ >= 0) close(listen_);
  }
  const char* name() const override { return "tcp"; }

  // The star, then each rank's message listener, announced to all.
  Status start(const sockaddr_in& root, const std::string& uid) {
    const auto deadline = after(timeout_);
    sockaddr_in mine = root;  // rank 0 listens for messages where the others reached it
    if (rank_ == 0) {
      if (Status s = accept_all(root, uid, deadline); !s) return s;
    } else {
      Result<int> fd = connect_to(root, deadline, rank_, size_, "rank 0 at " + uid);
      if (!fd) return Status(fd.status().code(), fd.status().message() + " (tried for " + std::to_string(int(timeout_)) + " s)");
      star_[0] = *fd;
      socklen_t len = sizeof mine;  // the others reach this rank where it reached rank 0
      if (getsockname(star_[0], reinterpret_cast<sockaddr*>(&mine), &len) != 0)
        return Status(Errc::kInternal, sys_error("bootstrap: getsockname"));
    }
    mine.sin_port = 0;
    Result<int> l = listen_at(mine, size_, rank_name(rank_));
    if (!l) return l.status();
    listen_ = *l;
    socklen_t len = sizeof mine;
    if (getsockname(listen_, reinterpret_cast<sockaddr*>(&mine), &len) != 0)
      return Status(Errc::kInternal, sys_error("bootstrap: getsockname"));
    addrs_[rank_] = mine;
    return allgather(addrs_.data(), sizeof mine);
  }

 private:
  Status accept_all(const sockaddr_in& root, const std::string& uid, Clock::time_point deadline) {
    const std::string who = "rank 0 at " + uid;
    Result<int> lfd = listen_at(root, size_, who);
    if (!lfd) return lfd.status();
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{*lfd};
    for (;;) {
      const uint32_t joined = uint32_t(size_ - std::count(star_.begin() + 1, star_.end(), -1));
      if (joined == size_) return {};
      Result<bool> came = accept_one(*lfd, deadline, 0, size_, star_, who);
      if (!came) return came.status();
      if (!*came)
        return Status(Errc::kBadState, "bootstrap: " + who + ": " + std::to_string(joined) + " of " + std::to_string(size_) +
                                           " ranks joined within " + std::to_string(int(timeout_)) + " s");
    }
  }

  Result<int> p2p_fd(uint32_t peer, bool sending) override {
    if (sending) {
      if (out_[peer] < 0) {
        Result<int> fd = connect_to(addrs_[peer], after(timeout_), rank_, size_, rank_name(peer));
        if (!fd) return fd.status();
        out_[peer] = *fd;
      }
      return out_[peer];
    }
    const auto deadline = after(kIoTimeoutMs / 1000.0);
    while (in_[peer] < 0) {  // other ranks' first messages may come in before this peer's
      Result<bool> came = accept_one(listen_, deadline, rank_, size_, in_, rank_name(rank_));
      if (!came) return came.status();
      if (!*came)
        return Status(Errc::kInternal, "bootstrap: " + rank_name(rank_) + " waited " + std::to_string(kIoTimeoutMs / 1000) + " s for " +
                                           rank_name(peer) + "'s first message");
    }
    return in_[peer];
  }

  const double timeout_;
  int listen_ = -1;
  std::vector<int> out_, in_;       // the connection of this rank's messages to each rank, of each rank's to this one
  std::vector<sockaddr_in> addrs_;  // where each rank listens for messages
};

}  // namespace

Result<std::unique_ptr<Bootstrap>> tcp(const std::string& uid, uint32_t rank, uint32_t size, double timeout_s) {
  if (size == 0 || rank >= size)
    return Status(Errc::kBadParam, "bootstrap: rank " + std::to_string(rank) + " of a job of " + std::to_string(size));
  Result<sockaddr_in> root = parse_uid(uid);
  if (!root) return root.status();
  auto b = std::make_unique<Tcp>(rank, size, timeout_s);
  if (Status s = b->start(*root, uid); !s) return s;
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
