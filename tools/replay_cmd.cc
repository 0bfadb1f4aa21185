#include "tools/replay_cmd.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "hw/gpu_sim/litmus.h"
#include "tools/crash_note.h"
#include "scenarios/replay/parse.h"
#include "scenarios/replay/replay.h"

namespace doorbell::tools {

namespace {
scenario::ReplayOptions options(std::optional<uint64_t> seed, const std::string& schedule, const std::string& memory) {
  scenario::ReplayOptions o;
  o.seed = seed;
  if (!schedule.empty()) o.schedule = schedule;
  if (!memory.empty()) o.memory_model = memory;
  return o;
}

// The command that replays one run exactly: from a run's report, or before it runs.
std::string replay_line(const std::string& file, uint64_t seed, const std::string& schedule, const std::string& memory) {
  return "doorbell replay " + file + " --seed " + std::to_string(seed) + " --schedule " + schedule + " --memory-model " + memory;
}
std::string replay_line(const std::string& file, const nlohmann::ordered_json& report) {
  return replay_line(file, report["seed"].get<uint64_t>(), report["schedule"].get<std::string>(),
                     report["memory_model"].get<std::string>());
}
std::string replay_line(const scenario::Scenario& s, const scenario::ReplayOptions& o) {
  const scenario::RunSpec spec = scenario::run_spec(s, o);
  return replay_line(s.file, spec.seed, spec.schedule, spec.memory_model);
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
    scenario::ReplayOptions o = options(c.seed, c.schedule, c.memory_model);
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

int run_explore(const std::string& file, uint64_t seeds, const std::string& schedule, const std::string& memory_model,
                unsigned jobs) {
  Result<scenario::Scenario> s = scenario::parse_file(file);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.status().message().c_str());
    return 2;
  }
  crash_note_install();
  // The preempt search: seed 0 runs the schedule without a preemption and counts its
  // scheduling points; seeds 1.. then cover one preemption at each point to each agent.
  if (schedule == "preempt" || (schedule.empty() && s->schedule == "preempt")) {
    const scenario::ReplayResult base = scenario::replay(*s, options(0, "preempt", memory_model));
    const uint64_t points = base.report.value("points", uint64_t(0)), all = points * scenario::kPreemptChoices;
    std::printf("%s: preempt search: %llu scheduling points x %llu agents = %llu schedules%s\n", s->name.c_str(),
                (unsigned long long)points, (unsigned long long)scenario::kPreemptChoices, (unsigned long long)all,
                seeds < all ? (", the first " + std::to_string(seeds)).c_str() : "");
    seeds = std::min(seeds, all);
  }
  // Workers take seeds in increasing order and skip those above the least miss found so far:
  // every seed below it runs, so the least miss is the one a serial run stops at.
  std::atomic<uint64_t> next{1}, first_miss{UINT64_MAX};
  std::mutex mu;
  scenario::ReplayResult miss;
  auto work = [&] {
    for (uint64_t seed; (seed = next.fetch_add(1)) <= seeds && seed < first_miss.load();) {
      const scenario::ReplayOptions o = options(seed, schedule, memory_model);
      arm_crash_note(*s, o);
      scenario::ReplayResult r = scenario::replay(*s, o);
      crash_note_set("");
      if (r.met) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (seed < first_miss.load()) first_miss = seed, miss = std::move(r);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < std::max(jobs, 1u); ++j) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (first_miss.load() != UINT64_MAX) {
    std::printf("%s: seed %llu: %s (expected %s)\n%s\nreplay: %s\n", s->name.c_str(), (unsigned long long)first_miss.load(),
                sim::run_kind_name(miss.outcome), miss.report["expected"].get<std::string>().c_str(), miss.detail.c_str(),
                replay_line(file, miss.report).c_str());
    return 1;
  }
  std::printf("%s: %llu seeds, every one met its expectation\n", s->name.c_str(), (unsigned long long)seeds);
  return 0;
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
