#include "sim/ibgda/atomic_check.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace doorbell::ibgda {

namespace {

std::string n(uint64_t v) { return std::to_string(v); }

}  // namespace

// Adds in some order: the final value is their sum, and each fetched value is the sum of the
// adds ordered before it, so sorted by value each fetch leaves room for its own add.
std::string AtomicCheck::check_adds(const std::vector<Add>& adds, uint64_t final_value) {
  uint64_t sum = 0;
  std::vector<std::pair<uint64_t, uint64_t>> seen;  // (returned, added)
  for (const Add& a : adds) {
    sum += a.v;
    if (a.old) seen.push_back({*a.old, a.v});
  }
  if (sum != final_value) return "final value " + n(final_value) + ", but its adds sum to " + n(sum);
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) {
    const auto [old, v] = seen[i];
    if (i + 1 < seen.size() && old + v > seen[i + 1].first)
      return old == seen[i + 1].first ? "a fetch-add returned " + n(old) + " twice"
                                      : "fetch-adds returned " + n(old) + " (adding " + n(v) + ") and " + n(seen[i + 1].first) +
                                            ": no order of the adds gives both";
    if (old + v > final_value) return "a fetch-add returned " + n(old) + " (adding " + n(v) + "), beyond the final value " + n(final_value);
  }
  return {};
}

// Compare-swaps in some order: those that returned their compare value succeeded, each
// moving the word from compare to value, so they form one path from 0 to the final value (an
// Euler path); every failed one returned a value the word held.
std::string AtomicCheck::check_swaps(const std::vector<Cas>& cas, uint64_t final_value) {
  // A lost result leaves its success unknown: nothing to check against.
  if (std::any_of(cas.begin(), cas.end(), [](const Cas& c) { return !c.old; })) return {};
  std::map<uint64_t, int64_t> balance;  // out - in, per value
  std::multimap<uint64_t, uint64_t> edges;
  std::set<uint64_t> held{0};
  std::string list;
  for (const Cas& c : cas)
    if (*c.old == c.cmp) {
      ++balance[c.cmp], --balance[c.v];
      edges.insert({c.cmp, c.v});
      held.insert(c.v);
      if (edges.size() <= 6) list += (list.empty() ? "" : ", ") + n(c.cmp) + "->" + n(c.v);
    }
  for (const Cas& c : cas)
    if (*c.old != c.cmp && !held.count(*c.old))
      return "a compare-swap (" + n(c.cmp) + "->" + n(c.v) + ") returned " + n(*c.old) + ", a value the word never held";
  bool path = true;
  for (const auto& [value, b] : balance) path &= b == int64_t(value == 0) - int64_t(value == final_value);
  if (edges.empty()) path = final_value == 0;
  else if (final_value != 0 && !balance.count(final_value)) path = false;
  // Every success must be reachable from 0 along successes.
  std::set<uint64_t> reach{0};
  for (std::vector<uint64_t> todo{0}; path && !todo.empty();) {
    const uint64_t at = todo.back();
    todo.pop_back();
    for (auto [it, end] = edges.equal_range(at); it != end; ++it)
      if (reach.insert(it->second).second) todo.push_back(it->second);
  }
  for (const auto& e : edges) path &= reach.count(e.first) != 0;
  if (!path)
    return "the compare-swaps that succeeded (" + (list.empty() ? "none" : list) + (edges.size() > 6 ? ", ..." : "") +
           ") do not lead from 0 to the final value " + n(final_value);
  return {};
}

std::string AtomicCheck::check(const std::function<std::optional<uint64_t>(uint32_t, uint32_t)>& final_value) const {
  for (const auto& [key, w] : words_) {
    const std::string where = "pe " + n(key.first) + " word " + n(key.second) + ": ";
    const std::optional<uint64_t> here = final_value(key.first, key.second);
    if (!here) continue;
    const uint64_t fin = *here;
    if (!w.adds.empty() && !w.cas.empty()) return where + "takes adds and compare-swaps; the check takes one kind per word";
    if (std::string bad = w.adds.empty() ? check_swaps(w.cas, fin) : check_adds(w.adds, fin); !bad.empty()) return where + bad;
  }
  return {};
}

namespace {

struct Record {  // one atomic, as encode() writes it
  uint8_t cas, has_old, pad[2];
  uint32_t pe, word, pad2;
  uint64_t v, cmp, old;
};

}  // namespace

std::vector<uint8_t> AtomicCheck::encode() const {
  std::vector<Record> rs;
  for (const auto& [key, w] : words_) {
    for (const Add& a : w.adds) rs.push_back({0, a.old.has_value(), {}, key.first, key.second, 0, a.v, 0, a.old.value_or(0)});
    for (const Cas& c : w.cas) rs.push_back({1, c.old.has_value(), {}, key.first, key.second, 0, c.v, c.cmp, c.old.value_or(0)});
  }
  std::vector<uint8_t> out(rs.size() * sizeof(Record));
  if (!rs.empty()) std::memcpy(out.data(), rs.data(), out.size());
  return out;
}

bool AtomicCheck::merge(const std::vector<uint8_t>& bytes) {
  if (bytes.size() % sizeof(Record) != 0) return false;
  for (size_t at = 0; at < bytes.size(); at += sizeof(Record)) {
    Record r;
    std::memcpy(&r, bytes.data() + at, sizeof r);
    const std::optional<uint64_t> old = r.has_old ? std::optional(r.old) : std::nullopt;
    if (r.cas) compare_swap(r.pe, r.word, r.cmp, r.v, old);
    else words_[{r.pe, r.word}].adds.push_back({r.v, old});
  }
  return true;
}

}  // namespace doorbell::ibgda
