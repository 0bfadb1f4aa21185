#include "sim/nvls/nvls_run.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "hw/gpu_sim/multicast.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::nvls {

namespace {

struct Positions;

// One (head, channel) region of the rank's multicast object, as core/nvls sees a multicast view.
struct McRegion {
  gpu_sim::McView* v;
  uint64_t base;
  Positions* pos = nullptr;  // the run's position checks (sequentially consistent runs)
  uint64_t index = 0;        // head * channels + channel
  uint8_t* uc(uint64_t off) const { return v->uc(base + off); }
  void ld_reduce(gpu_sim::SimCtx& ctx, uint64_t off, DType t, RedOp op, uint32_t pack, uint8_t* out);
  void st(gpu_sim::SimCtx& ctx, uint64_t off, const uint8_t* src, uint32_t bytes) { v->st(ctx, base + off, src, bytes); }
  uint64_t ld_min(gpu_sim::SimCtx& ctx, uint64_t off) { return v->ld_min(ctx, base + off); }
  void st_flag(gpu_sim::SimCtx& ctx, uint64_t off, uint64_t x) { v->st_flag(ctx, base + off, x); }
  void charge_reduce(gpu_sim::SimCtx& ctx, uint64_t bytes, bool bcast) { v->charge_reduce(ctx, bytes, bcast); }
  void charge_local(gpu_sim::SimCtx& ctx, uint64_t bytes) { v->charge_local(ctx, bytes); }
  // The model keeps the fence a GPU leaves out (core/nvls Post::kFrees): the race detector's
  // edge from a freed slot's reads to the producer's next writes into it.
  void reads_done(gpu_sim::SimCtx& ctx) { ctx.fence(exec::system_scope); }
};

// A ring send's time: my link up to the switch and the next rank's link down, and no less than
// the sending CTA takes to move the bytes (cta_copy_bytes_per_ns, as an NVLS step's).
struct RingLink {
  gpu_sim::Multicast* sw;
  uint32_t me, next;
  void send_time(gpu_sim::SimCtx& ctx, uint64_t bytes) {
    const double now = ctx.now();
    ctx.wait_until_ns(std::max(sw->reserve(now, {me}, {next}, bytes, false), now + double(bytes) / sw->costs().cta_copy_bytes_per_ns));
  }
};

// The ring's memory: per rank and channel a receive FIFO, two flag words on their own lines and
// the rank's own step counts.
struct RingMemory {
  std::vector<mem::LineBytes> fifo;  // [rank * channels + channel]
  mem::LineVector<uint64_t> flags;   // tail at 48 * i, head at 48 * i + 16, counts at + 32
  uint64_t* tail(uint64_t i) { return &flags[48 * i]; }
  uint64_t* head(uint64_t i) { return &flags[48 * i + 16]; }
  uint64_t* counts(uint64_t i) { return &flags[48 * i + 32]; }
};

// A rank's stream: each kernel starts when the one before it finished.
struct StreamKernel {
  std::string name;
  gpu_sim::LaunchConfig cfg;
  std::function<void(gpu_sim::SimCtx&)> body;
};
void launch_stream(gpu_sim::Scheduler& s, std::shared_ptr<const std::vector<StreamKernel>> q, size_t i = 0) {
  if (i >= q->size()) return;
  const StreamKernel& k = (*q)[i];
  s.launch(k.name, k.cfg, k.body, [&s, q, i] { launch_stream(s, q, i + 1); });
}

// The views of one rank, by (head, channel).
struct RankMcs {
  std::vector<McRegion> v;
  uint32_t channels;
  McRegion in{}, out{};  // registered buffers: the inputs' and the outputs' multicast objects
  McRegion& at(uint32_t h, uint32_t c) { return v[h * channels + c]; }
  McRegion& input() { return in; }
  McRegion& output() { return out; }
};

// The protocol's positions, named when broken (read from every member's copy of a region's
// flags, outside the model). Flags only grow; a reducer's flags reach the members' copies one
// by one, so each member is held to its own copy where it acted on it:
//   - a reducer frees only steps every member staged: each copy's red_head <= every red_tail
//     (the min-poll sees every member);
//   - a member stages into a slot only after every reducer freed it: red_tail <= the least
//     red_head of its own copy + NCCL_STEPS, and each write into the FIFO is into the slot of
//     the step it stages next, one the reducers freed;
//   - AllReduce: a member frees a broadcast slot only after it landed (bc_head <= the least
//     bc_tail of its copy), a reducer broadcasts only into slots every member freed (each
//     copy's bc_tail <= every bc_head + NCCL_STEPS; not with registered outputs: no slots);
//   - a reduce reads a slot only while every member's copy holds a step it staged and no
//     reducer has freed (its producer's flag passed the step);
//   - a role ends its call having posted every step it moved: the base it stores for its next
//     call equals its flag. (Flags are absolute steps, so one left behind passes every later
//     wait and the next call's first post overtakes it: no wrong byte and no hang show it; it
//     only runs the FIFO a slot short, and a wait for the flags to settle never ends.)
struct Positions {
  Region region;
  uint32_t n, channels, reducers;
  bool allreduce;
  bool bc_slots;  // AllReduce's broadcast goes through its FIFO (not into registered outputs)
  std::vector<RankMcs>* mcs;
  std::string broken;  // the first rule broken, by a flag store, a FIFO write or a read

