#include "hw/gpu_sim/multicast.h"

#include <algorithm>
#include <cstring>

#include "base/nvls/reduce.h"
#include "hw/gpu_sim/ptx_multimem.h"

namespace doorbell::gpu_sim {

void McView::fail(const std::string& why) {
  if (error_ != nullptr && error_->empty()) *error_ = why;
}

// A copy: every CTA of the member shares the view, and the loop over members has scheduling
// points where another CTA draws its own order.
McView::Order McView::draw_order() {
  std::shuffle(order_.begin(), order_.end(), rng_);
  Order o{{}, uint32_t(order_.size())};
  std::copy(order_.begin(), order_.end(), o.m);
  return o;
}

void McView::ld_reduce(SimCtx& ctx, uint64_t off, nvls::DType t, nvls::RedOp op, uint32_t pack, uint8_t* out) {
  ++ld_reduces_;
  std::memset(out, 0, pack <= 16 ? pack : 16);
  // Checked against the PTX forms (ptx_multimem.h), not against the pack table the protocol
  // chose its pack from.
  if (ptx_multimem_form(t, op, pack) == nullptr || off % pack != 0 || off + pack > bytes_) {
    fail("multimem.ld_reduce." + std::string(nvls::redop_name(op)) + "." + nvls::dtype_name(t) + " of " + std::to_string(pack) +
         " B at offset " + std::to_string(off) + ": no such instruction form, or misaligned, or outside the object");
    return;
  }
  const Order order = draw_order();
  uint8_t v[16];
  for (uint32_t i = 0; i < order.n; ++i) {
    ctx.read_bytes(i == 0 ? out : v, members_[order.m[i]] + off, pack);
    if (i != 0) nvls::reduce_into(t, op, out, v, pack);
  }
}

void McView::st(SimCtx& ctx, uint64_t off, const uint8_t* src, uint32_t bytes) {
  if (off + bytes > bytes_) return fail("multimem.st outside the object, offset " + std::to_string(off));
  for (uint32_t m : draw_order()) ctx.write_bytes(members_[m] + off, src, bytes);
}

uint64_t McView::ld_min(SimCtx& ctx, uint64_t off) {
  uint64_t lo = ~0ull;
  for (uint8_t* m : members_)
    lo = std::min(lo, ctx.load(exec::system_scope, exec::acquire, reinterpret_cast<const uint64_t*>(m + off)));
  return lo;
}

void McView::st_flag(SimCtx& ctx, uint64_t off, uint64_t v) {
  for (uint32_t m : draw_order()) ctx.store(exec::system_scope, exec::relaxed, reinterpret_cast<uint64_t*>(members_[m] + off), v);
}

// A step's bytes through the links, and through the one CTA that moves them (cta_copy_bytes_per_ns):
// whichever ends later.
void McView::charge_reduce(SimCtx& ctx, uint64_t bytes, bool bcast) {
  const double now = ctx.now();
  const std::vector<uint32_t> mine{gpus_[me_]};
  double end = std::max(switch_->reserve(now, gpus_, mine, bytes), now + double(bytes) / switch_->costs().cta_copy_bytes_per_ns);
  if (bcast) end = std::max(end, switch_->reserve(now, mine, gpus_, bytes));
  ctx.wait_until_ns(end);
}

void McView::charge_local(SimCtx& ctx, uint64_t bytes) {
  const models::CostModel& c = switch_->costs();
  ctx.wait_until_ns(ctx.now() + std::max(2.0 * double(bytes) / c.hbm_bytes_per_ns, double(bytes) / c.cta_copy_bytes_per_ns));
}

double Multicast::reserve(double now, const std::vector<uint32_t>& up, const std::vector<uint32_t>& down, uint64_t bytes, bool nvls) {
  const double ns = double(bytes) / (costs_.nvlink_bytes_per_ns * (nvls ? costs_.nvls_efficiency : 1.0));
  double end = now;
  for (int dir = 0; dir < 2; ++dir)
    for (uint32_t g : dir == 0 ? up : down) {
      std::vector<double>& f = dir == 0 ? up_free_ : down_free_;
      if (g >= f.size()) f.resize(g + 1, 0);
      f[g] = std::max(f[g], now) + ns;
      end = std::max(end, f[g]);
    }
  return end;
}

Multicast::Object& Multicast::object(uint32_t obj) {
  if (obj >= objects_.size()) throw std::invalid_argument("multicast: no object " + std::to_string(obj));
  return objects_[obj];
}

uint32_t Multicast::create(uint64_t bytes, uint32_t members) {
  if (objects_.size() >= max_objects_)
    throw std::invalid_argument("multicast: all " + std::to_string(max_objects_) + " multicast slots of the switch are in use");
  if (members < 2 || members > McView::kMaxMembers)
    throw std::invalid_argument("multicast: an object has 2 to " + std::to_string(McView::kMaxMembers) + " members");
  objects_.push_back({bytes, members, {}, {}, {}});
  return uint32_t(objects_.size() - 1);
}

void Multicast::add_device(uint32_t obj, uint32_t gpu) {
  Object& o = object(obj);
  if (std::find(o.gpus.begin(), o.gpus.end(), gpu) != o.gpus.end()) return;
  if (o.gpus.size() == o.members) throw std::invalid_argument("multicast: object " + std::to_string(obj) + " is full");
  o.gpus.push_back(gpu);
  o.phys.push_back(nullptr);
}

void Multicast::bind(uint32_t obj, uint32_t gpu, uint8_t* phys) {
  Object& o = object(obj);
  const auto it = std::find(o.gpus.begin(), o.gpus.end(), gpu);
  if (it == o.gpus.end()) throw std::invalid_argument("multicast: GPU " + std::to_string(gpu) + " binds before it was added");
  o.phys[size_t(it - o.gpus.begin())] = phys;
}

McView& Multicast::map(uint32_t obj, uint32_t gpu) {
  Object& o = object(obj);
  if (o.gpus.size() != o.members || std::find(o.phys.begin(), o.phys.end(), nullptr) != o.phys.end())
    throw std::invalid_argument("multicast: object " + std::to_string(obj) + " mapped before every member was added and bound");
  const auto it = std::find(o.gpus.begin(), o.gpus.end(), gpu);
  if (it == o.gpus.end()) throw std::invalid_argument("multicast: GPU " + std::to_string(gpu) + " is not a member");
  if (o.views.empty())
    for (uint32_t m = 0; m < o.members; ++m) {
      auto v = std::make_unique<McView>();
      v->switch_ = this;
      v->members_ = o.phys;
      v->gpus_ = o.gpus;
      v->me_ = m;
      v->bytes_ = o.bytes;
      v->rng_.seed(seed_ * 0x9E3779B97F4A7C15ull + obj * 0x100 + m);
      v->error_ = &error_;
      for (uint32_t i = 0; i < o.members; ++i) v->order_.push_back(i);
      o.views.push_back(std::move(v));
    }
  return *o.views[size_t(it - o.gpus.begin())];
}

}  // namespace doorbell::gpu_sim
