// Lazy CUDA IPC set-up and the remote-handle cache, as properties: the set-up machine under
// random interleavings, late CUDA initialisation (NOT-READY answers) and lost messages never
// uses IPC between GPUs that cannot peer, never tries more than 5 times, and agrees once the
// messages get through; the cache never delivers into a freed buffer when the owner frees
// and re-allocates at the same address (the owner is the CUDA model's allocator,
// gpu_sim::DeviceMemory, tested here too). Each property finds its planted bugs.
#include "core/p2p/ipc_setup.h"
#include "core/p2p/ipc_cache.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <stdexcept>
#include <tuple>
#include <string>
#include <vector>

#include "hw/gpu_sim/cuda_model.h"
#include "hw/gpu_sim/device_memory.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::p2p {

// One step of the cache property: the owner allocates or frees an address slot, or a transfer
// from an offset of it arrives.
struct CacheOp {
  uint8_t kind;  // % 3: 0 alloc, 1 free, 2 transfer
  uint8_t slot;
  uint16_t offset;
  uint8_t value;
};

inline void showValue(const CacheOp& o, std::ostream& os) {
  os << "{" << int(o.kind % 3) << " slot " << int(o.slot % 4) << " +" << o.offset << " =" << int(o.value) << "}";
}

}  // namespace doorbell::p2p

namespace rc {
template <>
struct Arbitrary<doorbell::p2p::CacheOp> {
  static Gen<doorbell::p2p::CacheOp> arbitrary() {
    return gen::build<doorbell::p2p::CacheOp>(gen::set(&doorbell::p2p::CacheOp::kind), gen::set(&doorbell::p2p::CacheOp::slot),
                                              gen::set(&doorbell::p2p::CacheOp::offset), gen::set(&doorbell::p2p::CacheOp::value));
  }
};
}  // namespace rc

