// An oracle for NVLS channel plans, written apart from the search (core/nvls/setup.h): it
// routes each channel's traffic over the links and adds it up, where the search subtracts a
// closed-form need. Channel h at bw: multimem.ld_reduce pulls bw from every member up to the
// switch and sends the reduced bw down to its head; multimem.st sends bw up from the head and
// down to every member. A plan is wrong when a link carries more than its capacity, or when a
// faster speed of the list would have fitted every link.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/nvls/setup.h"

namespace doorbell::nvls {

// Per GPU, GB/s each way that channels at `bw` with these heads put on its links.
struct LinkLoad {
  std::vector<double> up, down;
};
inline LinkLoad route_channels(uint32_t nranks, double bw, const std::vector<uint32_t>& heads) {
  LinkLoad l{std::vector<double>(nranks, 0), std::vector<double>(nranks, 0)};
  for (uint32_t h : heads) {
    for (uint32_t g = 0; g < nranks; ++g) l.up[g] += bw;  // ld_reduce: every member's data to the switch
    l.down[h] += bw;                                      // ... the sum to the head
    l.up[h] += bw;                                        // multimem.st: the head's result to the switch
    for (uint32_t g = 0; g < nranks; ++g) l.down[g] += bw;  // ... and to every member
  }
  return l;
}

// The first link the channels oversubscribe, or "".
inline std::string oversubscribed(const Topology& t, double bw, const std::vector<uint32_t>& heads) {
  const LinkLoad l = route_channels(t.nranks(), bw, heads);
  char b[160];
  for (uint32_t g = 0; g < t.nranks(); ++g)
    for (int dir = 0; dir < 2; ++dir) {
      const double load = dir == 0 ? l.up[g] : l.down[g], cap = dir == 0 ? t.gpu_to_nvs[g] : t.nvs_to_gpu[g];
      if (load > cap * (1 + 1e-9)) {
        std::snprintf(b, sizeof b, "GPU %u's link %s the switch carries %.1f GB/s of %zu channels at %.1f GB/s, over its %.1f", g,
                      dir == 0 ? "to" : "from", load, heads.size(), bw, cap);
        return b;
      }
    }
  return {};
}

// What is wrong with plan `p` for `t` and the search's `speeds`, or "".
inline std::string check_plan(const Topology& t, const std::vector<double>& speeds, const ChannelPlan& p) {
  if (!unsupported_reason(t).empty()) return p.bw == 0 ? "" : "a plan where NVLS cannot run";
  std::vector<uint32_t> all(t.nranks());
  for (uint32_t h = 0; h < t.nranks(); ++h) all[h] = h;
  if (p.bw != 0) {
    if (p.heads != all) return "the plan does not have one channel per head";
    if (std::string why = oversubscribed(t, p.bw, p.heads); !why.empty()) return "the plan oversubscribes a link: " + why;
  }
  for (double bw : speeds)
    if (bw > p.bw && oversubscribed(t, bw, all).empty()) {
      char b[96];
      std::snprintf(b, sizeof b, "channels at %.1f GB/s fit every link, but the plan runs at %.1f", bw, p.bw);
      return b;
    }
  return {};
}

}  // namespace doorbell::nvls
