// NVLS set-up, host side (SPEC §7, seed 003): whether NVLS can run, how many CTAs it launches,
// the channel search on a graph of GPUs around one NVSwitch node, the connection indexes of
// each head, and the memory every rank maps. Pure functions of the topology, so the model and a
// real run derive the same plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace doorbell::nvls {

// The GPUs and their NVLink bandwidth to and from the switch (GB/s, each direction).
struct Topology {
  std::vector<double> gpu_to_nvs, nvs_to_gpu;
  bool multicast_supported = true;  // CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED on every GPU
  uint32_t nranks() const { return uint32_t(gpu_to_nvs.size()); }
};

// Why NVLS cannot run here, or empty: it needs multicast on every GPU, all ranks on the switch
// and at least 2 of them.
inline std::string unsupported_reason(const Topology& t) {
  if (t.nranks() < 2) return "NVLS needs at least 2 ranks";
  if (t.nvs_to_gpu.size() != t.gpu_to_nvs.size()) return "topology: bandwidth lists of different lengths";
  if (!t.multicast_supported) return "a GPU does not support multicast objects";
  for (uint32_t g = 0; g < t.nranks(); ++g)
    if (t.gpu_to_nvs[g] <= 0 || t.nvs_to_gpu[g] <= 0) return "GPU " + std::to_string(g) + " has no NVLink to the switch";
  return {};
}

// CTAs an NVLS collective launches: NCCL_NVLS_NCHANNELS clamped into [min_ctas, max_ctas] —
// the CTA count, not the number of channels the search found.
inline uint32_t nvls_ctas(uint32_t requested, uint32_t min_ctas, uint32_t max_ctas) {
  return std::clamp(requested, min_ctas, std::max(min_ctas, max_ctas));
}

// One channel per head GPU h = 0..n-1. The switch is transparent, so a channel is GPU <-> NVS
// for every GPU at bandwidth bw in both directions, and its head needs 2 bw (it reduces with
// ld_reduce and broadcasts with multimem.st). The search tries the speeds from the fastest and
// takes the first at which every head's channel fits the links, each channel consuming its
// bandwidth: GPU g pays bw for each of the n channels plus bw more for its own head, (n+1) bw.
struct ChannelPlan {
  double bw = 0;              // per channel, GB/s; 0: none found
  std::vector<uint32_t> heads;  // head GPU of each channel
};

// Planted bugs, for tests only.
struct SearchPlants {
  bool unsorted_speeds = false;  // tries the speeds in the order given, not the fastest first
  bool skips_last_gpu = false;   // the fit loop stops one GPU short
};

inline ChannelPlan search_channels(const Topology& t, const std::vector<double>& speeds, const SearchPlants& pl = {}) {
  ChannelPlan p;
  if (!unsupported_reason(t).empty()) return p;
  const uint32_t n = t.nranks();
  std::vector<double> sorted = speeds;
  if (!pl.unsorted_speeds) std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (double bw : sorted) {
    std::vector<double> up = t.gpu_to_nvs, down = t.nvs_to_gpu;
    bool fits = true;
    for (uint32_t h = 0; h < n && fits; ++h)
      for (uint32_t g = 0; g + (pl.skips_last_gpu ? 1 : 0) < n && fits; ++g) {
        const double need = g == h ? 2 * bw : bw;
        fits = up[g] >= need && down[g] >= need;
        up[g] -= need, down[g] -= need;
      }
    if (!fits) continue;
    p.bw = bw;
    for (uint32_t h = 0; h < n; ++h) p.heads.push_back(h);
    return p;
  }
  return p;
}

// Connection indexes in a rank's peer table: the n ranks, then one NVLS slot per head after a
// gap of one (the collnet/NVLS tree slot): up[h] = n + 1 + h for every head, and down = n + 1 +
// the head's own rank.
inline uint32_t up_index(uint32_t nranks, uint32_t head) { return nranks + 1 + head; }
inline uint32_t down_index(uint32_t nranks, uint32_t head_rank) { return nranks + 1 + head_rank; }

// What one rank maps for NVLS: per channel a reduce and a broadcast buffer, each buff_bytes of
// data plus mem_bytes of head / tail flags, per head — unicast and multicast views of the same
// physical memory.
struct Footprint {
  uint64_t per_head = 0, per_rank = 0;
};
inline Footprint footprint(uint32_t channels, uint64_t buff_bytes, uint64_t mem_bytes, uint32_t heads) {
  Footprint f;
  f.per_head = uint64_t(channels) * 2 * (buff_bytes + mem_bytes);
  f.per_rank = f.per_head * heads;
  return f;
}

}  // namespace doorbell::nvls
