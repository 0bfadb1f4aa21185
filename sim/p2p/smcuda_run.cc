#include "sim/p2p/smcuda_run.h"

#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/p2p/ipc_cache.h"
#include "hw/gpu_sim/cuda_model.h"
#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::p2p {

namespace {

using smcuda::Msg;

// What one rank holds: its send buffers, the receive region of each of the peer's messages,
// its stream and an event per incoming message, and what it sent (for the check).
struct Rank {
  std::vector<uint64_t> send_va;
  uint64_t recv_va = 0;
  gpu_sim::StreamHandle stream = 0;
  std::vector<gpu_sim::EventHandle> events;
  std::vector<std::vector<uint8_t>> sent;  // message i's bytes when it was sent
  std::vector<uint64_t> got;               // bytes received of the peer's message i
  std::vector<bool> complete;              // this rank's send i is complete
  smcuda::Endpoint ep;
  bool cuda_up = false, finished = false;
  std::deque<Msg> inbox;                   // the peer's messages, in order
};

std::string rank_name(uint32_t r) { return "rank " + std::to_string(r); }

}  // namespace

SmcudaRunResult run_smcuda(const SmcudaRunConfig& c, gpu_sim::SchedOptions so) {
  if (c.messages == 0 || c.max_bytes == 0 || c.buffers == 0) return {{}, sim::RunKind::kError, "messages, max_bytes and buffers must be positive"};
  gpu_sim::Scheduler s(so);
  gpu_sim::CudaModel cuda(s, {2, 8, 64 << 10});
  Rank rk[2];
  std::string error;  // a failed mapping or allocation
  std::mt19937_64 sizes(c.seed);
  std::vector<uint64_t> size[2];
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t i = 0; i < c.messages; ++i) size[r].push_back(1 + sizes() % c.max_bytes);
    for (uint32_t k = 0; k < c.buffers; ++k) rk[r].send_va.push_back(cuda.memory().malloc(r, c.max_bytes));
    rk[r].recv_va = cuda.memory().malloc(r, uint64_t(c.messages) * c.max_bytes);
    rk[r].stream = cuda.create_stream(r, gpu_sim::StreamKind::kNonBlocking, "smcuda stream");
    for (uint32_t i = 0; i < c.messages; ++i) rk[r].events.push_back(cuda.create_event());
    rk[r].sent.resize(c.messages), rk[r].got.assign(c.messages, 0), rk[r].complete.assign(c.messages, false);
  }
  s.add_reporter([&] {
    std::string out;
    for (uint32_t r = 0; r < 2; ++r) {
      uint32_t done = 0;
      for (bool b : rk[r].complete) done += b;
      out += "  smcuda " + rank_name(r) + ": set-up " + ipc_state_name(rk[r].ep.ipc.state) + (rk[r].ep.rdma ? ", RDMA flag set" : "") + ", " +
             std::to_string(done) + " of " + std::to_string(c.messages) + " sends complete, " + std::to_string(rk[r].ep.pulls.size()) +
             " pulls in flight, " + std::to_string(rk[r].inbox.size()) + " messages waiting\n";
    }
    return out;
  });
  uint64_t opens = 0, hits = 0, reopens = 0;
  for (uint32_t r = 0; r < 2; ++r) {
    s.add_agent("rank " + std::to_string(r), [&, r](gpu_sim::AgentCtx& a) {
      Rank& me = rk[r];
      Rank& peer = rk[1 - r];
      gpu_sim::DeviceMemory& mem = cuda.memory();
      auto open = [&](const IpcHandle& h) { return mem.ipc_open(a, h); };
      auto close = [&](uint8_t* p, const IpcHandle&) { mem.ipc_close(p); };
      using Cache = IpcCache<decltype(open), decltype(close)>;
      Cache cache(open, close, c.plant_no_buffer_id_check);
      uint8_t* recv = mem.host_ptr(r, me.recv_va);
      struct Host {
        gpu_sim::CudaModel& cuda;
        Rank& me;
        Cache& cache;
        uint8_t* recv;
        uint64_t max_bytes;
        uint32_t r;
        bool peer_access;
        std::string& error;
        IpcHandle handle(uint64_t va) { return cuda.memory().ipc_get_handle(r, va); }
        std::vector<uint8_t> copy_in(uint64_t va, uint64_t n) {
          const uint8_t* p = cuda.memory().host_ptr(r, va);
          return {p, p + n};
        }
        void copy_out(uint32_t seq, const std::vector<uint8_t>& b) {
          std::memcpy(recv + seq * max_bytes, b.data(), b.size());
          me.got[seq] = b.size();
        }
        bool pull(uint32_t seq, const IpcHandle& h, uint64_t va, uint64_t n) {
          const char* why = !peer_access ? "the GPUs cannot access each other" : !me.cuda_up ? "this rank's CUDA is not up" : nullptr;
          if (why != nullptr) {
            if (error.empty()) error = rank_name(r) + ": cuIpcOpenMemHandle for the RGET of message " + std::to_string(seq) + " failed: " + why;
            return false;
          }
          cuda.memcpy_async(me.stream, recv + seq * max_bytes, cache.map(h, va), n);
          cuda.record(me.events[seq], me.stream);
          me.got[seq] = n;
          return true;
        }
        bool pulled(uint32_t seq) { return cuda.query(me.events[seq]); }
        void completed(uint32_t seq) { me.complete[seq] = true; }
      } h{cuda, me, cache, recv, c.max_bytes, r, c.peer_access, error};
      std::vector<Msg> out;
      const auto post = [&] {
        for (Msg& m : out) peer.inbox.push_back(std::move(m));
        out.clear();
      };
      // The BTL's progress: the peer's messages and this side's finished pulls.
      const auto serve = [&] {
        a.point();
        bool did = false;
        while (!me.inbox.empty()) {
          const Msg m = std::move(me.inbox.front());
          me.inbox.pop_front();
          me.ep.on_message(h, m, c.peer_access, out, c.options);
          did = true;
        }
        did |= me.ep.progress(h, out);
        post();
        if (did) a.changed();
        return did;
      };
      // Progress until something moved; false once the run stops.
      const auto pump = [&] { return serve() || a.spin("smcuda: waiting for the peer"); };
      std::mt19937_64 bytes(c.seed * 2 + r);
      for (uint32_t i = 0; i < c.messages; ++i) {
        me.cuda_up = me.ep.ipc.cuda_ready = i >= c.cuda_ready_after[r];
        serve();  // each MPI call progresses the BTL
        uint64_t& va = me.send_va[i % c.buffers];
        if (c.realloc_every != 0 && i != 0 && i % c.realloc_every == 0) {  // free + malloc: same address, new buffer id
          mem.free(r, va);
          va = mem.malloc(r, c.max_bytes);
        }
        uint8_t* p = mem.host_ptr(r, va);
        for (uint64_t b = 0; b < size[r][i]; ++b) p[b] = uint8_t(bytes());
        me.sent[i].assign(p, p + size[r][i]);
        me.complete[i] = me.ep.send(h, i, va, size[r][i], out, c.options);
        post();
        a.changed();
        while (!me.complete[i])
          if (!pump() || !error.empty()) return;
      }
      me.cuda_up = me.ep.ipc.cuda_ready = true;
      me.finished = true;
      while (!(peer.finished && me.inbox.empty() && me.ep.pulls.empty() && peer.inbox.empty()))
        if (!pump() || !error.empty()) return;
      opens += cache.opens(), hits += cache.hits(), reopens += cache.reopens();
    }, false);
  }
  SmcudaRunResult res;
  res.run = s.run();
  for (uint32_t r = 0; r < 2; ++r) {
    res.rgets += rk[r].ep.rgets, res.eagers += rk[r].ep.eagers;
    res.states += (r ? ", " : "") + rank_name(r) + " " + ipc_state_name(rk[r].ep.ipc.state) + (rk[r].ep.rdma ? " (RDMA flag set)" : "");
  }
  res.opens = opens, res.hits = hits, res.reopens = reopens;
  if (!error.empty()) {
    res.failure = error;
    res.kind = sim::RunKind::kError;
    return res;
  }
  if (res.run.outcome != gpu_sim::Outcome::kCompleted) res.failure = std::string(gpu_sim::outcome_name(res.run.outcome)) + ":\n" + res.run.report;
  for (uint32_t r = 0; r < 2 && res.failure.empty(); ++r) {
    const Rank& me = rk[r];
    if (me.ep.rdma && !me.ep.ipc.ipc_usable())
      res.failure = rank_name(r) + " has the RDMA flag set while its set-up is " + ipc_state_name(me.ep.ipc.state);
    const uint8_t* recv = cuda.memory().host_ptr(r, me.recv_va);
    for (uint32_t i = 0; i < c.messages && res.failure.empty(); ++i) {
      const std::vector<uint8_t>& want = rk[1 - r].sent[i];
      if (me.got[i] != want.size() || std::memcmp(recv + i * c.max_bytes, want.data(), want.size()) != 0)
        res.failure = rank_name(r) + ": message " + std::to_string(i) + " from " + rank_name(1 - r) + " (" + std::to_string(want.size()) +
                      " B) is not the bytes sent";
    }
  }
  if (res.failure.empty() && cuda.memory().open_mappings() != 0)
    res.failure = std::to_string(cuda.memory().open_mappings()) + " IPC mappings left open after both ranks finished";
  res.kind = sim::finished_or(res.run.outcome, res.failure.empty() ? sim::RunKind::kCompleted : sim::RunKind::kWrongData);
  sim::take_races(res.run, &res.kind, &res.failure);
  return res;
}

}  // namespace doorbell::p2p
