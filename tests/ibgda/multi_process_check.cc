// Run by mpirun (ctest ibgda_multi_process_mpirun_2): one PE per process, each with its own
// NIC models, the processes joined by the shared-memory links. Every process draws the same
// random IBGDA programs from the seed (sim/ibgda/program_draw.h: puts, gets, fetch-adds,
// adds and compare-swaps of any scope, one or two NICs per PE, QP- or PE-major, CPU proxy or
// not, counters near 2^16 / 2^32 / 2^63) and runs its own PE's threads under its own random
// schedule; run_program then checks, as in one process, the queue invariants, errors and
// hangs, every byte that landed in this process's memory, and the atomics on its words
// against the results every process saw. A failing run prints its seed and a replay line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "host/bootstrap/bootstrap.h"
#include "host/bootstrap/link_join.h"
#include "sim/ibgda/program_draw.h"

using namespace doorbell;
using namespace doorbell::ibgda;

namespace {

Program draw_program(uint64_t seed, uint32_t npes) {
  std::mt19937_64 rng(seed);
  auto draw = [&rng](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi - 1)(rng); };
  Program p;
  p.npes = npes;
  p.seed = seed;
  p.warps = draw(1, 3);
  p.lanes = draw(1, 4);
  p.stack.log_qp_depth = draw(2, 6);
  p.stack.num_requests_in_batch = 1u << draw(0, 6);
  p.stack.ibuf_slots = 1u << draw(0, 3);
  p.stack.num_rc_per_pe = draw(1, 3);
  p.stack.nics_per_pe = draw(1, 3);
  p.stack.pe_major = draw(0, 2) != 0;
  p.stack.cpu_proxy = draw(0, 2) != 0;
  p.stack.response_delay = draw(0, 2) * 20;
  auto pick = [&draw](uint32_t n) { return draw(0, n); };
  p.stack.start_index = draw_start_index(draw, pick);
  p.check_each_step = false;
  // Not put-with-signal: a thread waiting for another process's signal looks hung to this
  // process's scheduler (nothing here moves) while that process is still on its way to send it.
  draw_ops(p, draw(1, 41), draw, pick, kProgramSlot, kAllFamilies & ~kFamilySignal);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"IBGDA programs with one PE per process (run under mpirun)"};
  uint64_t seed = 1;
  uint32_t runs = 30;
  std::string plant = "none";
  app.add_option("--seed", seed, "the first program's seed");
  app.add_option("--runs", runs, "programs to run (seeds seed, seed + 1, ...)");
  app.add_option("--plant", plant, "a planted bug, to see the check find it")
      ->check(CLI::IsMember({"none", "cas_swapped", "dev0_keys", "no_idle_doorbell"}));
  CLI11_PARSE(app, argc, argv);

  auto b = bootstrap::from_env();
  if (!b) return std::fprintf(stderr, "%s\n", b.status().to_string().c_str()), 1;
  bootstrap::Bootstrap& boot = **b;
  const uint32_t me = boot.rank(), n = boot.size();
  auto links = mock_nic::join_links(boot);
  if (!links) return std::fprintf(stderr, "rank %u: %s\n", me, links.status().to_string().c_str()), 1;

  uint64_t ops = 0;
  for (uint64_t s = seed; s < seed + runs; ++s) {
    Program p = draw_program(s, n);
    p.stack.plant.cas_swapped = plant == "cas_swapped";
    p.stack.plant.dev0_keys = plant == "dev0_keys";
    p.stack.plant.no_idle_doorbell = plant == "no_idle_doorbell";
    gpu_sim::SchedOptions so;
    so.policy = s % 2 == 0 ? gpu_sim::Policy::kRandom : gpu_sim::Policy::kPct;
    so.seed = s * 1000 + me;  // each process its own schedule
    const std::string why = run_program(p, so, nullptr, {&boot, links->get()});
    // Every process stops at the first run any of them failed (else one would wait for the
    // others in the next run's set-up); each says what it saw.
    std::vector<uint8_t> failed(n);
    failed[me] = !why.empty();
    if (!boot.allgather(failed.data(), 1)) return 1;
    if (std::find(failed.begin(), failed.end(), 1) == failed.end()) {
      ops += p.ops.size();
      continue;
    }
    if (why.empty()) {
      std::printf("rank %u: seed %llu: passed here, failed in another process\n", me, (unsigned long long)s);
    } else {
      std::printf("rank %u: seed %llu (%u PEs, %u NICs each, %zu ops, %s): %s\nreplay: mpirun -np %u %s --seed %llu --runs 1%s\n", me,
                  (unsigned long long)s, n, p.stack.nics_per_pe, p.ops.size(), gpu_sim::policy_name(so.policy), why.c_str(), n, argv[0],
                  (unsigned long long)s, plant == "none" ? "" : (" --plant " + plant).c_str());
    }
    return 1;
  }
  if (!boot.barrier()) return 1;
  std::printf("rank %u: %u IBGDA programs (seeds %llu..%llu, %llu ops) over %u processes, one PE and its NICs each: bytes, atomics, "
              "invariants OK (%llu requests to the others' NICs, %llu served for them)\n",
              me, runs, (unsigned long long)seed, (unsigned long long)(seed + runs - 1), (unsigned long long)ops, n,
              (unsigned long long)(*links)->calls(), (unsigned long long)(*links)->served());
  return 0;
}
