#include "tools/replay_cmd.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "host/bootstrap/bootstrap.h"
#include "hw/gpu_sim/litmus.h"
#include "tools/crash_note.h"
#include "scenarios/replay/parse.h"
#include "scenarios/replay/replay.h"

namespace doorbell::tools {

namespace {
scenario::ReplayOptions options(std::optional<uint64_t> seed, const std::string& schedule, const std::string& memory,
                                const std::string& races) {
  scenario::ReplayOptions o;
  o.seed = seed;
  if (!schedule.empty()) o.schedule = schedule;
  if (!memory.empty()) o.memory_model = memory;
  if (!races.empty()) o.races = races == "on";
  return o;
}

// The command that replays one run exactly: from a run's report, or before it runs.
std::string replay_line(const std::string& file, uint64_t seed, const std::string& schedule, const std::string& memory, bool races) {
  return "doorbell replay " + file + " --seed " + std::to_string(seed) + " --schedule " + schedule + " --memory-model " + memory +
         (races ? "" : " --races off");
}
std::string replay_line(const std::string& file, const nlohmann::ordered_json& report) {
  return replay_line(file, report["seed"].get<uint64_t>(), report["schedule"].get<std::string>(),
                     report["memory_model"].get<std::string>(), report.value("races", true));
}
std::string replay_line(const scenario::Scenario& s, const scenario::ReplayOptions& o) {
  const scenario::RunSpec spec = scenario::run_spec(s, o);
  return replay_line(s.file, spec.seed, spec.schedule, spec.memory_model, spec.races);
}

// Before a run: what a crash in it must leave on stderr. DOORBELL_CRASH_TEST=abort then dies
// there on purpose (the test that the note is written).
void arm_crash_note(const scenario::Scenario& s, const scenario::ReplayOptions& o) {
  crash_note_set("\ndoorbell: crashed while running " + s.name + "\nreplay: " + replay_line(s, o) + "\n");
  static const bool crash_test = [] {
    const char* e = std::getenv("DOORBELL_CRASH_TEST");
    return e != nullptr && std::string(e) == "abort";
  }();
  if (crash_test) std::abort();
}
}  // namespace

int run_replay(const ReplayCmd& c) {
  std::vector<scenario::Scenario> scs;
  for (const std::string& f : c.files) {  // parse everything first: a bad file runs nothing
    Result<scenario::Scenario> s = scenario::parse_file(f);
    if (!s) {
      std::fprintf(stderr, "%s\n", s.status().message().c_str());
      return 2;
    }
    scs.push_back(std::move(*s));
  }
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  nlohmann::ordered_json trace;
  int missed = 0;
  crash_note_install();
  for (const scenario::Scenario& s : scs) {
    scenario::ReplayOptions o = options(c.seed, c.schedule, c.memory_model, c.races);
    o.progress = isatty(2) != 0;
    if (!c.trace.empty()) o.trace = &trace;
    // The name first, flushed, so that a crash in the run names it.
    const std::string head = s.name + ": ";
    std::printf("%s", head.c_str());
    std::fflush(stdout);
    arm_crash_note(s, o);
    scenario::ReplayResult r = scenario::replay(s, o);
    crash_note_set("");
    // A line per scenario; the tables and reports behind --verbose (a miss always shows why).
    std::string line = c.verbose ? r.summary : r.summary.substr(0, r.summary.find('\n') + 1);
    if (line.rfind(head, 0) == 0) line.erase(0, head.size());
    std::printf("%s", line.c_str());
    if ((!r.met || c.verbose) && !r.detail.empty()) std::printf("%s\n", r.detail.c_str());
    if (!r.met) std::printf("replay: %s\n", replay_line(s.file, r.report).c_str());
    missed += !r.met;
    all.push_back(r.report);
  }
  std::printf("%zu scenarios: %zu met their expectation, %d did not\n", scs.size(), scs.size() - size_t(missed), missed);
  if (!c.trace.empty()) std::ofstream(c.trace) << trace.dump() << "\n";
  if (!c.report.empty()) {
    std::ofstream out(c.report);
    out << (all.size() == 1 ? all[0] : all).dump(2) << "\n";
  }
  return missed == 0 ? 0 : 1;
}

namespace {
// The least seed of a set of seeds that missed its expectation, and its run (seed UINT64_MAX: none).
struct Miss {
  uint64_t seed = UINT64_MAX;
  scenario::ReplayResult r;
};

// Whose seeds are whose: seeds come in periods of as many seeds as the ranks have threads
// together, and a rank owns as many consecutive seeds of each period as it has threads, after
// those of the ranks below it (alone: every seed). Who runs a seed does not depend on timing.
struct Share {
  uint64_t period, first, count;
  // This rank's i-th seed from period `from` on (increasing in i).
  uint64_t seed(uint64_t from, uint64_t i) const { return (from + i / count) * period + first + i % count + 1; }
};

// This rank's seeds from period `from` up to seed `hi`, on `jobs` threads. Workers take seeds
// in increasing order and skip those above the least miss found so far: every seed below it
// runs, so the least miss is the one a serial run stops at.
Miss run_seeds(const scenario::Scenario& s, const Share& share, uint64_t from, uint64_t hi, const std::string& schedule,
               const std::string& memory_model, const std::string& races, unsigned jobs) {
  std::atomic<uint64_t> next{0}, first_miss{UINT64_MAX};
  std::mutex mu;
  Miss miss;
  auto work = [&] {
    for (uint64_t seed; (seed = share.seed(from, next.fetch_add(1))) <= hi && seed < first_miss.load();) {
      const scenario::ReplayOptions o = options(seed, schedule, memory_model, races);
      arm_crash_note(s, o);
      scenario::ReplayResult r = scenario::replay(s, o);
      crash_note_set("");
      if (r.met) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (seed < first_miss.load()) first_miss = seed, miss.seed = seed, miss.r = std::move(r);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < std::max(jobs, 1u); ++j) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return miss;
}

// What explore prints for its answer.
std::string miss_text(const scenario::Scenario& s, const std::string& file, const Miss& m) {
  return s.name + ": seed " + std::to_string(m.seed) + ": " + sim::run_kind_name(m.r.outcome) + " (expected " +
         m.r.report["expected"].get<std::string>() + ")\n" + m.r.detail + "\nreplay: " + replay_line(file, m.r.report) + "\n";
}

uint64_t saturating_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// An exchange between the ranks failed: say so on this rank's stderr (exit status 2).
int exchange_failed(const bootstrap::Bootstrap& b, const Status& st) {
  std::fprintf(stderr, "doorbell explore: rank %u of %u: %s\n", b.rank(), b.size(), st.to_string().c_str());
  return 2;
}

// Every core of this host, shared among the job's ranks on it (found by their host names).
Result<unsigned> cores_of_this_rank(bootstrap::Bootstrap& b) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (b.size() == 1) return cores;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::vector<uint8_t> mine(host, host + std::strlen(host));
  Result<std::vector<std::vector<uint8_t>>> all = bootstrap::allgatherv(b, mine);
  if (!all) return all.status();
  const auto here = unsigned(std::count(all->begin(), all->end(), mine));
  return std::max(1u, cores / std::max(1u, here));
}

// After a round, what each rank tells the others: its least miss and how long its seeds took.
struct RoundNote {
  uint64_t miss;
  uint64_t ns;
};
constexpr uint64_t kShortRoundNs = 250'000'000;  // a round shorter than this doubles the next
constexpr uint64_t kLongRoundNs = 1'000'000'000;  // one longer than this halves it
}  // namespace

int run_explore(const std::string& file, uint64_t seeds, const std::string& schedule, const std::string& memory_model,
                unsigned jobs, const std::string& races) {
  // The job's ranks (mpirun, the TCP unique id, or this process alone: bootstrap::from_env).
  Result<std::unique_ptr<bootstrap::Bootstrap>> boot = bootstrap::from_env();
  if (!boot) {
    std::fprintf(stderr, "doorbell explore: %s\n", boot.status().to_string().c_str());
    return 2;
  }
  bootstrap::Bootstrap& b = **boot;
  const uint32_t me = b.rank(), ranks = b.size();
  Result<scenario::Scenario> s = scenario::parse_file(file);
  // Every rank parses the file, and they agree before any runs: a rank that cannot read it
  // must not leave the others waiting. Rank 0 says why (or the rank that failed alone).
  std::vector<uint8_t> parsed(ranks);
  parsed[me] = s.is_ok();
  if (Status st = b.allgather(parsed.data(), 1); !st) return exchange_failed(b, st);
  if (!s && (me == 0 || parsed[0] != 0)) std::fprintf(stderr, "%s\n", s.status().message().c_str());
  if (std::find(parsed.begin(), parsed.end(), 0) != parsed.end()) return 2;
  // Threads per rank, known to every rank: they weigh its share of the seeds.
  if (jobs == 0) {
    Result<unsigned> cores = cores_of_this_rank(b);
    if (!cores) return exchange_failed(b, cores.status());
    jobs = *cores;
  }
  std::vector<uint32_t> threads(ranks);
  threads[me] = jobs;
  if (Status st = b.allgather(threads.data(), sizeof(uint32_t)); !st) return exchange_failed(b, st);
  crash_note_install();
  // The preempt search: seed 0 runs the schedule without a preemption and counts its
  // scheduling points; seeds 1.. then cover one preemption at each point to each agent.
  if (schedule == "preempt" || (schedule.empty() && s->schedule == "preempt")) {
    const scenario::ReplayResult base = scenario::replay(*s, options(0, "preempt", memory_model, races));
    const uint64_t points = base.report.value("points", uint64_t(0)), all = points * scenario::kPreemptChoices;
    if (me == 0)
      std::printf("%s: preempt search: %llu scheduling points x %llu agents = %llu schedules%s\n", s->name.c_str(),
                  (unsigned long long)points, (unsigned long long)scenario::kPreemptChoices, (unsigned long long)all,
                  seeds < all ? (", the first " + std::to_string(seeds)).c_str() : "");
    seeds = std::min(seeds, all);
  }
  // Rounds: each rank runs its seeds of `scale` periods, then the ranks exchange their least
  // misses. The first round with a miss ends the search: every seed below the least of them
  // ran on some rank and met its expectation, so that seed is the serial answer. Rounds grow
  // while they are short, so an early miss ends the search soon and a long one exchanges
  // seldom. Alone: one round.
  Share share{0, 0, jobs};
  for (uint32_t q = 0; q < ranks; ++q) share.period += threads[q], share.first += q < me ? threads[q] : 0;
  uint64_t from = 0, scale = ranks == 1 ? seeds / share.period + 1 : 1, least = UINT64_MAX;
  Miss mine;
  std::vector<RoundNote> notes(ranks);
  while (saturating_mul(from, share.period) < seeds && least == UINT64_MAX) {
    const uint64_t hi = std::min(seeds, saturating_mul(std::min(from, UINT64_MAX - scale) + scale, share.period));
    const auto t0 = std::chrono::steady_clock::now();
    Miss m = run_seeds(*s, share, from, hi, schedule, memory_model, races, jobs);
    notes[me] = {m.seed, uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count())};
    if (Status st = b.allgather(notes.data(), sizeof(RoundNote)); !st) return exchange_failed(b, st);
    uint64_t slowest = 0;
    for (const RoundNote& n : notes) least = std::min(least, n.miss), slowest = std::max(slowest, n.ns);
    if (m.seed == least) mine = std::move(m);
    from += scale;
    if (slowest < kShortRoundNs) scale = saturating_mul(scale, 2);
    else if (slowest > kLongRoundNs && scale > 1) scale /= 2;
  }
  std::string text;
  if (least == UINT64_MAX) {
    text = s->name + ": " + std::to_string(seeds) + " seeds, every one met its expectation\n";
  } else {
    // The rank that ran the least miss hands its report to rank 0, which prints it.
    if (mine.seed == least) text = miss_text(*s, file, mine);
    if (ranks > 1) {
      Result<std::vector<std::vector<uint8_t>>> all = bootstrap::allgatherv(b, std::vector<uint8_t>(text.begin(), text.end()));
      if (!all) return exchange_failed(b, all.status());
      text.clear();
      for (const std::vector<uint8_t>& t : *all) text.append(t.begin(), t.end());
    }
  }
  if (me == 0) std::printf("%s", text.c_str()), std::fflush(stdout);
  // The others leave after rank 0 has written: mpirun ends a job whose first process to leave
  // exits non-zero, and rank 0's answer must be out by then.
  if (Status st = b.barrier(); !st) return exchange_failed(b, st);
  return least == UINT64_MAX ? 0 : 1;
}

int run_litmus(uint64_t runs, const std::string& memory_model) {
  const auto m = memory_model == "sc" ? gpu_sim::MemoryModel::kSc : gpu_sim::MemoryModel::kWeak;
  std::printf("weak outcomes in %llu runs (seeds 1..%llu) per cell; (forbidden): the PTX memory model forbids it there\n\n%s",
              (unsigned long long)runs, (unsigned long long)runs, gpu_sim::litmus_table(runs, 1, m).c_str());
  return 0;
}

int run_list(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  if (ec) {
    std::fprintf(stderr, "doorbell list: cannot read %s: %s\n", dir.c_str(), ec.message().c_str());
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    Result<scenario::Scenario> s = scenario::parse_file(f.string());
    if (!s) std::printf("%-28s  (malformed: %s)\n", f.filename().c_str(), s.status().message().c_str());
    else std::printf("%-28s  %s\n", s->name.c_str(), s->description.c_str());
  }
  return 0;
}

}  // namespace doorbell::tools
