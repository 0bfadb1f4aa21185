#include "host/verbs_shim/faults.h"

#include <cstdlib>
#include <fstream>

namespace doorbell::shim {

namespace {

Status bad(size_t item, const std::string& text, const std::string& why) {
  return Status(Errc::kBadParam, "DOORBELL_SHIM_FAULTS item " + std::to_string(item + 1) + " '" + text + "': " + why);
}

// A number for `key`: decimal, or 0x hex for counts and QP indices.
bool number(const std::string& v, double* out) {
  char* end = nullptr;
  *out = std::strtod(v.c_str(), &end);
  return !v.empty() && end != nullptr && *end == 0 && *out >= 0;
}

}  // namespace

Result<ShimFaults> parse_shim_faults(const std::string& spec, uint64_t seed) {
  if (!spec.empty() && spec[0] == '@') {  // a schedule file: each line an item
    std::ifstream f(spec.substr(1));
    if (!f) return Status(Errc::kBadParam, "DOORBELL_SHIM_FAULTS: cannot read " + spec.substr(1));
    std::string line, joined;
    for (int n = 1; std::getline(f, line); ++n) {
      if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      line.erase(0, line.find_first_not_of(" \t"));
      line.erase(line.find_last_not_of(" \t") + 1);
      if (line.empty()) continue;
      Result<ShimFaults> one = parse_shim_faults(line, seed);
      if (!one) return Status(Errc::kBadParam, spec.substr(1) + ":" + std::to_string(n) + ": " + one.status().message());
      joined += (joined.empty() ? "" : ";") + line;
    }
    Result<ShimFaults> all = parse_shim_faults(joined, seed);
    if (all) all->spec = joined;  // the repeat line works without the file
    return all;
  }
  ShimFaults out;
  out.spec = spec, out.seed = seed;
  size_t item = 0;
  for (size_t at = 0; at <= spec.size(); ++item) {
    const size_t semi = spec.find(';', at);
    const std::string text = spec.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
    at = semi == std::string::npos ? spec.size() + 1 : semi + 1;
    if (text.empty()) continue;
    const size_t colon = text.find(':');
    ShimFault f;
    if (!mock_nic::fault_kind_of(text.substr(0, colon), &f.kind)) {
      std::string known;
      for (uint32_t k = 0; k < mock_nic::kFaultKinds; ++k) known += std::string(k ? ", " : "") + mock_nic::fault_kind_name(mock_nic::FaultKind(k));
      return bad(item, text, "unknown fault '" + text.substr(0, colon) + "' (known: " + known + ")");
    }
    if (f.kind == mock_nic::kStaleRkey || f.kind == mock_nic::kStaleDcKey)
      return bad(item, text, std::string(mock_nic::fault_kind_name(f.kind)) +
                                 " needs keys the model hands a peer; a shim client's keys are its own (not modelled)");
    for (size_t k = colon == std::string::npos ? text.size() : colon + 1; k < text.size();) {
      const size_t comma = text.find(',', k);
      const std::string kv = text.substr(k, comma == std::string::npos ? std::string::npos : comma - k);
      k = comma == std::string::npos ? text.size() : comma + 1;
      const size_t eq = kv.find('=');
      double v = 0;
      if (eq == std::string::npos || !number(kv.substr(eq + 1), &v)) return bad(item, text, "'" + kv + "' is not key=number");
      const std::string key = kv.substr(0, eq);
      if (key == "at_us") f.at_ns = v * 1000;
      else if (key == "for_us") f.for_ns = v * 1000;
      else if (key == "count") f.count = uint32_t(v);
      else if (key == "qp") f.qp = uint32_t(v);
      else return bad(item, text, "unknown key '" + key + "' (at_us, for_us, count, qp)");
    }
    out.list.push_back(f);
  }
  return out;
}

}  // namespace doorbell::shim
