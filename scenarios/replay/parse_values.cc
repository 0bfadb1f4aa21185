#include "scenarios/replay/parse_values.h"

namespace doorbell::scenario {

int line_of(const YAML::Mark& m) { return m.line < 0 ? 1 : m.line + 1; }

void fail(const YAML::Node& n, const std::string& msg) { throw Bad{msg, line_of(n.Mark())}; }

namespace {
template <class List>
std::string listed(const List& options) {
  std::string list;
  for (const auto& o : options) list += std::string(list.empty() ? "" : ", ") + o;
  return list;
}
}  // namespace

void only_keys(const YAML::Node& map, const char* where, std::initializer_list<const char*> known) {
  only_keys(map, where, std::vector<std::string>(known.begin(), known.end()));
}

void only_keys(const YAML::Node& map, const char* where, const std::vector<std::string>& known) {
  if (!map.IsMap()) fail(map, std::string(where) + " must be a mapping");
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    bool ok = false;
    for (const std::string& c : known) ok |= k == c;
    if (!ok) fail(kv.first, "unknown key '" + k + "' in " + where + " (known: " + listed(known) + ")");
  }
}

uint64_t uint_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) {
  const std::string s = n.Scalar();
  if (!n.IsScalar() || s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    fail(n, "'" + key + "' must be a non-negative integer, not '" + (n.IsScalar() ? s : std::string("a ") + (n.IsMap() ? "mapping" : "list")) + "'");
  uint64_t v;
  try {
    v = std::stoull(s);
  } catch (...) {
    fail(n, "'" + key + "' is out of range");
  }
  if (v < lo || v > hi) fail(n, "'" + key + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " + s);
  return v;
}

uint32_t pow2_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) {
  const uint64_t v = uint_of(n, key, lo, hi);
  if ((v & (v - 1)) != 0) fail(n, "'" + key + "' must be a power of two, not " + std::to_string(v));
  return uint32_t(v);
}

bool bool_of(const YAML::Node& n, const std::string& key) {
  const std::string s = n.IsScalar() ? n.Scalar() : "";
  if (s == "true") return true;
  if (s == "false") return false;
  fail(n, "'" + key + "' must be true or false");
}

size_t index_of(const YAML::Node& n, const std::string& key, const std::vector<std::string>& options) {
  const std::string s = n.IsScalar() ? n.Scalar() : "";
  for (size_t i = 0; i < options.size(); ++i)
    if (s == options[i]) return i;
  fail(n, "'" + key + "' must be one of " + listed(options) + ", not '" + s + "'");
}

std::string choice_of(const YAML::Node& n, const std::string& key, std::initializer_list<const char*> options) {
  return *(options.begin() + index_of(n, key, std::vector<std::string>(options.begin(), options.end())));
}

}  // namespace doorbell::scenario
