#include "sim/p2p/psm_run.h"

#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/exec/scope.h"
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

// One call on one GPU: its send and receive args (one sub per outgoing / incoming
// connection) and the readyEvent the user recorded behind its own work.
struct Call {
  std::vector<psm::Sub> send_subs, recv_subs;
  psm::Args send, recv;
  gpu_sim::EventHandle ready = 0;
  uint64_t done_word = 0;  // set when both args finished: what the user's stream may wait on
  bool posted = false;
  bool finished() const { return posted && send.finished() && recv.finished(); }
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
  uint64_t free_size = psm::kSlotFree;
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
    } else if (send && old != free_size) {
      violation = who + " filled " + n + " while it held " + std::to_string(old) + " B not yet taken";
    } else if (!send && old == free_size) {
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
  uint64_t load(const uint64_t* p) { return a.load64(p, "psm proxy", "control word", 0); }
  void store(uint64_t* p, uint64_t v) {
    check.store(who, p, *p, v, check.shm_of.count(p) == 0, send);  // not head or tail: a slot's size
    a.store64(p, v);
    check.band(p);
  }
  void memcpy_async(const psm::End& e, void* dst, const void* src, uint64_t n) { cuda.memcpy_async(ends[e.id].stream, dst, src, n); }
  void record(const psm::End& e, uint32_t slot) { cuda.record(ends[e.id].events[slot], ends[e.id].stream); }
  bool query(const psm::End& e, uint32_t slot) const { return cuda.query(ends[e.id].events[slot]); }
  bool ready() const { return cuda.query(ready_event); }
};

std::string pos(uint64_t base, uint64_t transmitted, uint64_t done) {
  return "base " + std::to_string(base) + " + transmitted " + std::to_string(transmitted) + " (done " + std::to_string(done) + ")";
}

}  // namespace

const char* shm_scope_name(ShmScope s) {
  switch (s) {
    case ShmScope::kConnection: return "connection";
    case ShmScope::kRankPair: return "rank_pair";
    case ShmScope::kUnorderedPair: return "unordered_pair";
    case ShmScope::kPairChannel: return "pair_channel";
  }
  return "?";
}

std::string PsmStall::line() const {
  if (connection.empty()) return "";
  return connection + ": send sub at " + pos(send_base, send_transmitted, send_done) + " of " + std::to_string(nsteps) +
         " steps sees recvMem.tail " + std::to_string(send_sees_tail) + "; receive sub at " + pos(recv_base, recv_transmitted, recv_done) +
         " sees sendMem.head " + std::to_string(recv_sees_head);
}

