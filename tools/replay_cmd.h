// `doorbell replay`, `doorbell explore`, `doorbell list`: scenario files from the command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doorbell::tools {

struct ReplayCmd {
  std::vector<std::string> files;
  std::optional<uint64_t> seed;
  std::string schedule;  // empty: the scenario's
  std::string memory_model;  // empty: the scenario's (sc | weak)
  std::string races;         // empty or "on": the race detector on; "off"
  std::string report;    // JSON report path
  std::string trace;     // Chrome / Perfetto trace path (one scenario)
  bool verbose = false;  // per-QP tables and every report, not only a line per scenario
};

// Exit status: 0 every expectation met, 1 one was not, 2 a scenario file is malformed.
int run_replay(const ReplayCmd& c);
// Seeds 1..n until one misses its expectation; prints the command that replays it. The seeds
// run on `jobs` threads (0: every core of the host, shared among its ranks), and over the
// ranks of a job launched by mpirun (host/bootstrap's from_env), and the answer is the serial
// one: the least seed that misses (every seed below it is run). Only rank 0 prints it; every
// rank returns the same exit status.
int run_explore(const std::string& file, uint64_t seeds, const std::string& schedule, const std::string& memory_model,
                unsigned jobs = 1, const std::string& races = "");
// The litmus suite on the CPU model (and the PTX verdict per cell).
int run_litmus(uint64_t runs, const std::string& memory_model);
// One line per scenario file in dir.
int run_list(const std::string& dir);

}  // namespace doorbell::tools
