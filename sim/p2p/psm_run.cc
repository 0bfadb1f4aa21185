#include "sim/p2p/psm_run.h"

#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::p2p {

namespace {

struct EndCuda {
  gpu_sim::StreamHandle stream = 0;
  gpu_sim::EventHandle events[psm::kMaxWindow] = {};
};

struct Connection {
  uint32_t from = 0, to = 0, channel = 0;
  psm::Shm* shm = nullptr;
  psm::End send, recv;
};

std::string conn_name(const Connection& k) {
  return "gpu" + std::to_string(k.from) + "->gpu" + std::to_string(k.to) + " ch" + std::to_string(k.channel);
}

// The run's checks on the control words, made as each store happens.
struct Checker {
  std::map<const uint64_t*, std::string> writer;  // the one agent role that writes each word
  std::map<const uint64_t*, std::string> names;
  std::map<const uint64_t*, const psm::Shm*> shm_of;  // head and tail words
  uint32_t window = 0;
  std::string violation;
  // After a store to head or tail: the sender fills only slots it has credit for (head <=
  // tail), the receiver returns credit only for slots it emptied (tail - window <= head).
  void band(const uint64_t* p) {
    const auto it = shm_of.find(p);
    if (!violation.empty() || it == shm_of.end()) return;
    const psm::Shm& m = *it->second;
    if (m.tail < m.head || m.tail - m.head > window)
      violation = names[p] + ": head " + std::to_string(m.head) + " and tail " + std::to_string(m.tail) +
                  " leave the band 0 <= tail - head <= " + std::to_string(window);
  }
  void store(const std::string& who, const uint64_t* p, uint64_t old, uint64_t v, bool is_size, bool send) {
    if (!violation.empty()) return;
    const std::string& n = names[p];
    if (!is_size) {
      auto [it, fresh] = writer.emplace(p, who);
      if (!fresh && it->second != who) violation = n + " written by " + who + " and by " + it->second;
      else if (v < old) violation = n + " moved back from " + std::to_string(old) + " to " + std::to_string(v) + " (" + who + ")";
    } else if (send && old != psm::kSlotFree) {
      violation = who + " filled " + n + " while it held " + std::to_string(old) + " B not yet taken";
    } else if (!send && old == psm::kSlotFree) {
      violation = who + " freed " + n + ", which was already free";
    }
  }
};

struct Host {
  gpu_sim::AgentCtx& a;
  gpu_sim::CudaModel& cuda;
  std::vector<EndCuda>& ends;
  Checker& check;
  std::string who;
  bool send;
  gpu_sim::EventHandle ready_event;
  uint64_t* copied;
  uint64_t load(const uint64_t* p) { return a.load64(p, "psm proxy", "control word", 0); }
  void store(uint64_t* p, uint64_t v) {
    check.store(who, p, *p, v, check.shm_of.count(p) == 0, send);  // not head or tail: a slot's size
    a.store64(p, v);
    check.band(p);
  }
  void memcpy_async(const psm::End& e, void* dst, const void* src, uint64_t n) {
    *copied += n;
    cuda.memcpy_async(ends[e.id].stream, dst, src, n);
  }
  void record(const psm::End& e, uint32_t slot) { cuda.record(ends[e.id].events[slot], ends[e.id].stream); }
  bool query(const psm::End& e, uint32_t slot) const { return cuda.query(ends[e.id].events[slot]); }
  bool ready() const { return cuda.query(ready_event); }
};

}  // namespace