PsmRunResult run_psm(const PsmRunConfig& c, gpu_sim::SchedOptions so) {
  const psm::Choices& ch = c.choices;
  if (ch.window == 0 || ch.window > psm::kMaxWindow) return {{}, sim::RunKind::kError, "window: 1..16 slots"};
  if (ch.step_bytes == 0 || c.channels == 0 || c.calls == 0 || c.gpus < 2)
    return {{}, sim::RunKind::kError, "step_bytes, channels and calls must be positive, and there must be 2 GPUs or more"};
  if (ch.chunk_bytes != 0 && ch.chunk_bytes < ch.step_bytes)
    return {{}, sim::RunKind::kError, "chunk_bytes (the slot stride) below step_bytes: slots would overlap"};
  const uint64_t per_channel = c.bytes_per_peer / c.channels;
  if (per_channel * c.channels != c.bytes_per_peer) return {{}, sim::RunKind::kError, "bytes_per_peer must split evenly over the channels"};

  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::unique_ptr<psm::Shm>> shms;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, psm::Shm*> shared_shm;
  Checker check;
  check.window = ch.window;
  check.free_size = ch.free_size();
  for (uint32_t f = 0; f < c.gpus; ++f)
    for (uint32_t t = 0; t < c.gpus; ++t) {
      if (f == t || (!c.alltoall && t != (f + 1) % c.gpus)) continue;
      for (uint32_t k = 0; k < c.channels; ++k) {
        auto cn = std::make_unique<Connection>();
        cn->from = f, cn->to = t, cn->channel = k;
        const bool both_ways = c.shm == ShmScope::kUnorderedPair || c.shm == ShmScope::kPairChannel;
        const uint32_t lo = both_ways ? std::min(f, t) : f, hi = both_ways ? std::max(f, t) : t;
        psm::Shm*& shared = shared_shm[{lo, hi, c.shm == ShmScope::kPairChannel ? k : 0}];
        if (c.shm == ShmScope::kConnection || shared == nullptr) {
          shms.push_back(std::make_unique<psm::Shm>());
          psm::set_up(*shms.back(), ch);
          shared = shms.back().get();
          const std::string pair = "gpu" + std::to_string(lo) + (both_ways ? "<->gpu" : "->gpu") + std::to_string(hi);
          const std::string n = c.shm == ShmScope::kConnection ? conn_name(*cn)
                                : c.shm == ShmScope::kPairChannel ? pair + " ch" + std::to_string(k)
                                                                  : pair;
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

  // Per GPU its calls, kept here so that the hang report and the stall can read the subs.
  std::vector<std::vector<Call>> calls(c.gpus);
  for (auto& v : calls) v.resize(c.calls);
  // Each connection's earliest unfinished send and receive subs.
  const auto stalled = [&](const Connection& k) {
    std::pair<const psm::Sub*, const psm::Sub*> r{nullptr, nullptr};
    for (const Call& cl : calls[k.from])
      for (const psm::Sub& sb : cl.send_subs)
        if (!r.first && sb.end == &k.send && !sb.finished()) r.first = &sb;
    for (const Call& cl : calls[k.to])
      for (const psm::Sub& sb : cl.recv_subs)
        if (!r.second && sb.end == &k.recv && !sb.finished()) r.second = &sb;
    return r;
  };
  gpu_sim::Scheduler s(so);
  std::string refused;  // a receive proxy's refusal of a slot's size
  s.add_reporter([&] {
    std::string out;
    uint32_t shown = 0, more = 0;
    for (const auto& k : conns) {
      const auto [sd, rv] = stalled(*k);
      if (!sd && !rv) continue;
      if (++shown > 8) {
        ++more;
        continue;
      }
      out += "  psm " + conn_name(*k) + ": sendMem.head " + std::to_string(k->shm->head) + ", recvMem.tail " + std::to_string(k->shm->tail);
      if (sd) out += "; send sub " + pos(sd->base, sd->transmitted, sd->done) + " of " + std::to_string(sd->nsteps);
      if (rv) out += "; receive sub " + pos(rv->base, rv->transmitted, rv->done) + " of " + std::to_string(rv->nsteps);
      out += "\n";
    }
    if (more != 0) out += "  psm: " + std::to_string(more) + " more connections unfinished\n";
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
      return {{}, sim::RunKind::kError, std::string("device memory: ") + e.what()};
    }
    k.send.fifo = k.recv.fifo = cuda.memory().host_ptr(k.to, va);
  }
  for (uint32_t g = 0; g < c.gpus; ++g) {
    std::vector<Connection*> out, in;
    for (const auto& k : conns) {
      if (k->from == g) out.push_back(k.get());
      if (k->to == g) in.push_back(k.get());
    }
    s.add_agent("proxy thread gpu" + std::to_string(g), [&, g, out, in](gpu_sim::AgentCtx& a) {
      const gpu_sim::StreamHandle user = cuda.create_stream(g, gpu_sim::StreamKind::kBlocking, "user stream");
      const auto end_cuda = [&](const psm::End& e, gpu_sim::StreamKind kind) {
        EndCuda& ec = ends[e.id];
        ec.stream = kind == gpu_sim::StreamKind::kLegacyDefault ? cuda.legacy_default(g) : cuda.create_stream(g, kind);
        for (uint32_t w = 0; w < ch.window; ++w) ec.events[w] = cuda.create_event();
      };
      for (Connection* k : out) end_cuda(k->send, c.proxy_stream);
      for (Connection* k : in) end_cuda(k->recv, c.recv_proxy_stream);
      // The user's call: its work before the call, the readyEvent behind it, the args.
      const auto post = [&](uint32_t n) {
        Call& cl = calls[g][n];
        cuda.launch(user, "user kernel gpu" + std::to_string(g), {1, 1, 1}, [](gpu_sim::SimCtx&) {});
        cl.ready = cuda.create_event();
        cuda.record(cl.ready, user);
        if (c.user_stream_waits)
          cuda.launch(user, "user stream's wait for call " + std::to_string(n) + " gpu" + std::to_string(g), {1, 1, 1}, [&cl](gpu_sim::SimCtx& x) {
            // Polled without naming the word's address, which would differ from run to run in the report.
            while (x.load(exec::system_scope, exec::acquire, &cl.done_word) == 0)
              if (!x.spin("the call's done word", nullptr, 0)) return;
          });
        cl.send_subs.resize(out.size()), cl.recv_subs.resize(in.size());
        for (uint32_t i = 0; i < out.size(); ++i) {
          psm::Sub& sb = cl.send_subs[i];
          sb.end = &out[i]->send;
          sb.bytes = per_channel;
          if (!c.phantom) sb.user = src[g][n].data() + out[i]->to * c.bytes_per_peer + out[i]->channel * per_channel;
        }
        for (uint32_t i = 0; i < in.size(); ++i) {
          psm::Sub& sb = cl.recv_subs[i];
          sb.end = &in[i]->recv;
          sb.bytes = per_channel;
          if (!c.phantom) sb.user = dst[g][n].data() + in[i]->from * c.bytes_per_peer + in[i]->channel * per_channel;
        }
        cl.send = {cl.send_subs.data(), uint32_t(cl.send_subs.size())};
        cl.recv = {cl.recv_subs.data(), uint32_t(cl.recv_subs.size())};
        cl.posted = true;
      };
      uint32_t first = 0, posted = 0;  // the oldest unfinished call; calls posted
      if (c.overlap_calls)
        while (posted < c.calls) post(posted++);
      a.changed();
      while (first < c.calls) {
        if (posted == first) {
          post(posted++);
          a.changed();
        }
        a.point();
        bool did = false;
        for (uint32_t n = first; n < posted; ++n) {
          Call& cl = calls[g][n];
          Host hs{a, cuda, ends, check, "gpu" + std::to_string(g) + " send proxy", true, cl.ready};
          Host hr{a, cuda, ends, check, "gpu" + std::to_string(g) + " receive proxy", false, cl.ready};
          did |= psm::send_progress(hs, cl.send, ch, c.plants);
          did |= psm::recv_progress(hr, cl.recv, ch, c.plants);
          for (uint32_t i = 0; i < cl.recv_subs.size(); ++i)
            if (const psm::Sub& sb = cl.recv_subs[i]; sb.refused) {
              if (refused.empty())
                refused = conn_name(*in[i]) + ": the receive proxy found a slot size of " + std::to_string(sb.bad_size) + " B at step " +
                          std::to_string(sb.base + sb.transmitted) + " and stopped";
              return;
            }
        }
        while (first < posted && calls[g][first].finished()) a.store64(&calls[g][first++].done_word, 1);
        if (first == c.calls) break;
        if (did) a.changed();
        else if (!a.spin("psm proxy: nothing to post or complete")) return;
      }
    }, false);
  }
  PsmRunResult r;
  r.run = s.run();
  r.bytes_copied = cuda.bytes_copied();
  r.first_violation = check.violation;
  if (r.run.outcome == gpu_sim::Outcome::kHang)
    for (const auto& k : conns) {
      const auto [sd, rv] = stalled(*k);
      if (!sd || !rv) continue;
      if (!r.stall.connection.empty() && sd->base + sd->transmitted >= r.stall.send_base + r.stall.send_transmitted) continue;
      r.stall = {conn_name(*k), sd->base, sd->transmitted, sd->done, sd->nsteps, k->shm->tail, rv->base, rv->transmitted, rv->done, k->shm->head};
    }
  const std::string broke = check.violation.empty() ? "" : "\n(first broken invariant: " + check.violation + ")";
  if (!refused.empty()) r.failure = refused + broke + "\n" + r.run.report;
  else if (r.run.outcome != gpu_sim::Outcome::kCompleted)
    r.failure = std::string(gpu_sim::outcome_name(r.run.outcome)) + (r.stall.connection.empty() ? "" : " at " + r.stall.line()) + broke + ":\n" +
                r.run.report;
  else if (!check.violation.empty()) r.failure = "invariant: " + check.violation;
  // Each byte once into a FIFO slot and once out of it: the proxies' copies add up to twice
  // the bytes the calls carry (a step copied twice, or skipped, shows here).
  const uint64_t posted = r.bytes_copied;
  const uint64_t carried = uint64_t(conns.size()) * per_channel * c.calls;
  if (r.failure.empty() && posted != 2 * carried)
    r.failure = "the proxies copied " + std::to_string(posted) + " B; each of the " + std::to_string(carried) +
                " B the calls carry goes once into a slot and once out: " + std::to_string(2 * carried) + " B";
  for (const auto& k : conns) {
    if (!r.failure.empty()) break;
    const psm::Shm& m = *k->shm;
    if (k->send.step != k->recv.step || k->send.step != c.calls * psm::steps_for(per_channel, ch.step_bytes))
      r.failure = conn_name(*k) + ": the send side ended at step " + std::to_string(k->send.step) + ", the receive side at " +
                  std::to_string(k->recv.step);
    else if (c.shm == ShmScope::kConnection && (m.tail < m.head || m.tail - m.head != ch.window))
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
  const sim::RunKind found = r.failure.empty()                           ? sim::RunKind::kCompleted
                            : r.failure.rfind("invariant: ", 0) == 0 ? sim::RunKind::kBrokenInvariant
                                                                      : sim::RunKind::kWrongData;
  r.kind = sim::finished_or(r.run.outcome, found);
  sim::take_races(r.run, &r.kind, &r.failure);
  return r;
}

}  // namespace doorbell::p2p