  uint64_t flag(uint32_t copy, uint64_t i, uint32_t f) const {
    return *reinterpret_cast<const uint64_t*>((*mcs)[copy].v[i].uc(region.flag(f)));
  }
  std::string where(uint64_t i) const { return "head " + std::to_string(i / channels) + " ch" + std::to_string(i % channels); }
  // The least over reducers of flag f in member `copy`'s copy; or of its latest value, in any copy.
  uint64_t least(uint64_t i, Flag f, int copy) const {
    uint64_t lo = ~0ull;
    for (uint32_t j = 0; j < reducers; ++j) {
      uint64_t v = 0;
      if (copy >= 0) v = flag(uint32_t(copy), i, reducer_flag(f, j));
      else
        for (uint32_t m = 0; m < n; ++m) v = std::max(v, flag(m, i, reducer_flag(f, j)));
      lo = std::min(lo, v);
    }
    return lo;
  }
  std::string band(uint64_t i) const {
    const std::string w = where(i) + ": ";
    for (uint32_t m = 0; m < n; ++m) {
      const uint64_t tail = flag(m, i, kRedTail);
      for (uint32_t c = 0; c < n; ++c)
        for (uint32_t j = 0; j < reducers; ++j)
          if (const uint64_t head = flag(c, i, reducer_flag(kRedHead, j)); head > tail)
            return w + "reducer " + std::to_string(j) + " freed reduce steps up to " + std::to_string(head) + " while rank " + std::to_string(m) +
                   " had staged " + std::to_string(tail) + " (a reducer frees only steps every member staged)";
      if (const uint64_t freed = least(i, kRedHead, int(m)); tail > freed + kSteps)
        return w + "rank " + std::to_string(m) + " staged reduce step " + std::to_string(tail - 1) + " while its copy showed steps freed up to " +
               std::to_string(freed) + " (a slot is staged only after every reducer freed it)";
      if (!allreduce) continue;
      const uint64_t head = flag(m, i, kBcHead), landed = least(i, kBcTail, int(m));
      if (head > landed)
        return w + "rank " + std::to_string(m) + " freed broadcast steps up to " + std::to_string(head) + " while its copy showed " +
               std::to_string(landed) + " landed (a broadcast slot is freed only after it landed)";
      for (uint32_t c = 0; c < n && bc_slots; ++c)
        for (uint32_t j = 0; j < reducers; ++j)
          if (const uint64_t tail2 = flag(c, i, reducer_flag(kBcTail, j)); tail2 > head + kSteps)
            return w + "reducer " + std::to_string(j) + " broadcast step " + std::to_string(tail2 - 1) + " while rank " + std::to_string(m) +
                   " had freed up to " + std::to_string(head) + " (a reducer broadcasts only into slots every member freed)";
    }
    return "";
  }
  // A write into member g's copy of region i's reduce FIFO at `off` (its scatter staging the
  // step it will post next, or the one after: the workers run a step ahead of the sync warp's
  // post): that step's own slot, and one every reducer freed.
  std::string staged(uint32_t g, uint64_t i, uint64_t off) const {
    const uint64_t slot = (off - Region::kFlagBytes) / region.slot_bytes, tail = flag(g, i, kRedTail), freed = least(i, kRedHead, int(g));
    const uint64_t step = slot == (tail + 1) % kSteps ? tail + 1 : tail;
    if (slot == step % kSteps && step < freed + kSteps) return "";
    return where(i) + ": rank " + std::to_string(g) + " wrote reduce slot " + std::to_string(slot) + " staging step " + std::to_string(step) +
           " while its copy showed steps freed up to " + std::to_string(freed) + " (a slot is staged only after every reducer freed it)";
  }
  // A multimem.ld_reduce at `off` of region i: its slot must hold, in every member's copy, a
  // step that member staged and the reducers have not freed.
  void reduce_read(uint64_t i, uint64_t off) {
    if (!broken.empty() || off < Region::kFlagBytes || off >= region.bc(0)) return;
    const uint64_t slot = (off - Region::kFlagBytes) / region.slot_bytes, freed = least(i, kRedHead, -1);
    const uint64_t ahead = (slot + kSteps - freed % kSteps) % kSteps;  // the slot's step, past the least freed
    // (A slot read after its own step was freed looks, by the flags, like one read 7 steps early.)
    for (uint32_t m = 0; m < n; ++m)
      if (const uint64_t tail = flag(m, i, kRedTail); tail < freed + ahead + 1)
        note(where(i) + ": a reduce read slot " + std::to_string(slot) + " while rank " + std::to_string(m) + "'s copy held no step it had staged (" +
             std::to_string(tail) + ") and the reducers had not freed (" + std::to_string(freed) +
             ") (a consumer reads a step only after its producer's flag passed it, and before it is freed)");
  }
  // Member g stored `next` as base `which` of region i (its role's call ended): the flag the
  // role posts (its own copy's; a reducer's, as it reached any copy) must equal it.
  std::string ended(uint32_t g, uint64_t i, uint32_t which, uint64_t next) const {
    static constexpr const char* kRole[] = {"scatter", "gather", "reducer", "reducer's broadcast"};
    static constexpr const char* kName[] = {"red_tail", "bc_head", "red_head", "bc_tail"};
    const uint32_t f = which - 2;  // the flag on the line two before its base (Flag)
    const uint32_t role = f < 4 ? f : 2 + (f - 4) % 4, j = f < 4 ? 0 : (f - 4) / 4;
    uint64_t posted = flag(g, i, f);
    for (uint32_t m = 0; m < n && role >= 2; ++m) posted = std::max(posted, flag(m, i, f));
    if (posted == next) return "";
    return where(i) + ": rank " + std::to_string(g) + "'s " + kRole[role] + (role >= 2 ? " " + std::to_string(j) : "") +
           " ended its call at step " + std::to_string(next) + " with " + kName[role] + " at " + std::to_string(posted) +
           " (a role ends its call having posted every step it moved)";
  }
  // The first rule broken, by a store (check_stores) or a read.
  std::string note(const std::string& why) {
    if (broken.empty()) broken = why;
    return why;
  }
};

void McRegion::ld_reduce(gpu_sim::SimCtx& ctx, uint64_t off, DType t, RedOp op, uint32_t pack, uint8_t* out) {
  if (pos != nullptr) pos->reduce_read(index, off);
  v->ld_reduce(ctx, base + off, t, op, pack, out);
}

}  // namespace

