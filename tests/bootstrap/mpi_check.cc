// Run by mpirun (ctest bootstrap_mpirun_2): the environment names the MPI bootstrap; blocks go
// all-to-all over it and messages point to point (tests/bootstrap/messages.h), and a message
// of another size is an error that leaves the next one whole; then rank 0 makes a TCP unique
// id, hands it out over MPI, and the same exchange and messages run over TCP between the
// processes. Exit 0 and one line when all hold.
#include <cstdio>
#include <cstring>
#include <vector>

#include "host/bootstrap/bootstrap.h"
#include "tests/bootstrap/messages.h"

using namespace doorbell::bootstrap;

namespace {
bool exchange(Bootstrap& b) {
  std::vector<uint64_t> buf(b.size() * 2);
  buf[b.rank() * 2] = 0xd00b'e11'0000ull + b.rank(), buf[b.rank() * 2 + 1] = b.size();
  if (doorbell::Status s = b.allgather(buf.data(), 16); !s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), false;
  for (uint32_t q = 0; q < b.size(); ++q)
    if (buf[q * 2] != 0xd00b'e11'0000ull + q || buf[q * 2 + 1] != b.size())
      return std::fprintf(stderr, "rank %u: block %u wrong\n", b.rank(), q), false;
  if (!b.barrier()) return false;
  const std::string wrong = testing::messages_wrong(b, (1 << 20) + 3);
  if (!wrong.empty()) return std::fprintf(stderr, "%s (%s)\n", wrong.c_str(), b.name()), false;
  return true;
}

// Rank 0 sends 8 bytes and then 4 to rank 1, which asks for 16 and then 4.
bool mismatch_is_an_error(Bootstrap& b) {
  if (b.rank() == 0) return b.send(1, uint64_t(5)).is_ok() && b.send(1, uint32_t(6)).is_ok();
  if (b.rank() != 1) return true;
  uint8_t buf[16];
  const doorbell::Status s = b.recv(0, buf, sizeof buf);
  if (s.code() != doorbell::Errc::kBadState || s.message().find("rank 0 sent 8 bytes, rank 1 expected 16") == std::string::npos)
    return std::fprintf(stderr, "%s: a message of another size gave '%s'\n", b.name(), s.to_string().c_str()), false;
  const doorbell::Result<uint32_t> next = b.recv<uint32_t>(0);
  if (!next || *next != 6) return std::fprintf(stderr, "%s: the message after the wrong-sized one is lost\n", b.name()), false;
  return true;
}
}  // namespace

int main() {
  auto m = from_env();
  if (!m) return std::fprintf(stderr, "%s\n", m.status().to_string().c_str()), 1;
  Bootstrap& b = **m;
  if (std::strcmp(b.name(), "mpi") != 0 || b.size() < 2) return std::fprintf(stderr, "not an MPI job of 2+ ranks (%s)\n", b.name()), 1;
  if (!exchange(b) || !mismatch_is_an_error(b)) return 1;
  char uid[64] = {};
  std::vector<char> ids(b.size() * sizeof uid);
  if (b.rank() == 0) {
    auto u = tcp_unique_id("127.0.0.1");
    if (!u) return std::fprintf(stderr, "%s\n", u.status().to_string().c_str()), 1;
    std::snprintf(ids.data(), sizeof uid, "%s", u->c_str());
  }
  if (!b.allgather(ids.data(), sizeof uid)) return 1;
  auto t = tcp(ids.data(), b.rank(), b.size(), 30);
  if (!t) return std::fprintf(stderr, "%s\n", t.status().to_string().c_str()), 1;
  if (!exchange(**t)) return 1;
  if (b.rank() == 0)
    std::printf("bootstrap: %u processes exchanged blocks and messages over mpi and over tcp (%s): OK\n", b.size(), ids.data());
  return 0;
}
