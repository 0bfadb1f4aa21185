#include "host/bootstrap/fork.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "host/bootstrap/internal/socket_bootstrap.h"

namespace doorbell::bootstrap {

namespace {

using internal::rank_name;
using internal::sys_error;

// One rank's ends: star[q] (rank 0: to rank q; the others: [0], to rank 0) and mesh[q], the
// pair carrying messages both ways between this rank and rank q.
struct Ends {
  std::vector<int> star, mesh;
};

class Forked final : public internal::SocketBootstrap {
 public:
  Forked(uint32_t rank, uint32_t size, Ends ends) : SocketBootstrap(rank, size), mesh_(std::move(ends.mesh)) {
    star_ = std::move(ends.star);
  }
  ~Forked() override { internal::close_all(mesh_); }
  const char* name() const override { return "fork"; }

 private:
  Result<int> p2p_fd(uint32_t peer, bool) override { return mesh_[peer]; }
  std::vector<int> mesh_;
};

// A socket pair between ranks a and b: a's end in of_a[b], b's in of_b[a].
Status connect_pair(std::vector<int>& of_a, std::vector<int>& of_b, uint32_t a, uint32_t b) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Status(Errc::kNoResource, sys_error("bootstrap: socketpair"));
  of_a[b] = sv[0], of_b[a] = sv[1];
  return {};
}

void close_all(std::vector<Ends>& ends) {
  for (Ends& e : ends) internal::close_all(e.star), internal::close_all(e.mesh);
}

// Rank `r`'s life in its own process: never returns.
[[noreturn]] void run_rank(uint32_t r, std::vector<Ends>& ends, SharedMemory shared,
                           const std::function<int(Bootstrap&, SharedMemory)>& body) {
  for (uint32_t q = 0; q < ends.size(); ++q)  // keep only this rank's ends
    if (q != r) internal::close_all(ends[q].star), internal::close_all(ends[q].mesh);
  int rc = 1;
  try {
    Forked b(r, uint32_t(ends.size()), std::move(ends[r]));
    rc = body(b, shared);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bootstrap: rank %u threw: %s\n", r, e.what());
  } catch (...) {
    std::fprintf(stderr, "bootstrap: rank %u threw\n", r);
  }
  std::fflush(stdout);
  std::_Exit(rc == 0 ? 0 : rc > 0 && rc < 256 ? rc : 1);  // never unwinds into the parent's code
}

// What became of rank `r`, or "" if it exited with 0.
std::string reap(pid_t pid, uint32_t r) {
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return sys_error(rank_name(r) + ": waitpid");
  if (WIFEXITED(ws)) return WEXITSTATUS(ws) == 0 ? "" : rank_name(r) + " exited with " + std::to_string(WEXITSTATUS(ws));
  if (WIFSIGNALED(ws)) return rank_name(r) + " was killed by signal " + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")";
  return rank_name(r) + " ended oddly";
}

}  // namespace

Status fork_ranks(uint32_t n, size_t shared_bytes, const std::function<void(SharedMemory)>& init,
                  const std::function<int(Bootstrap&, SharedMemory)>& body) {
  if (n == 0) return Status(Errc::kBadParam, "bootstrap: fork_ranks of no ranks");
  SharedMemory shared{nullptr, shared_bytes};
  if (shared_bytes > 0) {
    shared.data = mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared.data == MAP_FAILED)
      return Status(Errc::kNoResource, sys_error("bootstrap: mmap of " + std::to_string(shared_bytes) + " shared bytes"));
  }
  struct Unmap {
    SharedMemory m;
    ~Unmap() {
      if (m.data != nullptr) munmap(m.data, m.bytes);
    }
  } unmap{shared};
  if (init) init(shared);

  std::vector<Ends> ends(n, Ends{std::vector<int>(n, -1), std::vector<int>(n, -1)});
  Status made;
  for (uint32_t a = 0; a < n && made; ++a)
    for (uint32_t b = a + 1; b < n && made; ++b) {
      if (a == 0) made = connect_pair(ends[a].star, ends[b].star, a, b);
      if (made) made = connect_pair(ends[a].mesh, ends[b].mesh, a, b);
    }
  if (!made) {
    close_all(ends);
    return made;
  }

  std::fflush(stdout);  // else each rank would print the parent's buffered lines again
  std::vector<pid_t> kids;
  std::string failed;
  for (uint32_t r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) run_rank(r, ends, shared, body);
    if (pid < 0) {  // the ranks forked so far see the missing ones' ends close, and fail
      failed = sys_error("fork of " + rank_name(r));
      break;
    }
    kids.push_back(pid);
  }
  close_all(ends);
  for (uint32_t r = 0; r < kids.size(); ++r)
    if (std::string why = reap(kids[r], r); !why.empty()) failed += (failed.empty() ? "" : "; ") + why;
  if (!failed.empty()) return Status(Errc::kInternal, "bootstrap: fork_ranks: " + failed);
  return {};
}

}  // namespace doorbell::bootstrap
