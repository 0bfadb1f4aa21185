#include "scenarios/replay/generators.h"

#include <algorithm>

namespace doorbell::scenario {

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

Generated generate(const IbgdaWorkload& w, uint32_t pes) {
  Generated g;
  g.by_pe.resize(pes);
  auto add = [&](const Msg& m) {
    g.by_pe[m.from].push_back(m);
    ++g.messages;
    g.bytes += m.len;
  };
  if (const uint64_t s = w.alltoall.bytes_per_pe; s != 0) {
    const uint64_t block = s / pes, msg = w.alltoall.message_bytes;
    g.send_bytes = g.recv_bytes = s;
    for (uint32_t p = 0; p < pes; ++p)
      for (uint32_t q = 0; q < pes; ++q)
        for (uint64_t off = 0; off < block; off += msg) add({p, q, q * block + off, p * block + off, std::min(msg, block - off)});
  }
  if (const uint32_t e = w.dispatch.experts; e != 0) {
    const uint32_t per_pe = e / pes, tokens = w.dispatch.tokens, topk = w.dispatch.topk;
    const uint64_t tb = w.dispatch.token_bytes, base = g.recv_bytes;  // after an alltoall's region, if any
    const bool fwd = w.dispatch.forward, back = w.dispatch.combine;
    // Dispatch reads tokens (send [0, tokens)) and fills expert slots (recv [base, +slots));
    // combine reads expert slots (kept in the send buffer, at `cs`) and fills topk landing
    // areas per token (recv, at `cl`).
    const uint64_t slots = uint64_t(e) * tokens * tb, landing = uint64_t(tokens) * topk * tb;
    const uint64_t cs = fwd ? (uint64_t(tokens) * tb + 4095) / 4096 * 4096 : base, cl = base + (fwd ? slots : 0);
    g.send_bytes = std::max<uint64_t>(g.send_bytes, back ? cs + slots : uint64_t(tokens) * tb);
    g.recv_bytes = cl + (back ? landing : 0);
    for (const bool combine : {false, true}) {
      if (combine ? !back : !fwd) continue;
      for (uint32_t p = 0; p < pes; ++p) {
        uint64_t rng = 0x5eedull * 1000003 + p;  // routing is part of the workload, not the schedule
        for (uint32_t t = 0; t < tokens; ++t) {
          std::vector<uint32_t> chosen;
          while (chosen.size() < topk) {
            const uint32_t x = uint32_t(splitmix(rng) % e);
            if (std::find(chosen.begin(), chosen.end(), x) == chosen.end()) chosen.push_back(x);
          }
          for (uint32_t k = 0; k < chosen.size(); ++k) {
            const uint32_t x = chosen[k], q = x / per_pe, local = x % per_pe;
            const uint64_t slot = ((uint64_t(local) * pes + p) * tokens + t) * tb;
            // Combine sends each expert's result back from that slot to the token's owner,
            // one landing area per top-k choice.
            if (combine) add({q, p, cs + slot, cl + (uint64_t(t) * topk + k) * tb, tb});
            else add({p, q, uint64_t(t) * tb, base + slot, tb});
          }
        }
      }
    }
  }
  return g;
}

}  // namespace doorbell::scenario