PsmRunResult run_psm(const PsmRunConfig& c, gpu_sim::SchedOptions so) {
  const psm::Choices& ch = c.choices;
  if (ch.window == 0 || ch.window > psm::kMaxWindow) return {{}, sim::RunKind::kError, "window: 1..16 slots", 0};
  if (ch.step_bytes == 0 || c.channels == 0 || c.calls == 0) return {{}, sim::RunKind::kError, "step_bytes, channels and calls must be positive", 0};
  if (ch.chunk_bytes != 0 && ch.chunk_bytes < ch.step_bytes)
    return {{}, sim::RunKind::kError, "chunk_bytes (the slot stride) below step_bytes: slots would overlap", 0};
  const uint64_t per_channel = c.bytes_per_peer / c.channels;
  if (per_channel * c.channels != c.bytes_per_peer) return {{}, sim::RunKind::kError, "bytes_per_peer must split evenly over the channels", 0};

  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::unique_ptr<psm::Shm>> shms;
  std::map<std::pair<uint32_t, uint32_t>, psm::Shm*> pair_shm;
  Checker check;
  for (uint32_t f = 0; f < c.gpus; ++f)
    for (uint32_t t = 0; t < c.gpus; ++t) {
      if (f == t || (!c.alltoall && !(f == 0 && t == 1))) continue;
      for (uint32_t k = 0; k < c.channels; ++k) {
        auto cn = std::make_unique<Connection>();
        cn->from = f, cn->to = t, cn->channel = k;
        psm::Shm*& shared = pair_shm[{f, t}];
        if (!c.shm_per_pair || shared == nullptr) {
          shms.push_back(std::make_unique<psm::Shm>());
          psm::set_up(*shms.back(), ch);
          shared = shms.back().get();
          const std::string n = c.shm_per_pair ? "gpu" + std::to_string(f) + "->gpu" + std::to_string(t) : conn_name(*cn);
          check.names[&shared->head] = n + ".head";
          check.names[&shared->tail] = n + ".tail";
          check.shm_of[&shared->head] = check.shm_of[&shared->tail] = shared;
          for (uint32_t s = 0; s < psm::kMaxWindow; ++s) check.names[&shared->size[s]] = n + ".size[" + std::to_string(s) + "]";
        }
        cn->shm = shared;
        cn->send.shm = cn->recv.shm = shared;
        conns.push_back(std::move(cn));
      }
    }
  // The user's buffers, per GPU and call: send (a part per peer) and receive (a part per peer).
  const uint64_t user_bytes = uint64_t(c.gpus) * c.bytes_per_peer;
  std::vector<std::vector<std::vector<uint8_t>>> src(c.gpus), dst(c.gpus);
  if (!c.phantom) {
    std::mt19937_64 rng(c.seed);
    for (uint32_t g = 0; g < c.gpus; ++g)
      for (uint32_t k = 0; k < c.calls; ++k) {
        src[g].emplace_back(user_bytes);
        for (uint8_t& b : src[g].back()) b = uint8_t(rng());
        dst[g].emplace_back(user_bytes, 0);
      }
  }

  check.window = ch.window;
  gpu_sim::Scheduler s(so);
  std::string refused;  // a receive proxy's refusal of a slot's size
  s.add_reporter([&] {
    std::string out;
    for (const auto& k : conns)
      out += "  psm " + conn_name(*k) + ": sendMem.head " + std::to_string(k->shm->head) + ", recvMem.tail " + std::to_string(k->shm->tail) +
             "; send side step " + std::to_string(k->send.step) + ", receive side step " + std::to_string(k->recv.step) + "\n";
    return out;
  });
  gpu_sim::CudaModel cuda(s, {c.gpus, 8, c.copy_bytes_per_step});
  std::vector<EndCuda> ends(conns.size() * 2);
  for (uint32_t i = 0; i < conns.size(); ++i) {
    Connection& k = *conns[i];
    k.send.id = 2 * i, k.recv.id = 2 * i + 1;
    uint64_t va = 0;
    try {
      va = cuda.memory().malloc(k.to, ch.window * ch.slot_stride(), c.phantom);
    } catch (const std::invalid_argument& e) {
      return {{}, sim::RunKind::kError, std::string("device memory: ") + e.what(), 0};
    }
    k.send.fifo = k.recv.fifo = cuda.memory().host_ptr(k.to, va);
  }
  std::vector<uint64_t> copied(c.gpus, 0);
  for (uint32_t g = 0; g < c.gpus; ++g) {
    std::vector<Connection*> out, in;
    for (const auto& k : conns) {
      if (k->from == g) out.push_back(k.get());
      if (k->to == g) in.push_back(k.get());
    }
    if (out.empty() && in.empty()) continue;
    s.add_agent("proxy thread gpu" + std::to_string(g), [&, g, out, in](gpu_sim::AgentCtx& a) {
      const gpu_sim::StreamHandle user = cuda.create_stream(g, gpu_sim::StreamKind::kBlocking, "user stream");
      for (Connection* k : out) {
        EndCuda& e = ends[k->send.id];
        e.stream = c.proxy_stream == gpu_sim::StreamKind::kLegacyDefault ? cuda.legacy_default(g) : cuda.create_stream(g, c.proxy_stream);
        for (uint32_t s = 0; s < ch.window; ++s) e.events[s] = cuda.create_event();
      }
      for (Connection* k : in) {
        EndCuda& e = ends[k->recv.id];
        e.stream = c.proxy_stream == gpu_sim::StreamKind::kLegacyDefault ? cuda.legacy_default(g) : cuda.create_stream(g, c.proxy_stream);
        for (uint32_t s = 0; s < ch.window; ++s) e.events[s] = cuda.create_event();
      }
      for (uint32_t call = 0; call < c.calls; ++call) {
        // The user's work before the call, and the call's readyEvent behind it.
        cuda.launch(user, "user kernel gpu" + std::to_string(g), {1, 1, 1}, [](gpu_sim::SimCtx&) {});
        const gpu_sim::EventHandle ready = cuda.create_event();
        cuda.record(ready, user);
        std::vector<psm::Sub> send_subs(out.size()), recv_subs(in.size());
        for (uint32_t i = 0; i < out.size(); ++i) {
          psm::Sub& sb = send_subs[i];
          sb.end = &out[i]->send;
          sb.bytes = per_channel;
          if (!c.phantom) sb.user = src[g][call].data() + out[i]->to * c.bytes_per_peer + out[i]->channel * per_channel;
        }
        for (uint32_t i = 0; i < in.size(); ++i) {
          psm::Sub& sb = recv_subs[i];
          sb.end = &in[i]->recv;
          sb.bytes = per_channel;
          if (!c.phantom) sb.user = dst[g][call].data() + in[i]->from * c.bytes_per_peer + in[i]->channel * per_channel;
        }
        psm::Args sa{send_subs.data(), uint32_t(send_subs.size())}, ra{recv_subs.data(), uint32_t(recv_subs.size())};
        Host hs{a, cuda, ends, check, "gpu" + std::to_string(g) + " send proxy", true, ready, &copied[g]};
        Host hr{a, cuda, ends, check, "gpu" + std::to_string(g) + " receive proxy", false, ready, &copied[g]};
        a.changed();
        for (;;) {
          a.point();
          bool did = psm::send_progress(hs, sa, ch, c.plants);
          did |= psm::recv_progress(hr, ra, ch, c.plants);
          for (uint32_t i = 0; i < recv_subs.size(); ++i)
            if (recv_subs[i].refused) {
              if (refused.empty())
                refused = conn_name(*in[i]) + ": the receive proxy found a slot size of " + std::to_string(recv_subs[i].bad_size) +
                          " B at step " + std::to_string(recv_subs[i].base + recv_subs[i].transmitted) + " and stopped";
              return;
            }
          if (sa.finished() && ra.finished()) break;
          if (did) a.changed();
          else if (!a.spin("psm proxy: nothing to post or complete")) return;
        }
      }
    }, false);
  }
  PsmRunResult r;
  r.run = s.run();
  r.bytes_copied = cuda.bytes_copied();
  if (!refused.empty()) r.failure = refused + "\n" + r.run.report;
  else if (r.run.outcome != gpu_sim::Outcome::kCompleted) r.failure = std::string(gpu_sim::outcome_name(r.run.outcome)) + ":\n" + r.run.report;
  else if (!check.violation.empty()) r.failure = "invariant: " + check.violation;
  for (const auto& k : conns) {
    if (!r.failure.empty()) break;
    const psm::Shm& m = *k->shm;
    if (k->send.step != k->recv.step || k->send.step != c.calls * psm::steps_for(per_channel, ch.step_bytes))
      r.failure = conn_name(*k) + ": the send side ended at step " + std::to_string(k->send.step) + ", the receive side at " +
                  std::to_string(k->recv.step);
    else if (!c.shm_per_pair && (m.tail < m.head || m.tail - m.head != ch.window))
      r.failure = conn_name(*k) + ": ended with head " + std::to_string(m.head) + " and tail " + std::to_string(m.tail);
  }
  for (uint32_t g = 0; r.failure.empty() && !c.phantom && g < c.gpus; ++g)
    for (uint32_t call = 0; r.failure.empty() && call < c.calls; ++call)
      for (const auto& k : conns) {
        if (k->to != g) continue;
        const uint64_t part = k->from * c.bytes_per_peer + k->channel * per_channel;
        const uint8_t* want = src[k->from][call].data() + g * c.bytes_per_peer + k->channel * per_channel;
        for (uint64_t b = 0; b < per_channel; ++b)
          if (dst[g][call][part + b] != want[b]) {
            r.failure = conn_name(*k) + " call " + std::to_string(call) + ": byte " + std::to_string(b) + " (step " +
                        std::to_string(b / ch.step_bytes) + ") differs";
            break;
          }
        if (!r.failure.empty()) break;
      }
  r.kind = sim::finished_or(r.run.outcome, r.failure.empty() ? sim::RunKind::kCompleted : sim::RunKind::kWrongData);
  return r;
}

}  // namespace doorbell::p2p
