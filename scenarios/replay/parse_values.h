// Reading one value of a scenario file: a key's integer in a range, a power of two, a bool, one
// of named options or an enum's names, and the mapping's known keys. Every mistake throws
// Bad with the node's line; parse_text turns it into `file:line: message`.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace doorbell::scenario {

// A parse error at a node's line.
struct Bad {
  std::string msg;
  int line;
};

// The node's line, counted from 1 (yaml-cpp marks an empty document at line -1: line 1).
int line_of(const YAML::Mark& m);
[[noreturn]] void fail(const YAML::Node& n, const std::string& msg);

// `map` is a mapping of only these keys (else the unknown one is named, with the known).
void only_keys(const YAML::Node& map, const char* where, std::initializer_list<const char*> known);
void only_keys(const YAML::Node& map, const char* where, const std::vector<std::string>& known);
uint64_t uint_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi);
uint32_t pow2_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi);
bool bool_of(const YAML::Node& n, const std::string& key);
// Which of `options` the node names (its index); else fail, listing them.
size_t index_of(const YAML::Node& n, const std::string& key, const std::vector<std::string>& options);
std::string choice_of(const YAML::Node& n, const std::string& key, std::initializer_list<const char*> options);

// The enum value E(i) whose name(E(i)) the node holds, for i < count.
template <class E, class Name>
E enum_of(const YAML::Node& n, const std::string& key, uint32_t count, Name name) {
  std::vector<std::string> options;
  for (uint32_t i = 0; i < count; ++i) options.push_back(name(E(i)));
  return E(index_of(n, key, options));
}

}  // namespace doorbell::scenario
