// Host helpers for the GPU checks that run the GPU-resident NIC engine
// (hw/cuda/nic_engine.cuh): a key table over GPU regions, an engine QP for an IBGDA device QP,
// and the engine's arrays in device memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/ibgda/state.h"
#include "gpu/cuda_check.h"
#include "hw/cuda/nic_engine.cuh"

namespace doorbell::gpu_rig {

struct Region {
  uint64_t base, len;
  uint32_t key;
};

inline constexpr uint32_t kPd = 1;  // every region and QP of the checks is in one PD

// Keys as the NIC model makes them: the region's table index above a variant byte.
constexpr uint32_t key_of(uint32_t index) { return (index << 8) | 0x5a; }

// The engine's key table (indexed by key >> 8, as the NIC model's) for these regions, all
// access rights granted. Their keys must come from key_of(), each index once.
inline std::vector<mock_nic::MemoryRegion> region_table(const std::vector<Region>& regions) {
  std::vector<mock_nic::MemoryRegion> t;
  for (const Region& r : regions) {
    if (t.size() <= (r.key >> 8)) t.resize((r.key >> 8) + 1);
    if (t[r.key >> 8].valid) {
      std::fprintf(stderr, "gpu_rig: two regions share key index %u\n", r.key >> 8);
      std::exit(2);
    }
    t[r.key >> 8] = {r.base, r.len, reinterpret_cast<std::byte*>(r.base), kPd, ~0u, r.key, true, false};
  }
  return t;
}

// The engine's view of an IBGDA QP: its ring, DBR, BlueFlame word and collapsed CQ (of the
// ring's size), connected to the QP at index `peer` of the same engine.
inline cuda_nic::QpDesc engine_qp(const ibgda::DevQp& d, int32_t peer) {
  cuda_nic::QpDesc q;
  q.qpn = d.qpn, q.pd = kPd;
  q.log_sq = uint32_t(__builtin_ctz(d.nwqes));
  q.sq = reinterpret_cast<std::byte*>(d.wq);
  q.dbr = reinterpret_cast<mlx5::QpDoorbellRecord*>(d.dbr);
  q.bf = d.bf;
  q.cq = const_cast<mlx5::Cqe64*>(d.cqe);
  q.log_cq = q.log_sq;
  q.collapsed = true;
  q.peer = peer;
  return q;
}

// An engine over `qps` with key table `table` (states from `st`, fresh when empty), served
// by `nengines` CTAs.
inline cuda_nic::Engine make_engine(const std::vector<cuda_nic::QpDesc>& qps, const std::vector<mock_nic::MemoryRegion>& table,
                                    uint32_t nengines, std::vector<cuda_nic::QpState> st = {}) {
  if (st.empty()) st.resize(qps.size());
  cuda_nic::Engine e;
  e.qps = dcopy(qps);
  e.st = dcopy(st);
  e.nqps = uint32_t(qps.size());
  e.nengines = nengines;
  e.mrs = dcopy(table);
  e.nmrs = uint32_t(table.size());
  e.executed = dalloc<unsigned long long>(1);
  e.errors = dalloc<unsigned long long>(1);
  return e;
}

// ... with the key table of `regions` (region_table).
inline cuda_nic::Engine make_engine(const std::vector<cuda_nic::QpDesc>& qps, const std::vector<Region>& regions,
                                    uint32_t nengines, std::vector<cuda_nic::QpState> st = {}) {
  return make_engine(qps, region_table(regions), nengines, std::move(st));
}

}  // namespace doorbell::gpu_rig
