// NVSwitch multicast as the CPU model sees it (SPEC §7): multicast objects are created (a
// bounded number of slots), each member GPU is added and binds its own physical memory, and
// each member maps the object — its unicast copy plus the multicast view whose accesses reach
// every member. multimem.ld_reduce reads every member and combines them in an order drawn from
// the run's seed (so float sums may differ between calls, as on the switch); multimem.st
// writes every member, in no particular order; the min-poll of step flags is an acquire load
// of every member's copy. A pack the instruction set does not have is recorded as an error and
// the load returns zeros: the run fails, it does not guess.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/nvls/pack.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "models/cost_model.h"

namespace doorbell::gpu_sim {

class McView {
 public:
  uint8_t* uc(uint64_t off) const { return members_[me_] + off; }
  void ld_reduce(SimCtx& ctx, uint64_t off, nvls::DType t, nvls::RedOp op, uint32_t pack, uint8_t* out);
  void st(SimCtx& ctx, uint64_t off, const uint8_t* src, uint32_t bytes);
  uint64_t ld_min(SimCtx& ctx, uint64_t off);
  void st_flag(SimCtx& ctx, uint64_t off, uint64_t v);
  // Simulated time for the data a step moved (timed schedule): a reduce of `bytes` takes them
  // from every member's link to the switch and to mine, a broadcast (multimem.st) from mine to
  // every member's; a local copy of a slot costs HBM time.
  void charge_reduce(SimCtx& ctx, uint64_t bytes, bool bcast);
  void charge_local(SimCtx& ctx, uint64_t bytes);
  uint64_t ld_reduces() const { return ld_reduces_; }

 private:
  friend class Multicast;
  class Multicast* switch_ = nullptr;
  std::vector<uint8_t*> members_;  // every member's physical copy
  std::vector<uint32_t> gpus_;     // every member's GPU
  uint32_t me_ = 0;
  uint64_t bytes_ = 0;
  std::mt19937_64 rng_;
  std::string* error_ = nullptr;
  std::vector<uint32_t> order_;
  uint64_t ld_reduces_ = 0;
  void fail(const std::string& why);
  // A member order of its own for one access (members <= kMaxMembers).
  static constexpr uint32_t kMaxMembers = 8;
  struct Order {
    uint32_t m[kMaxMembers];
    uint32_t n;
    const uint32_t* begin() const { return m; }
    const uint32_t* end() const { return m + n; }
  };
  Order draw_order();
};

class Multicast {
 public:
  // `max_objects`: multicast slots of the switch; `seed`: the reduction orders; `costs`: its
  // links (timed schedule).
  Multicast(uint32_t max_objects, uint64_t seed, models::CostModel costs = {})
      : max_objects_(max_objects), seed_(seed), costs_(costs) {}
  // cuMulticastCreate for `members` GPUs; throws std::invalid_argument when no slot is free.
  uint32_t create(uint64_t bytes, uint32_t members);
  void add_device(uint32_t obj, uint32_t gpu);        // cuMulticastAddDevice
  void bind(uint32_t obj, uint32_t gpu, uint8_t* phys);  // cuMulticastBindMem: `bytes` of it
  // The member's views; every member must have been added and bound.
  McView& map(uint32_t obj, uint32_t gpu);
  // The first bad multimem access of the run, or empty.
  const std::string& error() const { return error_; }
  // Reserves `bytes` on the GPUs' links to (up) and from (down) the switch, each link busy
  // first come first served, from `now`; returns when the last of them is done.
  // `nvls`: multimem traffic, at the NVLS efficiency; else a plain peer write through the switch.
  double reserve(double now, const std::vector<uint32_t>& up, const std::vector<uint32_t>& down, uint64_t bytes, bool nvls = true);
  const models::CostModel& costs() const { return costs_; }

 private:
  struct Object {
    uint64_t bytes;
    uint32_t members;
    std::vector<uint32_t> gpus;
    std::vector<uint8_t*> phys;  // by position in gpus
    std::vector<std::unique_ptr<McView>> views;
  };
  Object& object(uint32_t obj);
  uint32_t max_objects_;
  uint64_t seed_;
  models::CostModel costs_;
  std::vector<double> up_free_, down_free_;  // per GPU: when its link is next free
  std::vector<Object> objects_;
  std::string error_;
};

}  // namespace doorbell::gpu_sim
