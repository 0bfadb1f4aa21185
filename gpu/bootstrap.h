// A local bootstrap for GPU programs that run as several processes on one host: a launcher
// forks the ranks before any CUDA call (a CUDA context does not survive fork), maps host memory
// every rank shares, and connects each pair of ranks with a socket for handles, unique ids and
// barriers. Stands in for the MPI bootstrap of the real-client work (issue 16).
#pragma once

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace doorbell::gpu {

class Bootstrap {
 public:
  int rank = 0, nranks = 0;
  void* shared = nullptr;  // the shared host memory (page-aligned: cudaHostRegister takes it)
  uint64_t shared_bytes = 0;

  void send(int peer, const void* p, uint64_t n) const {
    for (uint64_t done = 0; done < n;) {
      errno = 0;
      const ssize_t k = ::write(fd_[peer], static_cast<const char*>(p) + done, n - done);
      if (k <= 0) die("write to rank", peer);
      done += uint64_t(k);
    }
  }
  void recv(int peer, void* p, uint64_t n) const {
    for (uint64_t done = 0; done < n;) {
      errno = 0;
      const ssize_t k = ::read(fd_[peer], static_cast<char*>(p) + done, n - done);
      if (k <= 0) die("read from rank", peer);  // the peer exited
      done += uint64_t(k);
    }
  }
  template <class T>
  void send(int peer, const T& v) const { send(peer, &v, sizeof v); }
  template <class T>
  T recv(int peer) const {
    T v;
    recv(peer, &v, sizeof v);
    return v;
  }
  void barrier() const {
    const char b = 0;
    for (int p = 0; p < nranks; ++p)
      if (p != rank) send(p, &b, 1);
    for (int p = 0; p < nranks; ++p)
      if (p != rank) (void)recv<char>(p);
  }

  // Maps the shared memory and lets `init` fill it, then runs body(bootstrap) in `n` forked
  // ranks and waits for them; the exit status is 0 only if every rank returned 0.
  static int launch(int n, uint64_t shared_bytes, const std::function<void(void*)>& init,
                    const std::function<int(Bootstrap&)>& body) {
    void* shm = ::mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) die("mmap of the shared memory", -1);
    init(shm);
    std::vector<std::vector<int>> fds(n, std::vector<int>(n, -1));
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair", -1);
        fds[a][b] = sv[0], fds[b][a] = sv[1];
      }
    std::fflush(stdout);
    std::vector<pid_t> kids;
    for (int r = 0; r < n; ++r) {
      const pid_t pid = ::fork();
      if (pid < 0) die("fork", -1);
      if (pid == 0) {
        Bootstrap b;
        b.rank = r, b.nranks = n, b.shared = shm, b.shared_bytes = shared_bytes;
        b.fd_ = fds[r];
        for (int a = 0; a < n; ++a)  // keep only this rank's ends
          for (int c = 0; c < n; ++c)
            if (a != r && fds[a][c] >= 0) ::close(fds[a][c]);
        const int rc = body(b);
        std::fflush(stdout);
        std::_Exit(rc);
      }
      kids.push_back(pid);
    }
    for (auto& row : fds)
      for (int fd : row)
        if (fd >= 0) ::close(fd);
    int status = 0;
    for (pid_t k : kids) {
      int ws = 0;
      if (::waitpid(k, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) status = 1;
    }
    return status;
  }

 private:
  [[noreturn]] static void die(const char* what, int peer) {
    const char* why = errno != 0 ? std::strerror(errno) : "the peer closed the connection";
    if (peer >= 0) std::fprintf(stderr, "bootstrap: %s %d failed: %s\n", what, peer, why);
    else std::fprintf(stderr, "bootstrap: %s failed: %s\n", what, why);
    std::_Exit(1);
  }
  std::vector<int> fd_;
};

}  // namespace doorbell::gpu
