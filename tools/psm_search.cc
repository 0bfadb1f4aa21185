#include "tools/psm_search.h"

#include <cstdio>
#include <string>
#include <vector>

#include "sim/p2p/psm_run.h"

namespace doorbell::tools {

namespace {

using p2p::PsmRunConfig;
using p2p::psm::FirstCredit;

// The seed's stalled state: the receiver near step 325 (the sender's recvMem.tail 333 is its
// credit, done + 8), the sender's head ~380.
constexpr uint64_t kSeedTail = 333, kSeedHead = 380, kSeedRecvPos = 325;

struct Outcome {
  std::string what;       // completes | hang at step 0 | hang mid-call | refused a slot | broken invariant | wrong data
  uint64_t distance = ~0ull;
  p2p::PsmStall stall;
};

uint64_t absdiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

Outcome classify(const p2p::PsmRunResult& r) {
  Outcome o;
  o.stall = r.stall;
  if (r.failure.empty()) o.what = "completes";
  else if (r.failure.find("the receive proxy found a slot size") != std::string::npos) o.what = "refused a slot";
  else if (r.run.outcome == gpu_sim::Outcome::kHang && (r.stall.connection.empty() || r.stall.send_transmitted + r.stall.recv_transmitted == 0))
    o.what = "hang at step 0";
  else if (r.run.outcome == gpu_sim::Outcome::kHang) o.what = "hang mid-call";
  else if (r.failure.rfind("invariant: ", 0) == 0) o.what = "broken invariant";
  else o.what = "wrong data";
  if (o.what == "hang mid-call")
    o.distance = absdiff(r.stall.send_sees_tail, kSeedTail) + absdiff(r.stall.recv_sees_head, kSeedHead) +
                 absdiff(r.stall.recv_base + r.stall.recv_transmitted, kSeedRecvPos);
  return o;
}

std::string describe(const PsmRunConfig& c) {
  const auto& ch = c.choices;
  static const char* const credit[] = {"set_up", "receiver_start", "none"};
  return "window " + std::to_string(ch.window) + ", shm " + p2p::shm_scope_name(c.shm) + ", step_counter " +
         (ch.step_at_done ? "at_done" : "at_start") + ", overlap_calls " + (c.overlap_calls ? "yes" : "no") + ", first_credit " +
         credit[int(ch.first_credit)] + ", offsets " + (ch.offsets_per_args ? "per_args" : "per_sub") + ", receiver_on_free_slot " +
         (ch.recv_waits_for_size ? "waits" : "refuses");
}

// The runs of one pattern: each seed's outcome; `best` the closest mid-call stall.
std::string runs(PsmRunConfig c, bool alltoall, const PsmSearchOptions& o, Outcome* best, bool timed) {
  c.alltoall = alltoall;
  c.bytes_per_peer = (o.gib_per_gpu << 30) / (alltoall ? o.gpus : 1);
  std::string out;
  for (uint64_t s = 1; s <= (timed ? 1 : o.seeds); ++s) {
    gpu_sim::SchedOptions so;
    so.seed = s;
    so.policy = timed ? gpu_sim::Policy::kTimed : gpu_sim::Policy::kRandom;
    const Outcome k = classify(p2p::run_psm(c, so));
    if (best && k.distance < best->distance) *best = k;
    out += (out.empty() ? "" : ", ") + k.what;
  }
  return out;
}

}  // namespace

int run_psm_search(const PsmSearchOptions& o) {
  std::printf("psm search: %u GPUs, %llu GiB per GPU, 512 KiB steps, 2 channels per GPU pair, random schedule seeds 1..%llu\n", o.gpus,
              (unsigned long long)o.gib_per_gpu, (unsigned long long)o.seeds);
  std::printf("seed 004's signature: alltoall stalls mid-call, the sender sees recvMem.tail %llu while the receiver sees sendMem.head ~%llu; "
              "sendrecv of the same size completes\n\n",
              (unsigned long long)kSeedTail, (unsigned long long)kSeedHead);
  std::vector<PsmRunConfig> matches;
  uint32_t n = 0;
  for (uint32_t w : {8u, 16u}) {
    if (o.window != 0 && w != o.window) continue;
    for (p2p::ShmScope shm : {p2p::ShmScope::kConnection, p2p::ShmScope::kRankPair, p2p::ShmScope::kUnorderedPair, p2p::ShmScope::kPairChannel})
      for (bool at_done : {false, true})
        for (bool overlap : {false, true})
          for (FirstCredit fc : {FirstCredit::kSetUp, FirstCredit::kReceiverStart, FirstCredit::kNone})
            for (bool per_args : {false, true})
              for (bool waits : {false, true}) {
                PsmRunConfig c;
                c.gpus = o.gpus, c.channels = 2, c.calls = overlap ? 2 : 1, c.phantom = true, c.copy_bytes_per_step = 1 << 20;
                c.shm = shm, c.overlap_calls = overlap;
                c.choices.window = w, c.choices.step_bytes = 512 << 10, c.choices.step_at_done = at_done, c.choices.first_credit = fc;
                c.choices.offsets_per_args = per_args, c.choices.recv_waits_for_size = waits;
                Outcome best;
                const std::string a = runs(c, true, o, &best, false), s = runs(c, false, o, nullptr, false);
                std::printf("%3u  %s\n     alltoall: %s | sendrecv: %s\n", ++n, describe(c).c_str(), a.c_str(), s.c_str());
                if (!best.stall.connection.empty()) std::printf("     closest stall (distance %llu): %s\n", (unsigned long long)best.distance, best.stall.line().c_str());
                if (!best.stall.connection.empty() && s.find_first_not_of("completes, ") == std::string::npos) matches.push_back(c);
                std::fflush(stdout);
              }
  }
  std::printf("\n%zu configurations stall the alltoall mid-call while the sendrecv completes; on the timed schedule:\n", matches.size());
  for (const PsmRunConfig& c : matches) {
    Outcome best;
    const std::string a = runs(c, true, o, &best, true), s = runs(c, false, o, nullptr, true);
    std::printf("  %s\n     alltoall: %s | sendrecv: %s\n", describe(c).c_str(), a.c_str(), s.c_str());
    if (!best.stall.connection.empty()) std::printf("     stall (distance %llu): %s\n", (unsigned long long)best.distance, best.stall.line().c_str());
  }
  return 0;
}

}  // namespace doorbell::tools