namespace doorbell::p2p {
namespace {

// ---- the set-up machine ----

struct SetupRun {
  bool peer_access = true;
  uint32_t ready_at[2] = {0, 0};  // event index at which each side's CUDA is up
  std::vector<uint32_t> events;   // encoded: what happens next (see run_setup)
};

void showValue(const SetupRun& r, std::ostream& os) {
  os << "peer_access=" << r.peer_access << " ready_at=" << r.ready_at[0] << "," << r.ready_at[1] << " events=";
  for (uint32_t e : r.events) os << e << " ";
}

rc::Gen<SetupRun> gen_setup() {
  return rc::gen::exec([] {
    SetupRun r;
    r.peer_access = *rc::gen::arbitrary<bool>();
    r.ready_at[0] = *rc::gen::inRange(0u, 120u);
    r.ready_at[1] = *rc::gen::inRange(0u, 120u);
    r.events = *rc::gen::container<std::vector<uint32_t>>(*rc::gen::inRange<size_t>(1, 120), rc::gen::arbitrary<uint32_t>());
    return r;
  });
}

// Runs the events; empty when every invariant held, else what broke.
std::string run_setup(const SetupRun& r, const IpcPlants& pl) {
  IpcEndpoint ep[2];
  ep[0].plants = ep[1].plants = pl;
  struct InFlight {
    uint32_t to;
    IpcMsg m;
  };
  std::vector<InFlight> net;
  bool lost = false;
  uint32_t asked[2] = {0, 0};  // requests each side put on the wire, counted here (the endpoint's own count is what is checked)
  auto send = [&](uint32_t s) {
    const IpcMsg m = ep[s].on_send();
    if (m == IpcMsg::kRequest) ++asked[s];
    if (m != IpcMsg::kNone) net.push_back({1 - s, m});
  };
  auto check = [&]() -> std::string {
    for (int s = 0; s < 2; ++s) {
      if (ep[s].ipc_usable() && !r.peer_access) return "side " + std::to_string(s) + " uses IPC between GPUs without peer access";
      if (asked[s] > kIpcMaxTries)
        return "side " + std::to_string(s) + " sent " + std::to_string(asked[s]) + " requests, more than " + std::to_string(kIpcMaxTries) +
               " (its own count of tries says " + std::to_string(ep[s].tries) + ")";
      if (ep[s].state == IpcState::kOk && !ep[1 - s].ipc_usable())
        return "side " + std::to_string(s) + " is OK while the peer is " + ipc_state_name(ep[1 - s].state);
    }
    return {};
  };
  auto deliver = [&](size_t i) {
    const InFlight f = net[i];
    net.erase(net.begin() + long(i));
    const IpcMsg answer = ep[f.to].on_message(f.m, r.peer_access);
    if (answer != IpcMsg::kNone) net.push_back({1 - f.to, answer});
  };
  for (size_t k = 0; k < r.events.size(); ++k) {
    for (int s = 0; s < 2; ++s) ep[s].cuda_ready = k >= r.ready_at[s];
    const uint32_t e = r.events[k];
    switch (e % 4) {
      case 0:
      case 1:  // a GPU-buffer send on side e % 2
        send(e % 2);
        break;
      case 2:  // a message arrives (any order)
        if (!net.empty()) deliver((e / 4) % net.size());
        break;
      case 3:  // rarely, a message is lost
        if (!net.empty() && (e / 4) % 8 == 0) {
          net.erase(net.begin() + long((e / 32) % net.size()));
          lost = true;
        }
        break;
    }
    if (std::string why = check(); !why.empty()) return "after event " + std::to_string(k) + ": " + why;
  }
  // Quiescence: both CUDAs up, every message delivered, each side keeps sending.
  for (int s = 0; s < 2; ++s) ep[s].cuda_ready = true;
  for (int round = 0; round < 100; ++round) {  // long enough for lost requests to be asked again
    while (!net.empty()) deliver(0);
    for (uint32_t s = 0; s < 2; ++s) send(s);
    if (std::string why = check(); !why.empty()) return "at the end: " + why;
  }
  // The two sides agree: both use IPC (peer access works) or both gave up — or, after lost
  // messages, one side ran out of tries while the other had answered yes.
  if (r.peer_access) {
    const bool bad0 = ep[0].state == IpcState::kBad, bad1 = ep[1].state == IpcState::kBad;
    const bool gave_up = (bad0 && ep[0].tries >= kIpcMaxTries) || (bad1 && ep[1].tries >= kIpcMaxTries);
    if (!((ep[0].ipc_usable() && ep[1].ipc_usable()) || (bad0 && bad1) || (lost && gave_up)))
      return std::string("no agreement: ") + ipc_state_name(ep[0].state) + " / " + ipc_state_name(ep[1].state) +
             (lost ? " (messages were lost)" : "");
  }
  return {};
}

RC_GTEST_PROP(IpcSetupProperty, NeverUsesIpcWithoutPeerAccessAndAgrees, ()) {
  const SetupRun r = *gen_setup();
  const std::string why = run_setup(r, {});
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

// Side 0 asks while side 1's CUDA stays down through many round trips (send, deliver the
// request, deliver the NOT-READY, again): where a retry limit matters.
SetupRun peer_never_ready() {
  SetupRun r;
  r.peer_access = true;
  for (uint32_t k = 0; k < 3 * (kIpcMaxTries + 2); ++k) r.events.push_back(k % 3 == 0 ? 0u : 2u);
  r.ready_at[1] = uint32_t(r.events.size()) + 1;
  return r;
}
// Side 0's every request is lost: it asks again after each kIpcResendAfter sends.
SetupRun requests_lost() {
  SetupRun r;
  for (uint32_t round = 0; round < kIpcMaxTries + 3; ++round) {
    r.events.push_back(0);  // a send: the request (round 0) or, kIpcResendAfter sends later, it again
    r.events.push_back(3);  // lost
    for (uint32_t k = 0; k < kIpcResendAfter; ++k) r.events.push_back(0);
  }
  return r;
}

// Independent oracle: the property counts the requests that reach the wire, not the endpoint's
// `tries`. Two slips in that count — a NOT-READY that starts it again, a resend after a
// presumed loss that is not counted — keep `tries` at or under 5 while requests go on: the
// property that checked `tries` passed both (300 cases each, directed shapes included).
TEST(IpcSetupProperty, CountsTheRequestsActuallySent) {
  IpcPlants resets, uncounted;
  resets.not_ready_resets_tries = true;
  uncounted.resend_uncounted = true;
  for (const auto& [pl, shape, name] : {std::tuple{resets, &peer_never_ready, "a NOT-READY resets the tries"},
                                         std::tuple{uncounted, &requests_lost, "a resend is not counted"}}) {
    const bool held = rc::check(name, [&] {
      const SetupRun r = *rc::gen::arbitrary<bool>() ? shape() : *gen_setup();
      const std::string why = run_setup(r, pl);
      RC_ASSERT(why.empty());
    });
    EXPECT_FALSE(held) << name << " was not found";
    EXPECT_NE(run_setup(shape(), pl).find("requests, more than 5 (its own count of tries says"), std::string::npos) << run_setup(shape(), pl);
    EXPECT_EQ(run_setup(shape(), {}), "") << name << ": the directed shape passes without the plant";
  }
}

TEST(IpcSetupProperty, FindsPlantedBugs) {
  IpcPlants no_check, forever;
  no_check.ack_without_peer_check = true;
  forever.retry_forever = true;
  for (const IpcPlants& pl : {no_check, forever}) {
    const bool held = rc::check(pl.retry_forever ? "retry forever" : "ACK without the peer check", [&pl] {
      // Retrying past the limit needs side 0 up and asking while its peer's CUDA stays down
      // through many round trips, which uniform draws give about one case in a hundred (so a
      // run of 300 missed it now and then): every other case is such a run, so the plant is
      // found on every run.
      const SetupRun r = pl.retry_forever && *rc::gen::arbitrary<bool>() ? peer_never_ready() : *gen_setup();
      RC_ASSERT(run_setup(r, pl).empty());
    });
    EXPECT_FALSE(held) << (pl.retry_forever ? "retry forever" : "ACK without the peer check") << " was not found";
  }
}

TEST(IpcSetup, NotReadyThenRetryThenOk) {
  IpcEndpoint a, b;
  b.cuda_ready = false;
  EXPECT_EQ(a.on_send(), IpcMsg::kRequest);
  EXPECT_EQ(b.on_message(IpcMsg::kRequest, true), IpcMsg::kNotReady);
  (void)a.on_message(IpcMsg::kNotReady, true);
  EXPECT_EQ(a.state, IpcState::kInit);
  b.cuda_ready = true;
  EXPECT_EQ(a.on_send(), IpcMsg::kRequest);
  EXPECT_EQ(b.on_message(IpcMsg::kRequest, true), IpcMsg::kAck);
  EXPECT_EQ(b.state, IpcState::kAcked);
  (void)a.on_message(IpcMsg::kAck, true);
  EXPECT_EQ(a.state, IpcState::kOk);
  EXPECT_EQ(a.tries, 2u);
}

TEST(IpcSetup, GivesUpAfterFiveTries) {
  IpcEndpoint a, b;
  b.cuda_ready = false;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(a.on_send(), IpcMsg::kRequest);
    (void)a.on_message(b.on_message(IpcMsg::kRequest, true), true);
  }
  EXPECT_EQ(a.on_send(), IpcMsg::kNone);
  EXPECT_EQ(a.state, IpcState::kBad);
}

// ---- the handle cache ----

// The owner's memory is the CUDA model's allocator (gpu_sim::DeviceMemory): four slots of
// 4 KiB that it mallocs and frees; a freed address is handed to the next malloc of that size,
// with a new buffer id, while a freed allocation some mapping still holds stays alive.
struct Owner {
  static constexpr uint64_t kSlot = 4096;
  gpu_sim::DeviceMemory mem{1};
  uint64_t at[4] = {};  // each slot's live allocation (0: free)
};

std::string run_cache(const std::vector<CacheOp>& ops, bool plant) {
  Owner own;
  auto open = [&own](const IpcHandle& h) { return own.mem.ipc_open(h); };
  auto close = [&own](uint8_t* p, const IpcHandle&) { own.mem.ipc_close(p); };
  IpcCache<decltype(open), decltype(close)> cache(open, close, plant);
  for (size_t i = 0; i < ops.size(); ++i) {
    const CacheOp& o = ops[i];
    uint64_t& va = own.at[o.slot % 4];
    if (o.kind % 3 == 0 && va == 0) {
      va = own.mem.malloc(0, Owner::kSlot);
    } else if (o.kind % 3 == 1 && va != 0) {
      own.mem.free(0, va);
      va = 0;
    } else if (o.kind % 3 == 2 && va != 0) {
      const uint64_t remote = va + o.offset % Owner::kSlot;
      const IpcHandle h = own.mem.ipc_get_handle(0, remote);  // sent with the transfer
      uint8_t* p = cache.map(h, remote);
      *p = o.value;  // the transfer lands where the mapping points
      const std::optional<gpu_sim::AllocInfo> got = own.mem.allocation_of(p);
      if (!got) return "op " + std::to_string(i) + ": delivered outside every allocation";
      if (!got->live || got->buffer_id != h.buffer_id)
        return "op " + std::to_string(i) + ": delivered into " + (got->live ? "live" : "freed") + " buffer " +
               std::to_string(got->buffer_id) + " instead of " + std::to_string(h.buffer_id);
      if (*own.mem.host_ptr(0, remote) != o.value) return "op " + std::to_string(i) + ": the live buffer did not get the byte";
    }
  }
  return {};
}

RC_GTEST_PROP(IpcCacheProperty, NeverDeliversIntoAFreedBuffer, (const std::vector<CacheOp>& ops)) {
  const std::string why = run_cache(ops, false);
  RC_LOG() << why;
  RC_ASSERT(why.empty());
}

TEST(IpcCacheProperty, FindsAMissingBufferIdCheck) {
  const bool held = rc::check("cache without the buffer-id check",
                              [](const std::vector<CacheOp>& ops) { RC_ASSERT(run_cache(ops, true).empty()); });
  EXPECT_FALSE(held);
}

TEST(IpcCache, ReopensAfterFreeAndReallocationAtTheSameAddress) {
  std::vector<uint8_t> a(64), b(64);
  uint64_t opened = 0;
  auto open = [&](const IpcHandle& h) {
    ++opened;
    return h.buffer_id == 1 ? a.data() : b.data();
  };
  auto close = [](uint8_t*, const IpcHandle&) {};
  IpcCache<decltype(open), decltype(close)> c(open, close);
  EXPECT_EQ(c.map({0x1000, 64, 1}, 0x1008), a.data() + 8);
  EXPECT_EQ(c.map({0x1000, 64, 1}, 0x1010), a.data() + 16);  // a hit: no second open
  EXPECT_EQ(c.map({0x1000, 64, 2}, 0x1008), b.data() + 8);   // same address, new allocation
  EXPECT_EQ(opened, 2u);
  EXPECT_EQ(c.hits(), 1u);
  EXPECT_EQ(c.reopens(), 1u);
}

// ---- the model's device memory ----

TEST(DeviceMemory, FreeThenMallocReusesTheAddressWithANewBufferId) {
  gpu_sim::Scheduler s;
  gpu_sim::CudaModel cuda(s, {});
  gpu_sim::DeviceMemory& mem = cuda.memory();
  const uint64_t a = mem.malloc(1, 4096), b = mem.malloc(1, 4096);
  EXPECT_EQ(a, gpu_sim::DeviceMemory::kVaBase + (uint64_t(1) << 40));
  EXPECT_EQ(b, a + gpu_sim::DeviceMemory::kGranule);
  const IpcHandle before = mem.ipc_get_handle(1, a + 100);
  EXPECT_EQ(before.base, a);
  EXPECT_EQ(before.size, 4096u);
  mem.free(1, a);
  EXPECT_EQ(mem.malloc(1, 4096), a);  // same size: the same address
  const IpcHandle after = mem.ipc_get_handle(1, a);
  EXPECT_EQ(after.base, a);
  EXPECT_NE(after.buffer_id, before.buffer_id);  // another allocation
  EXPECT_NE(after.buffer_id, mem.ipc_get_handle(1, b).buffer_id);
  mem.free(1, a);
  mem.free(1, b);
  EXPECT_EQ(mem.malloc(1, 2 * gpu_sim::DeviceMemory::kGranule), a);  // adjacent freed ranges merge
  EXPECT_NE(mem.malloc(0, 4096), a);  // each GPU has its own space
  EXPECT_EQ(mem.host_ptr(0, mem.malloc(0, 1 << 30, /*phantom=*/true)), nullptr);
}

TEST(DeviceMemory, AMappingKeepsFreedBytesAliveUntilClosed) {
  gpu_sim::DeviceMemory mem(2);
  const uint64_t va = mem.malloc(0, 256);
  mem.host_ptr(0, va)[7] = 42;
  const IpcHandle h = mem.ipc_get_handle(0, va);
  uint8_t* m = mem.ipc_open(h);
  EXPECT_EQ(mem.ipc_opens(), 1u);
  mem.free(0, va);
  EXPECT_THROW((void)mem.host_ptr(0, va), std::invalid_argument);  // no longer the owner's
  ASSERT_TRUE(mem.allocation_of(m + 7).has_value());
  EXPECT_FALSE(mem.allocation_of(m + 7)->live);
  EXPECT_EQ(mem.allocation_of(m + 7)->buffer_id, h.buffer_id);
  EXPECT_EQ(m[7], 42);  // still there
  uint8_t* again = mem.ipc_open(h);  // mapped elsewhere still: it can be opened again
  mem.ipc_close(again);
  EXPECT_EQ(mem.allocations(), 1u);
  mem.ipc_close(m);  // the last mapping: destroyed
  EXPECT_EQ(mem.allocations(), 0u);
  EXPECT_FALSE(mem.allocation_of(m + 7).has_value());
  EXPECT_THROW((void)mem.ipc_open(h), std::invalid_argument);
}

TEST(DeviceMemory, FreeingAnUnknownAddressIsAClearError) {
  gpu_sim::DeviceMemory mem(2);
  const uint64_t va = mem.malloc(1, 64);
  try {
    mem.free(1, va + 8);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu 1 address 0x"), std::string::npos) << e.what();
  }
  mem.free(1, va);
  EXPECT_THROW(mem.free(1, va), std::invalid_argument);  // a double free
  EXPECT_THROW(mem.free(5, va), std::invalid_argument);  // no such GPU
  mem.free(0, 0);                                         // cudaFree(nullptr): nothing
}

TEST(DeviceMemory, ChargedOpenCostsIpcOpenNs) {
  gpu_sim::SchedOptions o;
  o.policy = gpu_sim::Policy::kTimed;
  gpu_sim::Scheduler s(o);
  gpu_sim::CudaModel cuda(s, {});
  const IpcHandle h = cuda.memory().ipc_get_handle(0, cuda.memory().malloc(0, 64));
  double took = -1;
  s.add_agent(
      "importer",
      [&](gpu_sim::AgentCtx& a) {
        const double t0 = a.now();
        cuda.memory().ipc_close(cuda.memory().ipc_open(a, h));
        took = a.now() - t0;
      },
      /*daemon=*/false);
  EXPECT_EQ(s.run().outcome, gpu_sim::Outcome::kCompleted);
  EXPECT_DOUBLE_EQ(took, o.costs.ipc_open_ns);
}

}  // namespace
}  // namespace doorbell::p2p

