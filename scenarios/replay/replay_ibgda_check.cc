// The IBGDA run's data checks beyond the one runner's bytes (sim/ibgda/workload.h): phantom
// transfers against the NICs' records, and the atomics with the words the scenario expects.
#include <algorithm>

#include "scenarios/replay/replay_ibgda.h"

namespace doorbell::scenario {

using namespace doorbell::ibgda;

// Phantom memory: every generated message must appear in the NICs' records as pieces that
// cover exactly its destination, each from the matching source bytes; explicit puts and
// gets likewise.
std::string IbgdaReplay::check_phantom() {
  std::string bad;
  std::vector<mock_nic::PhantomCopy> log, want;
  for (uint32_t pe = 0; pe < sc.pes; ++pe)
    for (uint32_t d = 0; d < w.stack.nics_per_pe; ++d)
      log.insert(log.end(), world->nic(pe, d).phantom_log().begin(), world->nic(pe, d).phantom_log().end());
  for (const auto& per : gen.by_pe)
    for (const Msg& m : per)
      want.push_back({reinterpret_cast<uint64_t>(world->at(m.to, wl.msg_recv + m.dst)),
                      reinterpret_cast<uint64_t>(world->at(m.from, wl.msg_send + m.src)), m.len});
  auto by_dst = [](const auto& x, const auto& y) { return x.dst < y.dst; };
  std::sort(log.begin(), log.end(), by_dst);
  std::sort(want.begin(), want.end(), by_dst);
  size_t i = 0;
  for (const auto& m : want) {
    uint64_t done = 0;
    while (done < m.len && i < log.size() && log[i].dst == m.dst + done && log[i].src == m.src + done) done += log[i++].len;
    if (done != m.len) {
      bad = "a generated message of " + std::to_string(m.len) + " bytes arrived as " + std::to_string(done);
      break;
    }
  }
  // Explicit puts and gets: the records inside each op's destination slot come from the
  // matching source bytes and add up to its bytes times its count.
  for (uint32_t pe = 0; pe < sc.pes && bad.empty(); ++pe)
    for (uint64_t t = 0; t < threads && bad.empty(); ++t)
      for (size_t j = 0; j < w.ops.size() && bad.empty(); ++j) {
        const Op& o = w.ops[j];
        if (o.pe != pe || !owns_slot(o, t, wl.shape)) continue;
        if (o.kind != OpKind::kPut && o.kind != OpKind::kGet) continue;
        const uint64_t sl = wl.slot_at(t, j);
        const auto d = reinterpret_cast<uint64_t>(world->at(o.kind == OpKind::kPut ? o.target : pe, sl));
        const auto from = reinterpret_cast<uint64_t>(world->at(o.kind == OpKind::kPut ? pe : o.target, wl.src + o.src));
        uint64_t got = 0;
        for (auto it = std::lower_bound(log.begin(), log.end(), mock_nic::PhantomCopy{d, 0, 0}, by_dst); it != log.end() && it->dst < d + o.bytes;
             ++it) {
          if (it->src - from != it->dst - d) got = ~0ull >> 1;  // from the wrong source bytes
          got += it->len;
        }
        if (got != o.bytes * o.count) {
          bad = "op " + std::to_string(j) + " of pe " + std::to_string(pe) + " thread " + std::to_string(t) + ": " +
                std::to_string(o.bytes * o.count) + " bytes expected in its destination, the NICs moved " +
                (got > (~0ull >> 2) ? std::string("some from the wrong source") : std::to_string(got));
        }
      }
  phantom_transfers = log.size();
  return bad;
}

// Atomics: some order of them explains every result and final value; then the values the
// scenario states.
std::string IbgdaReplay::check_atomics() {
  if (std::string bad = run_->check_atomics(); !bad.empty()) return bad;
  for (const ExpectWord& e : sc.expect.words)
    if (const uint64_t v = *reinterpret_cast<const uint64_t*>(world->at(e.pe, wl.words + e.word * 8)); v != e.equals)
      return "pe " + std::to_string(e.pe) + " word " + std::to_string(e.word) + ": expected " + std::to_string(e.equals) + ", saw " +
             std::to_string(v);
  return {};
}

}  // namespace doorbell::scenario
