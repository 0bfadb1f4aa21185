// The `doorbell` command-line program.
#include <CLI/CLI.hpp>

#include "tools/demo.h"
#include "tools/devices.h"
#include "tools/psm_search.h"
#include "tools/replay_cmd.h"

int main(int argc, char** argv) {
  CLI::App app{"doorbell: GPU-initiated communication (IBGDA / NVLS / P2P) simulation and verification"};
  app.require_subcommand(1);

  doorbell::tools::DemoOptions demo;
  CLI::App* d = app.add_subcommand("demo", "drive the software mlx5 NIC with IBGDA-style batches and report");
  d->add_option("--wqes", demo.wqes, "RDMA WRITEs to execute")->check(CLI::PositiveNumber);
  d->add_option("--size", demo.size, "bytes per WRITE")->check(CLI::Range(1u, 1u << 20));
  d->add_option("--batch", demo.batch, "WQEs per doorbell (one CQ_UPDATE each)");
  d->add_option("--log-sq", demo.log_sq, "log2 of the send ring size in WQEBBs");
  d->add_flag("--cross-nic", demo.cross_nic, "connect to a QP on a second NIC model");

  doorbell::tools::DevicesOptions dev;
  CLI::App* v = app.add_subcommand("devices", "list RDMA devices with their ports and capabilities");
  v->add_option("--hca-list", dev.hca_list, "keep these devices (mlx5_0:1,mlx5_1) or exclude them (^mlx5_2)");
  v->add_option("--near-gpu", dev.near_gpu, "PCI bus id or sysfs path of a GPU: report the closest device");

  doorbell::tools::ReplayCmd rep;
  uint64_t rep_seed = 0;
  CLI::App* r = app.add_subcommand("replay", "replay scenario files on the CPU model and check their expectations");
  r->add_option("files", rep.files, "scenario files (YAML)")->required();
  CLI::Option* seed_opt = r->add_option("--seed", rep_seed, "override the scenarios' seed");
  r->add_option("--schedule", rep.schedule, "override the schedule")->check(CLI::IsMember({"random", "pct", "timed", "preempt"}));
  r->add_option("--memory-model", rep.memory_model, "override the memory model (sc: sequentially consistent; weak: store buffers, stale loads)")
      ->check(CLI::IsMember({"sc", "weak"}));
  r->add_option("--races", rep.races, "the happens-before race detector over byte ranges (default on)")->check(CLI::IsMember({"on", "off"}));
  r->add_option("--report", rep.report, "write the JSON report here");
  r->add_option("--trace", rep.trace, "write a Chrome / Perfetto trace (queue indices, doorbells) here");
  r->add_flag("--verbose", rep.verbose, "print per-QP tables and every hang report, not only a line per scenario");

  std::string ex_file, ex_schedule, ex_memory;
  uint64_t ex_seeds = 100;
  CLI::App* x = app.add_subcommand("explore", "replay one scenario under many seeds; stop at the first that misses");
  x->add_option("file", ex_file, "scenario file")->required();
  x->add_option("--seeds", ex_seeds, "how many seeds (1..N); with --schedule preempt, at most every one-preemption schedule");
  x->add_option("--schedule", ex_schedule,
                "override the schedule; preempt: a systematic search of every schedule with one preemption")
      ->check(CLI::IsMember({"random", "pct", "timed", "preempt"}));
  x->add_option("--memory-model", ex_memory, "override the memory model")->check(CLI::IsMember({"sc", "weak"}));
  std::string ex_races;
  x->add_option("--races", ex_races, "the race detector (default on)")->check(CLI::IsMember({"on", "off"}));
  unsigned ex_jobs = 0;  // every core, shared among this host's ranks
  x->add_option("--jobs", ex_jobs,
                "threads running seeds, per rank under mpirun (default: every core, shared among a host's ranks); "
                "the result is the serial one")
      ->check(CLI::PositiveNumber);

  uint64_t lit_runs = 2000;
  std::string lit_memory = "weak";
  CLI::App* lt = app.add_subcommand("litmus", "run the litmus suite (MP, SB, LB at CTA / GPU / system scope) on the CPU model");
  lt->add_option("--runs", lit_runs, "runs per cell (seeds 1..N)")->check(CLI::PositiveNumber);
  lt->add_option("--memory-model", lit_memory, "memory model")->check(CLI::IsMember({"sc", "weak"}));

  std::string list_dir = DOORBELL_SCENARIO_DIR;
  CLI::App* l = app.add_subcommand("list", "the scenario library, one line each");
  l->add_option("dir", list_dir, "directory of scenario files");

  doorbell::tools::PsmSearchOptions ps;
  CLI::App* p = app.add_subcommand("psm-search", "search the kernel-less P2P transport's open choices for seed 004's 4 GB alltoall signature");
  p->add_option("--gpus", ps.gpus, "GPUs")->check(CLI::Range(3u, 16u));
  p->add_option("--gib", ps.gib_per_gpu, "GiB per GPU")->check(CLI::Range(1u, 64u));
  p->add_option("--seeds", ps.seeds, "random-schedule seeds per configuration and pattern")->check(CLI::Range(1u, 100u));
  p->add_option("--window", ps.window, "FIFO window (8 or 16; default both)")->check(CLI::IsMember({8u, 16u}));

  CLI11_PARSE(app, argc, argv);
  if (r->parsed()) {
    if (seed_opt->count() != 0) rep.seed = rep_seed;
    return doorbell::tools::run_replay(rep);
  }
  if (x->parsed()) return doorbell::tools::run_explore(ex_file, ex_seeds, ex_schedule, ex_memory, ex_jobs, ex_races);
  if (lt->parsed()) return doorbell::tools::run_litmus(lit_runs, lit_memory);
  if (l->parsed()) return doorbell::tools::run_list(list_dir);
  if (d->parsed()) return doorbell::tools::run_demo(demo);
  if (v->parsed()) return doorbell::tools::run_devices(dev);
  if (p->parsed()) return doorbell::tools::run_psm_search(ps);
  return 0;
}
