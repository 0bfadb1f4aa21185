#include "sim/ibgda/atomic_check.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_set>

namespace doorbell::ibgda {

namespace {

std::string n(uint64_t v) { return std::to_string(v); }

}  // namespace

uint64_t amo_apply(AmoOp k, uint32_t width, uint64_t cur, uint64_t v, uint64_t cmp) {
  const uint64_t mask = width == 4 ? 0xffff'ffffull : ~uint64_t{0};
  const uint64_t w = cur & mask;
  v &= mask, cmp &= mask;
  uint64_t nv = w;
  switch (k) {
    case AmoOp::kFetchAdd: case AmoOp::kAdd: nv = w + v; break;
    case AmoOp::kFetchInc: case AmoOp::kInc: nv = w + 1; break;
    case AmoOp::kCompareSwap: nv = w == cmp ? v : w; break;
    case AmoOp::kSwap: case AmoOp::kSet: nv = v; break;
    case AmoOp::kFetchAnd: case AmoOp::kAnd: nv = w & v; break;
    case AmoOp::kFetchOr: case AmoOp::kOr: nv = w | v; break;
    case AmoOp::kFetchXor: case AmoOp::kXor: nv = w ^ v; break;
  }
  return (cur & ~mask) | (nv & mask);
}

const char* amo_name(AmoOp k) {
  static const char* const kNames[kAmoOps] = {"fetch_add", "compare_swap", "swap", "fetch_and", "fetch_or", "fetch_xor", "fetch_inc",
                                              "add",       "inc",          "set",  "and",       "or",       "xor"};
  return kNames[uint32_t(k)];
}

// Adds in some order: the final value is their sum, and each fetched value is the sum of the
// adds ordered before it, so sorted by value each fetch leaves room for its own add.
std::string AtomicCheck::check_adds(Span ops, uint64_t final_value, Scratch& scratch) {
  uint64_t sum = 0;
  std::vector<std::pair<uint64_t, uint64_t>>& seen = scratch.pairs;  // (returned, added)
  seen.clear();
  for (const Op* a = ops.first; a != ops.second; ++a) {
    sum += a->v;
    if (a->old) seen.push_back({*a->old, a->v});
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
std::string AtomicCheck::check_swaps(Span ops, uint64_t final_value, Scratch& scratch) {
  // A lost result leaves its success unknown: nothing to check against.
  if (std::any_of(ops.first, ops.second, [](const Op& c) { return !c.old; })) return {};
  std::vector<std::pair<uint64_t, uint64_t>>& edges = scratch.pairs;  // the successes, compare -> value
  std::vector<uint64_t>& held = scratch.held;
  edges.clear(), held.assign(1, 0);
  std::string list;
  for (const Op* c = ops.first; c != ops.second; ++c)
    if (*c->old == c->cmp) {
      edges.push_back({c->cmp, c->v});
      held.push_back(c->v);
      if (edges.size() <= 6) list += (list.empty() ? "" : ", ") + n(c->cmp) + "->" + n(c->v);
    }
  std::sort(held.begin(), held.end());
  for (const Op* c = ops.first; c != ops.second; ++c)
    if (*c->old != c->cmp && !std::binary_search(held.begin(), held.end(), *c->old))
      return "a compare-swap (" + n(c->cmp) + "->" + n(c->v) + ") returned " + n(*c->old) + ", a value the word never held";
  // Out-degree minus in-degree per value: +1 at 0 and -1 at the final value (0 at both when
  // they are the same value), 0 elsewhere.
  std::vector<std::pair<uint64_t, int64_t>>& balance = scratch.balance;
  balance.clear();
  for (const auto& [from, to] : edges) balance.push_back({from, 1}), balance.push_back({to, -1});
  std::sort(balance.begin(), balance.end());
  bool path = true, final_seen = false;
  for (size_t i = 0; i < balance.size();) {
    const uint64_t value = balance[i].first;
    int64_t b = 0;
    for (; i < balance.size() && balance[i].first == value; ++i) b += balance[i].second;
    path &= b == int64_t(value == 0) - int64_t(value == final_value);
    final_seen |= value == final_value;
  }
  if (edges.empty()) path = final_value == 0;
  else if (final_value != 0 && !final_seen) path = false;
  // Every success must be reachable from 0 along successes.
  std::sort(edges.begin(), edges.end());
  std::vector<uint64_t>& reach = scratch.reach;
  std::vector<uint64_t>& todo = scratch.todo;
  reach.assign(1, 0), todo.assign(1, 0);
  while (path && !todo.empty()) {
    const uint64_t at = todo.back();
    todo.pop_back();
    for (auto it = std::lower_bound(edges.begin(), edges.end(), std::pair<uint64_t, uint64_t>{at, 0}); it != edges.end() && it->first == at; ++it)
      if (std::find(reach.begin(), reach.end(), it->second) == reach.end()) reach.push_back(it->second), todo.push_back(it->second);
  }
  for (const auto& e : edges) path &= std::find(reach.begin(), reach.end(), e.first) != reach.end();
  if (!path)
    return "the compare-swaps that succeeded (" + (list.empty() ? "none" : list) + (edges.size() > 6 ? ", ..." : "") +
           ") do not lead from 0 to the final value " + n(final_value);
  return {};
}

// Any mix of AMOs: a depth-first search for an order in which every fetching one returns
// what it did and the word ends at its final value. The state is (ops applied, value): each
// is explored once, so the search is at most 2^n times the values reachable.
std::string AtomicCheck::check_order(Span ops, uint64_t final_value) {
  const size_t count = size_t(ops.second - ops.first);
  if (count > kMaxSearched)
    return n(count) + " atomics of mixed kinds, more than the order search takes (" + n(kMaxSearched) + "); give them more words";
  const uint64_t all = (uint64_t(1) << count) - 1;
  struct Hash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& s) const { return std::hash<uint64_t>()(s.first * 0x9e3779b97f4a7c15ull ^ s.second); }
  };
  std::unordered_set<std::pair<uint64_t, uint64_t>, Hash> seen;  // (applied mask, value) explored
  std::vector<std::pair<uint64_t, uint64_t>> stack{{0, 0}};
  while (!stack.empty()) {
    const auto [mask, value] = stack.back();
    stack.pop_back();
    if (mask == all) {
      if (value == final_value) return {};
      continue;
    }
    if (!seen.insert({mask, value}).second) continue;
    for (size_t i = 0; i < count; ++i) {
      if (mask >> i & 1) continue;
      const Op& o = ops.first[i];
      const uint64_t low = o.width == 4 ? value & 0xffff'ffffull : value;
      if (o.old && *o.old != low) continue;  // it returned another value: not next here
      stack.push_back({mask | uint64_t(1) << i, amo_apply(o.kind, o.width, value, o.v, o.cmp)});
    }
  }
  std::string list;
  for (const Op* o = ops.first; o != ops.second && o - ops.first < 8; ++o)
    list += (list.empty() ? "" : ", ") + std::string(amo_name(o->kind)) + (o->width == 4 ? "/4 " : " ") + n(o->v) +
            (o->kind == AmoOp::kCompareSwap ? " if " + n(o->cmp) : "") + (o->old ? " -> " + n(*o->old) : "");
  return "no order of its atomics (" + list + (count > 8 ? ", ..." : "") + ") returns what they returned and ends at " + n(final_value);
}

std::string AtomicCheck::check(const std::function<std::optional<uint64_t>(uint32_t, uint32_t)>& final_value) const {
  // By word, each word's ops in the order recorded.
  std::vector<Op> ops = ops_;
  Scratch scratch;
  std::stable_sort(ops.begin(), ops.end(), [](const Op& x, const Op& y) { return std::pair(x.pe, x.word) < std::pair(y.pe, y.word); });
  for (size_t i = 0; i < ops.size();) {
    size_t j = i;
    bool adds = false, swaps = false, others = false;
    unsigned __int128 sum = 0;  // the adds' check orders sums: only where theirs does not wrap
    for (; j < ops.size() && ops[j].pe == ops[i].pe && ops[j].word == ops[i].word; ++j) {
      const Op& o = ops[j];
      if (o.width == 8 && (o.kind == AmoOp::kAdd || o.kind == AmoOp::kFetchAdd)) adds = true, sum += o.v;
      else if (o.width == 8 && o.kind == AmoOp::kCompareSwap) swaps = true;
      else others = true;
    }
    others |= sum >> 64 != 0;
    const Span word{ops.data() + i, ops.data() + j};
    const uint32_t pe = ops[i].pe, w = ops[i].word;
    i = j;
    const std::optional<uint64_t> here = final_value(pe, w);
    if (!here) continue;
    auto where = [&] { return "pe " + n(pe) + " word " + n(w) + ": "; };
    const std::string bad = others || (adds && swaps) ? check_order(word, *here)
                            : swaps                   ? check_swaps(word, *here, scratch)
                                                      : check_adds(word, *here, scratch);
    if (!bad.empty()) return where() + bad;
  }
  return {};
}

namespace {

struct Record {  // one atomic, as encode() writes it
  uint8_t kind, has_old, width, pad;
  uint32_t pe, word, pad2;
  uint64_t v, cmp, old;
};

}  // namespace

std::vector<uint8_t> AtomicCheck::encode() const {
  std::vector<Record> rs;
  for (const Op& o : ops_) rs.push_back({uint8_t(o.kind), o.old.has_value(), o.width, 0, o.pe, o.word, 0, o.v, o.cmp, o.old.value_or(0)});
  std::vector<uint8_t> out(rs.size() * sizeof(Record));
  if (!rs.empty()) std::memcpy(out.data(), rs.data(), out.size());
  return out;
}

bool AtomicCheck::merge(const std::vector<uint8_t>& bytes) {
  if (bytes.size() % sizeof(Record) != 0) return false;
  for (size_t at = 0; at < bytes.size(); at += sizeof(Record)) {
    Record r;
    std::memcpy(&r, bytes.data() + at, sizeof r);
    if (r.kind >= kAmoOps || (r.width != 4 && r.width != 8)) return false;
    ops_.push_back({r.pe, r.word, AmoOp(r.kind), r.width, r.v, r.cmp, r.has_old ? std::optional(r.old) : std::nullopt});
  }
  return true;
}

}  // namespace doorbell::ibgda
