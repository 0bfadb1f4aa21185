#include "tools/replay_cmd.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "scenarios/replay/parse.h"
#include "scenarios/replay/replay.h"

namespace doorbell::tools {

namespace {
scenario::ReplayOptions options(std::optional<uint64_t> seed, const std::string& schedule) {
  scenario::ReplayOptions o;
  o.seed = seed;
  if (!schedule.empty()) o.schedule = schedule;
  return o;
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
  for (const scenario::Scenario& s : scs) {
    scenario::ReplayOptions o = options(c.seed, c.schedule);
    o.progress = isatty(2) != 0;
    if (!c.trace.empty()) o.trace = &trace;
    scenario::ReplayResult r = scenario::replay(s, o);
    std::printf("%s", r.summary.c_str());
    if (!r.met && !r.detail.empty()) std::printf("%s\n", r.detail.c_str());
    if (!r.met)
      std::printf("replay: doorbell replay %s --seed %llu --schedule %s\n", s.file.c_str(),
                  (unsigned long long)r.report["seed"].get<uint64_t>(), r.report["schedule"].get<std::string>().c_str());
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

int run_explore(const std::string& file, uint64_t seeds, const std::string& schedule) {
  Result<scenario::Scenario> s = scenario::parse_file(file);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.status().message().c_str());
    return 2;
  }
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    scenario::ReplayResult r = scenario::replay(*s, options(seed, schedule));
    if (!r.met) {
      std::printf("%s: seed %llu: %s (expected %s)\n%s\nreplay: doorbell replay %s --seed %llu --schedule %s\n", s->name.c_str(),
                  (unsigned long long)seed, r.outcome.c_str(), r.report["expected"].get<std::string>().c_str(), r.detail.c_str(),
                  file.c_str(), (unsigned long long)seed, r.report["schedule"].get<std::string>().c_str());
      return 1;
    }
  }
  std::printf("%s: %llu seeds, every one met its expectation\n", s->name.c_str(), (unsigned long long)seeds);
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
