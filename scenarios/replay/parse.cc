// The file's root and the sections every workload shares (topology, run, expect); the
// workload's own sections are read by parse_ibgda.cc and parse_p2p_nvls.cc. Which workload a
// file holds is decided first, from its `workload:` mapping, so that a section another
// workload owns is refused at its line instead of being ignored.
#include "scenarios/replay/parse.h"

#include <fstream>
#include <sstream>

#include "scenarios/replay/parse_sections.h"
#include "scenarios/replay/parse_values.h"

namespace doorbell::scenario {

namespace {

// The key node of `key` in `map` (its line is the key's, not the value's).
YAML::Node key_node(const YAML::Node& map, const char* key) {
  for (const auto& kv : map)
    if (kv.first.as<std::string>() == key) return kv.first;
  return map;
}

// The device-level workload a `workload:` mapping names (p2p or nvls), or "" for IBGDA; a
// device-level workload is its section alone.
std::string device_workload(const YAML::Node& w) {
  if (!w) return "";
  only_keys(w, "workload", {"ctas", "warps", "lanes", "ops", "alltoall", "dispatch", "p2p", "nvls"});
  const std::string dev = w["p2p"] ? "p2p" : w["nvls"] ? "nvls" : "";
  for (const auto& kv : w)
    if (!dev.empty() && kv.first.as<std::string>() != dev)
      fail(kv.first, "'" + kv.first.as<std::string>() + "' does not go with '" + dev + "': a workload is IBGDA ops and generators, p2p or nvls");
  return dev;
}

// A section only the IBGDA workload has, in a file whose workload is `dev`.
void refuse_unless_ibgda(const YAML::Node& map, const char* key, const std::string& dev) {
  if (!dev.empty() && map[key]) fail(key_node(map, key), "'" + std::string(key) + "' is for IBGDA workloads, not for " + dev);
}

void parse_topology(const YAML::Node& t, Scenario& sc, const std::string& dev) {
  only_keys(t, "topology", {"pes", "wire_gbps", "pcie_gbps"});
  if (t["pes"]) sc.pes = uint32_t(uint_of(t["pes"], "pes", 1, 1024));
  // The NIC's link rates (0: the cost model's).
  refuse_unless_ibgda(t, "wire_gbps", dev);
  refuse_unless_ibgda(t, "pcie_gbps", dev);
  IbgdaWorkload* iw = std::get_if<IbgdaWorkload>(&sc.work);
  if (t["wire_gbps"]) iw->wire_gbps = double(uint_of(t["wire_gbps"], "wire_gbps", 1, 100000));
  if (t["pcie_gbps"]) iw->pcie_gbps = double(uint_of(t["pcie_gbps"], "pcie_gbps", 1, 100000));
}

void parse_workload(const YAML::Node& root, Scenario& sc, const std::string& dev) {
  const YAML::Node w = root["workload"];
  if (dev == "p2p") sc.work = parse_p2p(w["p2p"], sc);
  if (dev == "nvls") sc.work = parse_nvls(w["nvls"], sc);
  for (const char* k : {"stack", "planted", "faults"}) refuse_unless_ibgda(root, k, dev);
  if (!dev.empty()) return;
  IbgdaWorkload& iw = std::get<IbgdaWorkload>(sc.work);
  if (root["stack"]) parse_stack(root["stack"], iw.stack);
  if (root["planted"]) parse_planted(root["planted"], iw.stack.plant);
  if (!w) fail(root, "missing 'workload'");
  parse_ibgda_workload(w, sc, iw);
  if (root["faults"]) parse_faults(root["faults"], sc.pes, iw);
}

void parse_run(const YAML::Node& r, Scenario& sc, const std::string& dev) {
  only_keys(r, "run", {"schedule", "seed", "response_delay", "compare", "memory"});
  if (r["memory"]) sc.memory_model = choice_of(r["memory"], "memory", {"sc", "weak"});
  refuse_unless_ibgda(r, "compare", dev);
  refuse_unless_ibgda(r, "response_delay", dev);
  IbgdaWorkload* iw = std::get_if<IbgdaWorkload>(&sc.work);
  if (r["compare"]) iw->compare_cpu_proxy = choice_of(r["compare"], "compare", {"cpu_proxy"}) == "cpu_proxy";
  if (r["schedule"]) sc.schedule = choice_of(r["schedule"], "schedule", {"random", "pct", "timed", "preempt"});
  if (r["seed"]) sc.seed = uint_of(r["seed"], "seed", 0, ~0ull);
  if (r["response_delay"]) iw->stack.response_delay = uint32_t(uint_of(r["response_delay"], "response_delay", 0, 1000));
}

void parse_expect(const YAML::Node& e, Scenario& sc, const std::string& dev) {
  only_keys(e, "expect", {"result", "syndrome", "waits_on", "max_sim_time_us", "words"});
  Expectation& x = sc.expect;
  refuse_unless_ibgda(e, "words", dev);  // counter words are the IBGDA atomics'
  if (const YAML::Node ws = e["words"]) {
    if (!ws.IsSequence()) fail(ws, "'words' must be a list of {pe, word, equals}");
    for (const YAML::Node& n : ws) {
      only_keys(n, "an expected word", {"pe", "word", "equals"});
      if (!n["equals"]) fail(n, "an expected word needs 'equals'");
      ExpectWord ew;
      if (n["pe"]) ew.pe = uint32_t(uint_of(n["pe"], "pe", 0, sc.pes - 1));
      if (n["word"]) ew.word = uint32_t(uint_of(n["word"], "word", 0, kCounterWords - 1));
      ew.equals = uint_of(n["equals"], "equals", 0, ~0ull);
      if (sc.phantom) fail(n, "expected words need real memory, and this scenario has 'memory: phantom'");
      x.words.push_back(ew);
    }
  }
  if (e["max_sim_time_us"]) x.max_sim_us = double(uint_of(e["max_sim_time_us"], "max_sim_time_us", 1, 1ull << 40));
  if (!e["result"]) fail(e, "expect needs 'result'");
  x.result = Expect(index_of(e["result"], "result", {"completes", "hangs", "errors"}));  // Expect's order
  if (e["syndrome"]) x.syndrome = e["syndrome"].Scalar();
  if (e["waits_on"]) x.waits_on = e["waits_on"].Scalar();
  if (x.result == Expect::kErrors && x.syndrome.empty()) fail(e, "an expected error needs 'syndrome'");
}

Scenario parse_root(const YAML::Node& root, const std::string& file) {
  Scenario sc;
  sc.file = file;
  if (!root.IsMap()) fail(root, "a scenario is a mapping (name, stack, workload, expect, ...)");
  only_keys(root, "the scenario", {"name", "description", "topology", "memory", "stack", "planted", "workload", "faults", "run", "expect"});
  if (root["memory"]) sc.phantom = choice_of(root["memory"], "memory", {"real", "phantom"}) == "phantom";
  if (!root["name"]) fail(root, "missing 'name'");
  sc.name = root["name"].Scalar();
  if (root["description"]) sc.description = root["description"].Scalar();
  const std::string dev = device_workload(root["workload"]);
  if (root["topology"]) parse_topology(root["topology"], sc, dev);
  parse_workload(root, sc, dev);
  if (root["run"]) parse_run(root["run"], sc, dev);
  if (!root["expect"]) fail(root, "missing 'expect' (completes, hangs or errors)");
  parse_expect(root["expect"], sc, dev);
  return sc;
}

}  // namespace

Result<Scenario> parse_text(const std::string& text, const std::string& file) {
  try {
    return parse_root(YAML::Load(text), file);
  } catch (const Bad& b) {
    return Status(Errc::kBadParam, file + ":" + std::to_string(b.line) + ": " + b.msg);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kBadParam, file + ":" + std::to_string(line_of(e.mark)) + ": " + e.msg);
  }
}

Result<Scenario> parse_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(Errc::kNotFound, path + ":0: cannot open the scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_text(ss.str(), path);
}

}  // namespace doorbell::scenario