std::string config_error(const NvlsRunConfig& c) {
  if (c.ranks < 2 || c.channels == 0 || c.slot_bytes % 16 != 0 || c.slot_bytes == 0 || c.reducers == 0 || c.reducers > kMaxReducers ||
      c.step_bytes % 16 != 0 || c.step_bytes > c.slot_bytes)
    return "nvls: needs 2+ ranks, 1+ channels, 1 to " + std::to_string(kMaxReducers) +
           " reducers, a slot of a multiple of 16 bytes and steps of a multiple of 16 up to the slot";
  if (c.ring && !c.allreduce) return "nvls: the ring comparison is an AllReduce";
  return {};
}

NvlsRunResult run_nvls(const NvlsRunConfig& c, gpu_sim::SchedOptions so) {
  NvlsRunResult r;
  const uint32_t n = c.ranks, es = dtype_bytes(c.dtype);
  auto refused = [&r](const std::string& why) {  // an error before anything ran
    r.failure = why, r.kind = sim::RunKind::kError;
    return r;
  };
  if (std::string e = config_error(c); !e.empty()) return refused(e);
  // (The timed model charges a reducer's step to its PostRecv thread: with a sync warp its
  // PostSend's bc_tail would be stamped before the step's time.)
  if (c.sync_warp && so.policy == gpu_sim::Policy::kTimed) return refused("nvls: the timed model runs without a sync warp");
  if (!c.ring && multimem_pack_bytes(c.dtype, c.op) == 0) {
    return refused(std::string("nvls: multimem.ld_reduce has no such form: ") + redop_name(c.op) + " of " + dtype_name(c.dtype) +
                   " (NCCL runs another algorithm)");
  }
  const uint64_t in_elems = c.allreduce ? c.count : c.count * n;
  const uint32_t calls = std::max(c.calls, 1u);
  std::mt19937_64 rng(c.seed);
  // Each call's inputs ([call][rank], empty when phantom) and its reference, every rank's
  // element combined in rank order. The input buffers hold call 0's; a kernel on the rank's
  // stream writes each later call's before it.
  std::vector<std::vector<std::vector<uint8_t>>> call_in(calls, std::vector<std::vector<uint8_t>>(n, std::vector<uint8_t>(c.phantom ? 0 : in_elems * es)));
  std::vector<std::vector<uint8_t>> call_ref(calls);
  for (uint32_t k = 0; k < calls; ++k) {
    for (auto& v : call_in[k])
      for (uint64_t e = 0; e < v.size() / es; ++e) {
        if (c.random_floats && c.dtype == DType::kF32) {
          const float f = std::uniform_real_distribution<float>(-1, 1)(rng);
          std::memcpy(v.data() + e * es, &f, 4);
        } else {
          put_small(c.dtype, v.data() + e * es, int(rng() % 17) - 8);
        }
      }
    call_ref[k] = call_in[k][0];
    for (uint32_t g = 1; g < n && !c.phantom; ++g) reduce_into(c.dtype, c.op, call_ref[k].data(), call_in[k][g].data(), uint32_t(call_ref[k].size()));
  }
  std::vector<mem::LineBytes> in(n);
  for (uint32_t g = 0; g < n; ++g) in[g].assign(call_in[0][g].begin(), call_in[0][g].end());
  std::vector<std::string> wrong(n);  // per rank: the first call whose output differed

  gpu_sim::Scheduler s(so);
  gpu_sim::Multicast mc(c.multicast_slots, so.seed, so.costs);  // reduction orders: the run's seed
  Region region{c.slot_bytes};
  // One multicast object (as NCCL: rank 0 creates it, every rank adds its GPU, binds its
  // physical memory and maps it) holding a region per (head, channel).
  const uint64_t regions = uint64_t(n) * c.channels;
  const uint64_t stride = c.phantom ? Region::kFlagBytes : region.bytes();  // sizes only: the flags alone
  std::vector<mem::LineBytes> phys(n);
  for (auto& p : phys) p.assign(regions * stride, 0);
  std::vector<RankMcs> mcs(n, RankMcs{{}, c.channels});
  r.outputs.assign(n, mem::LineBytes(c.phantom ? 0 : c.count * es, 0));
  try {
    for (uint32_t k = 0; k < c.extra_objects; ++k) (void)mc.create(4096, n);  // slots other communicators hold
    const uint32_t obj = mc.create(regions * stride, n);
    for (uint32_t g = 0; g < n; ++g) mc.add_device(obj, g);
    for (uint32_t g = 0; g < n; ++g) mc.bind(obj, g, phys[g].data());
    for (uint32_t g = 0; g < n; ++g)
      for (uint64_t i = 0; i < regions; ++i) mcs[g].v.push_back({&mc.map(obj, g), i * stride, nullptr, i});
    if (c.registered != Registered::kNone && !c.phantom) {  // each rank's input and output bound to an object of their own
      const uint32_t ins = mc.create(in_elems * es, n), outs = mc.create(c.count * es, n);
      for (uint32_t g = 0; g < n; ++g) mc.add_device(ins, g), mc.add_device(outs, g);
      for (uint32_t g = 0; g < n; ++g) mc.bind(ins, g, in[g].data()), mc.bind(outs, g, r.outputs[g].data());
      for (uint32_t g = 0; g < n; ++g) mcs[g].in = {&mc.map(ins, g), 0}, mcs[g].out = {&mc.map(outs, g), 0};
    }
  } catch (const std::invalid_argument& e) {
    return refused(e.what());
  }
  // Positions, in sequentially consistent runs (in the weak mode a flag's memory may run
  // ahead of what a member's loads return).
  Positions pos{region, n, c.channels, c.reducers, c.allreduce, c.phantom || c.registered == Registered::kNone, &mcs, {}};
  if (!c.ring && c.positions && so.memory == gpu_sim::MemoryModel::kSc) {
    for (uint32_t g = 0; g < n; ++g)
      for (uint64_t i = 0; i < regions; ++i) {
        mcs[g].v[i].pos = &pos;
        auto check = [&pos, i](const void*) { return pos.note(pos.band(i)); };
        if (!c.phantom) {  // (a sizes-only region has no FIFO)
          uint8_t* fifo = mcs[g].v[i].uc(region.red(0));
          s.check_stores(fifo, kSteps * region.slot_bytes, [&pos, g, i, fifo](const void* at) {
            return pos.note(pos.staged(g, i, Region::kFlagBytes + uint64_t(static_cast<const uint8_t*>(at) - fifo)));
          });
        }
        s.check_stores(mcs[g].v[i].uc(region.flag(kRedTail)), 8, check);
        auto base = [&](uint32_t which) {  // a role's end: the base for its next call stored
          s.check_stores(mcs[g].v[i].uc(region.flag(which)), 8, [&pos, g, i, which](const void* at) {
            return pos.note(pos.ended(g, i, which, *static_cast<const uint64_t*>(at)));
          });
        };
        base(kScatterBase);
        if (c.allreduce) base(kGatherBase);
        for (uint32_t j = 0; j < c.reducers; ++j) {
          base(reducer_flag(kReduceBase, j));
          if (c.allreduce) base(reducer_flag(kBroadcastBase, j));
        }
        if (c.allreduce) s.check_stores(mcs[g].v[i].uc(region.flag(kBcHead)), 8, check);
        for (uint32_t j = 0; j < c.reducers; ++j) {
          s.check_stores(mcs[g].v[i].uc(region.flag(reducer_flag(kRedHead, j))), 8, check);
          if (c.allreduce) s.check_stores(mcs[g].v[i].uc(region.flag(reducer_flag(kBcTail, j))), 8, check);
        }
      }
  }
  std::vector<Args> args(n);
  // Rank g's stream: per call, the call's input written (after the first), the collective's
  // kernel, then its output read and compared with the call's reference — stream-ordered user
  // work around each call, which the collective must neither read early nor write late.
  auto run_stream = [&](uint32_t g, const std::string& name, const gpu_sim::LaunchConfig& cfg, std::function<void(gpu_sim::SimCtx&)> body) {
    auto q = std::make_shared<std::vector<StreamKernel>>();
    const std::string rank = "rank" + std::to_string(g);
    for (uint32_t k = 0; k < calls; ++k) {
      const std::string call = calls > 1 ? " call " + std::to_string(k) : "";
      if (k > 0 && !c.phantom)
        q->push_back({rank + " input" + call, {1, 1, 1, g}, [&in, &call_in, g, k](gpu_sim::SimCtx& ctx) {
                        ctx.write_bytes(in[g].data(), call_in[k][g].data(), in[g].size());
                      }});
      q->push_back({name + call, cfg, body});
      if (!c.phantom)  // (read also with random floats: an early read is a race; compared only when exact)
        q->push_back({rank + " output check" + call, {1, 1, 1, g}, [&, g, k](gpu_sim::SimCtx& ctx) {
                        std::vector<uint8_t> got(r.outputs[g].size());
                        ctx.read_bytes(got.data(), r.outputs[g].data(), got.size());
                        if (c.random_floats) return;
                        const uint8_t* want = call_ref[k].data() + (c.allreduce ? 0 : uint64_t(g) * c.count * es);
                        for (uint64_t e = 0; e < c.count && wrong[g].empty(); ++e)
                          if (std::memcmp(got.data() + e * es, want + e * es, es) != 0)
                            wrong[g] = "rank " + std::to_string(g) + ": element " + std::to_string(e) + " of " + std::to_string(c.count) +
                                       (calls > 1 ? " (call " + std::to_string(k) + ")" : "") + " differs from the reference (" +
                                       dtype_name(c.dtype) + " " + redop_name(c.op) + ")";
                      }});
    }
    launch_stream(s, q);
  };
  for (uint32_t g = 0; g < n; ++g) {
    Args& a = args[g];
    a.nranks = n, a.rank = g, a.channels = c.channels, a.reducers = c.reducers;
    a.dtype = c.dtype, a.op = c.op, a.allreduce = c.allreduce, a.count = c.count;
    a.region = region;
    a.step_bytes = c.step_bytes;
    a.input = c.phantom ? nullptr : in[g].data();
    a.output = c.phantom ? nullptr : r.outputs[g].data();
    a.plants = c.plants;
    a.registered = c.phantom ? Registered::kNone : c.registered;
    a.sync_warp = c.sync_warp;
    a.warp_hunks = c.warp_hunks;
    if (gpu_sim::RaceDetector* rd = s.race()) {  // race reports name words by region, not host address
      if (!c.phantom) {
        rd->name_range(in[g].data(), in[g].size(), "rank" + std::to_string(g) + ".input");
        rd->name_range(r.outputs[g].data(), r.outputs[g].size(), "rank" + std::to_string(g) + ".output");
      }
      for (uint64_t i = 0; i < regions; ++i)
        rd->name_range(phys[g].data() + i * stride, stride,
                       "rank" + std::to_string(g) + ".head" + std::to_string(i / c.channels) + ".ch" + std::to_string(i % c.channels) + ".region");
    }
    if (c.ring) continue;
    const std::string flag = "rank" + std::to_string(g) + ".";
    for (uint32_t i = 0; i < n * c.channels; ++i) {
      const std::string name = flag + "head" + std::to_string(i / c.channels) + ".ch" + std::to_string(i % c.channels) + ".";
      auto watch = [&](const std::string& what, uint32_t flag) {
        s.watch(name + what, reinterpret_cast<const uint64_t*>(mcs[g].v[i].uc(region.flag(flag))));
      };
      watch("red_tail", kRedTail);
      if (c.allreduce) watch("bc_head", kBcHead);
      for (uint32_t j = 0; j < c.reducers; ++j) {
        const std::string by = c.reducers > 1 ? "[" + std::to_string(j) + "]" : "";
        watch("red_head" + by, reducer_flag(kRedHead, j));
        if (c.allreduce) watch("bc_tail" + by, reducer_flag(kBcTail, j));
      }
    }
    run_stream(g, "nvls " + std::string(c.allreduce ? "allreduce" : "reducescatter") + " rank" + std::to_string(g),
               {ctas_per_rank(a), c.warps_per_cta, c.lanes, g}, [&a, &mcs, g, &c](gpu_sim::SimCtx& ctx) {
                 const uint32_t tid = ctx.warp() * ctx.warp_size() + ctx.lane();
                 (void)nvls_cta(ctx, mcs[g], a, ctx.cta(), tid, c.warps_per_cta * c.lanes);
               });
  }
  RingMemory ring;
  std::vector<RingLink> links;
  std::vector<RingConn> conns;
  if (c.ring) {
    const uint64_t m = uint64_t(n) * c.channels;
    ring.fifo.assign(m, mem::LineBytes(c.phantom ? 0 : kSteps * c.slot_bytes, 0));
    ring.flags.assign(48 * m, 0);
    for (uint32_t g = 0; g < n; ++g) links.push_back({&mc, g, (g + 1) % n});
    for (uint32_t g = 0; g < n; ++g)
      for (uint32_t ch = 0; ch < c.channels; ++ch) {
        const uint64_t me = uint64_t(g) * c.channels + ch, next = uint64_t((g + 1) % n) * c.channels + ch,
                       prev = uint64_t((g + n - 1) % n) * c.channels + ch;
        conns.push_back({c.phantom ? nullptr : ring.fifo[next].data(), ring.tail(next), ring.head(me),
                         c.phantom ? nullptr : ring.fifo[me].data(), ring.tail(me), ring.head(prev), ring.counts(me)});
        const std::string name = "rank" + std::to_string(g) + ".ch" + std::to_string(ch) + ".";
        s.watch(name + "tail", ring.tail(me));
        s.watch(name + "head", ring.head(me));
      }
    for (uint32_t g = 0; g < n; ++g)
      run_stream(g, "ring allreduce rank" + std::to_string(g), {c.channels, c.warps_per_cta, c.lanes, g},
                 [&args, &links, &conns, g, &c](gpu_sim::SimCtx& ctx) {
                   const uint32_t tid = ctx.warp() * ctx.warp_size() + ctx.lane();
                   (void)ring_allreduce_cta(ctx, links[g], args[g], conns[uint64_t(g) * c.channels + ctx.cta()], ctx.cta(), tid,
                                            c.warps_per_cta * c.lanes);
                 });
  }
  r.run = s.run();
  sim::RunKind found = sim::RunKind::kWrongData;
  if (!mc.error().empty()) {
    r.failure = mc.error(), found = sim::RunKind::kError;
  } else if (r.run.outcome != gpu_sim::Outcome::kCompleted) {
    r.failure = std::string(gpu_sim::outcome_name(r.run.outcome)) + ":\n" + r.run.report;
    if (!pos.broken.empty()) r.failure += "\n(first broken rule: " + pos.broken + ")";
  } else if (!pos.broken.empty()) {
    r.failure = "invariant: " + pos.broken;
  } else {
    for (uint32_t g = 0; g < n && r.failure.empty(); ++g) r.failure = wrong[g];
  }
  if (const std::string m = s.memory_report(); !r.failure.empty() && !m.empty()) r.failure += (r.failure.back() == '\n' ? "" : "\n") + m;
  r.kind = sim::finished_or(r.run.outcome, r.failure.empty() ? sim::RunKind::kCompleted : found);
  sim::take_races(r.run, &r.kind, &r.failure);
  if (r.failure.empty() && r.run.sim_time_ns > 0) {
    r.algbw_gbps = double(in_elems * es) / r.run.sim_time_ns;  // bytes per ns = GB/s
    r.busbw_gbps = r.algbw_gbps * (c.allreduce ? 2.0 * (n - 1) / n : double(n - 1) / n);
  }
  return r;
}

}  // namespace doorbell::nvls
