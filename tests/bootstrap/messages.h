// Point-to-point messages, the same check for every backend (threads over TCP, forked ranks,
// mpirun): a ring of large messages, values to every rank, order, and messages kept apart
// from the exchanges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap::testing {

// Byte i of rank r's ring message.
inline uint8_t ring_byte(uint32_t r, size_t i) { return uint8_t(i * 131 + r * 17 + i / 251); }

// Rank r sends `bytes` to rank r + 1 and takes rank r - 1's (rank 0 sends first, the others
// receive first: no cycle of sends waiting on each other, whatever the size); then sends every
// other rank two values and takes two from each (small: they pass even when all send first),
// in order; then sends rank 0 a value before a barrier that rank 0 passes before receiving it.
// Returns what went wrong, or "".
inline std::string messages_wrong(Bootstrap& b, size_t bytes) {
  const uint32_t me = b.rank(), n = b.size();
  const std::string who = "rank " + std::to_string(me) + ": ";
  auto failed = [&](const char* what, const Status& s) { return who + what + ": " + s.to_string(); };
  if (n < 2) return who + "a job of one has nobody to send to";
  const uint32_t next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<uint8_t> mine(bytes), got(bytes);
  for (size_t i = 0; i < bytes; ++i) mine[i] = ring_byte(me, i);
  if (me == 0) {
    if (Status s = b.send(next, mine.data(), bytes); !s) return failed("ring send", s);
    if (Status s = b.recv(prev, got.data(), bytes); !s) return failed("ring recv", s);
  } else {
    if (Status s = b.recv(prev, got.data(), bytes); !s) return failed("ring recv", s);
    if (Status s = b.send(next, mine.data(), bytes); !s) return failed("ring send", s);
  }
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != ring_byte(prev, i)) return who + "ring byte " + std::to_string(i) + " from rank " + std::to_string(prev) + " wrong";

  for (uint32_t q = 0; q < n; ++q)
    for (uint64_t k = 0; k < 2 && q != me; ++k)
      if (Status s = b.send(q, uint64_t(me * 1000 + q * 10 + k)); !s) return failed("send", s);
  for (uint32_t q = 0; q < n; ++q)
    for (uint64_t k = 0; k < 2 && q != me; ++k) {
      Result<uint64_t> v = b.recv<uint64_t>(q);
      if (!v) return failed("recv", v.status());
      if (*v != q * 1000 + me * 10 + k)
        return who + "message " + std::to_string(k) + " from rank " + std::to_string(q) + " is " + std::to_string(*v);
    }

  if (me != 0)
    if (Status s = b.send(0, uint32_t(me)); !s) return failed("send before the barrier", s);
  if (Status s = b.barrier(); !s) return failed("barrier", s);
  for (uint32_t q = 1; q < n && me == 0; ++q) {
    Result<uint32_t> v = b.recv<uint32_t>(q);
    if (!v) return failed("recv after the barrier", v.status());
    if (*v != q) return who + "the message sent before the barrier by rank " + std::to_string(q) + " is " + std::to_string(*v);
  }
  return "";
}

}  // namespace doorbell::bootstrap::testing
