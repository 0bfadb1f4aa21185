#include "sim/p2p/ce_run.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/p2p/ipc_cache.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "hw/mem/line_aligned.h"

namespace doorbell::p2p {

namespace {

// What the send proxy needs of the host, on the CPU model: shared words through the memory
// model, copies and events on the connection's stream.
// It also checks the proxy's positions (the first broken one goes to *broken): a copy is
// posted only for a step the kernel staged, and the tail passes a step only once that step's
// copy completed.
struct ModelHost {
  gpu_sim::AgentCtx& a;
  gpu_sim::CudaModel& cuda;
  gpu_sim::StreamHandle stream;
  const gpu_sim::EventHandle* events;
  uint64_t* copied;
  const ConnShm* shm;
  const ProxySub* sub;
  const std::string* name;
  std::string* broken;
  uint64_t load(const uint64_t* p) { return a.load64(p, "send proxy", "connection word", 0); }
  void store(uint64_t* p, uint64_t v) {
    if (p == &shm->tail && v != 0 && !cuda.completed(events[(v - 1) % kSteps]))
      position(*name + ": tail moved to " + std::to_string(v) + " while the copy of step " + std::to_string(v - 1) +
               " had not completed (a step lands, then its tail)");
    a.store64(p, v);
  }
  void memcpy_async(void* dst, const void* src, uint64_t n) {
    const uint64_t step = sub->base + sub->transmitted;
    if (shm->staged <= step)
      position(*name + ": the copy of step " + std::to_string(step) + " was posted while the kernel had staged " + std::to_string(shm->staged) +
               " (a step is staged, then copied)");
    *copied += n;
    cuda.memcpy_async(stream, dst, src, n);
  }
  void position(const std::string& why) {
    if (broken->empty()) *broken = why;
  }
  void record(uint64_t slot) { cuda.record(events[slot], stream); }
  bool query(uint64_t slot) const { return cuda.query(events[slot]); }
};

// On a line boundary, as are its buffers: the kernel's stores to the control words and the
// FIFO are buffered by line in the weak model, so where malloc put them would steer a seed.
struct alignas(mem::kLineAlignBytes) Link {
  uint32_t from, to;
  ConnShm shm;
  mem::LineBytes send_buf, src, dst;
  // What the send proxy writes, on the receiver's GPU: the FIFO, or with registered buffers the
  // receiver's buffer itself; exported through CUDA IPC, mapped by the proxy before its first copy.
  IpcHandle remote;
  uint8_t* received = nullptr;  // the receiver's buffer as the receiver sees it (null: phantom)
  Conn conn;        // the kernel's view
  Conn proxy_conn;  // the proxy's: its step (H1), registered buffers, the IPC mapping
  gpu_sim::StreamHandle stream = 0;
  gpu_sim::EventHandle events[kSteps] = {};
  ProxySub sub;
  uint64_t copied = 0;  // bytes the proxy enqueued
  std::string name;     // "gpu0->gpu1"
};

// The call's completed bytes as an H3 proxy's counter holds them: an int sign-extends when
// compared with a size_t, a uint32_t wraps.
uint64_t counter_reads(uint64_t completed, uint32_t bits) {
  if (bits == 31) return uint64_t(int64_t(int32_t(uint32_t(completed))));
  if (bits == 32) return uint64_t(uint32_t(completed));
  return completed;
}

}  // namespace

CeRunResult run_ce(const CeRunConfig& c, gpu_sim::SchedOptions so) {
  if (c.kernel_chunk_bytes != 0 && !(c.phantom && c.direct))
    return {{}, sim::RunKind::kError, "kernel_chunk_bytes (hypothesis H1) needs registered buffers (direct) and phantom memory", 0};
  if (c.proxy_counter_bits != 0 && c.proxy_counter_bits != 31 && c.proxy_counter_bits != 32)
    return {{}, sim::RunKind::kError, "proxy_counter_bits (hypothesis H3) is 31 (int), 32 (uint32_t) or 0 (64 bits)", 0};
  std::vector<std::unique_ptr<Link>> links;
  std::mt19937_64 rng(c.seed);
  for (uint32_t f = 0; f < c.gpus; ++f)
    for (uint32_t t = 0; t < c.gpus; ++t) {
      if (f == t || (!c.alltoall && !(f == 0 && t == 1))) continue;
      auto l = std::make_unique<Link>();
      l->from = f, l->to = t;
      if (!c.phantom) {
        if (!c.direct) l->send_buf.assign(kSteps * c.step_bytes, 0);
        l->src.resize(c.bytes);
        for (uint8_t& b : l->src) b = uint8_t(rng());
        if (!c.direct) l->dst.assign(c.bytes, 0);
      }
      // The kernel's view of the connection (its chunk) and the proxy's (step_bytes steps).
      l->conn = {&l->shm, l->send_buf.data(), nullptr, c.kernel_chunk_bytes != 0 ? c.kernel_chunk_bytes : c.step_bytes};
      l->proxy_conn = l->conn;
      l->proxy_conn.step_bytes = c.step_bytes;
      if (c.direct) {
        l->proxy_conn.direct = true;
        l->proxy_conn.direct_bytes = c.bytes;
        l->proxy_conn.src_direct = c.phantom ? nullptr : l->src.data();
      }
      l->sub.nsteps = steps_for(c.bytes, c.step_bytes);
      l->name = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to);
      links.push_back(std::move(l));
    }
  std::string violation, bad_slot;
  so.observe = [&](uint64_t, double) {
    if (!violation.empty()) return;
    for (const auto& l : links) {
      const ConnShm& m = l->shm;
      if (!(m.head <= m.tail && m.tail <= m.staged && m.staged <= m.head + kSteps))
        violation = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to) + ": head " + std::to_string(m.head) +
                    " tail " + std::to_string(m.tail) + " staged " + std::to_string(m.staged) + " break head <= tail <= staged <= head + " +
                    std::to_string(kSteps);
    }
  };
  gpu_sim::Scheduler s(so);
  // Slot ownership, checked where the receiver hands a slot back: it freed the slot's size
  // first (a later step's check of the size then cannot pass on a stale one). Sequentially
  // consistent runs only: in the weak mode the size may still sit in the receiver's buffer.
  if (so.memory == gpu_sim::MemoryModel::kSc)
    for (const auto& l : links)
      s.check_stores(&l->shm.head, sizeof l->shm.head, [l = l.get()](const void*) -> std::string {
        const uint64_t h = l->shm.head;
        if (h == 0 || l->shm.size[(h - 1) % kSteps] == kSlotFree) return {};
        return l->name + ": head moved to " + std::to_string(h) + " with slot " + std::to_string((h - 1) % kSteps) +
               "'s size still set (a slot is freed, then handed back)";
      });
  for (const auto& l : links) {
    const std::string n = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to) + ".";
    s.watch(n + "staged", &l->shm.staged);
    s.watch(n + "tail", &l->shm.tail);
    s.watch(n + "head", &l->shm.head);
    for (uint32_t k = 0; k < kSteps; ++k) s.watch(n + "size[" + std::to_string(k) + "]", &l->shm.size[k]);
  }
  gpu_sim::CudaModel cuda(s, {c.gpus, c.max_connections, c.copy_bytes_per_step});
  if (gpu_sim::RaceDetector* rd = s.race())  // race reports name words by buffer, not host address
    for (const auto& l : links) {
      rd->name_range(l->send_buf.data(), l->send_buf.size(), l->name + ".send_buf");
      rd->name_range(l->src.data(), l->src.size(), l->name + ".src");
      rd->name_range(l->dst.data(), l->dst.size(), l->name + ".dst");
    }
  for (const auto& l : links) {
    uint64_t va = 0;
    try {
      va = cuda.memory().malloc(l->to, c.direct ? c.bytes : kSteps * c.step_bytes, c.phantom);
    } catch (const std::invalid_argument& e) {  // more than a GPU's address space
      return {{}, sim::RunKind::kError, std::string("device memory: ") + e.what(), 0};
    }
    l->remote = cuda.memory().ipc_get_handle(l->to, va);
    l->received = cuda.memory().host_ptr(l->to, va);
    if (gpu_sim::RaceDetector* rd = s.race(); rd != nullptr && l->received != nullptr)
      rd->name_range(l->received, c.direct ? c.bytes : kSteps * c.step_bytes, l->name + (c.direct ? ".recv_buf" : ".recv_fifo"));
    l->conn.recv_fifo = c.direct ? nullptr : l->received;  // the receiver kernel reads its FIFO
  }
  // H3: per GPU, the call's completed bytes and whether its proxy retired the call.
  std::vector<uint64_t> call_completed(c.gpus, 0), call_total(c.gpus, 0);
  std::vector<uint8_t> retired(c.gpus, 0);
  // Hang reports: each connection as both ends see it (NCCL's names in parentheses).
  s.add_reporter([&] {
    std::string out;
    for (uint32_t g = 0; c.proxy_counter_bits != 0 && g < c.gpus; ++g) {
      const uint64_t seen = counter_reads(call_completed[g], c.proxy_counter_bits);
      out += "  gpu" + std::to_string(g) + " send proxy: call " + (retired[g] ? "retired" : "not retired") + "; completed " +
             std::to_string(call_completed[g]) + " of " + std::to_string(call_total[g]) + " B, its " +
             (c.proxy_counter_bits == 31 ? "int" : "uint32_t") + " counter reads " +
             (c.proxy_counter_bits == 31 ? std::to_string(int64_t(seen)) : std::to_string(seen)) + "\n";
    }
    for (const auto& l : links) {
      if (l->sub.finished() && l->shm.head == l->shm.staged) continue;
      out += "  p2p gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to) + ": send proxy at step " +
             std::to_string(l->sub.done) + " of " + std::to_string(l->sub.nsteps) + " (" + std::to_string(l->sub.transmitted) +
             " posted); staged by the kernel (recvTail) " + std::to_string(l->shm.staged) + ", landed (tail) " +
             std::to_string(l->shm.tail) + ", consumed by the receiver (sendHead) " + std::to_string(l->shm.head) + "\n";
    }
    return out;
  });
  for (uint32_t g = 0; g < c.gpus; ++g) {
    std::vector<Link*> out, in;
    for (const auto& l : links) {
      if (l->from == g) out.push_back(l.get());
      if (l->to == g) in.push_back(l.get());
    }
    if (out.empty() && in.empty()) continue;
    s.add_agent("host thread gpu" + std::to_string(g), [&, g, out, in](gpu_sim::AgentCtx& a) {
      const gpu_sim::StreamHandle ks =
          c.kernel_stream == gpu_sim::StreamKind::kLegacyDefault ? cuda.legacy_default(g) : cuda.create_stream(g, c.kernel_stream);
      for (uint32_t k = 0; k < c.extra_streams; ++k) (void)cuda.create_stream(g, gpu_sim::StreamKind::kNonBlocking);
      for (Link* l : out) {
        l->stream = c.proxy_stream == gpu_sim::StreamKind::kLegacyDefault ? cuda.legacy_default(g)
                                                                          : cuda.create_stream(g, c.proxy_stream);
        for (gpu_sim::EventHandle& e : l->events) e = cuda.create_event();
      }
      // The kernel: lane i < out moves out[i]'s steps, the rest receive.
      const uint32_t lanes = uint32_t(out.size() + in.size());
      cuda.launch(ks, "p2p kernel gpu" + std::to_string(g), {1, 1, lanes}, [&c, &bad_slot, out, in](gpu_sim::SimCtx& ctx) {
        const uint32_t i = ctx.lane();
        if (i < out.size()) {
          (void)ce_send(ctx, out[i]->conn, 0, c.phantom || c.direct ? nullptr : out[i]->src.data(), c.bytes, c.plants);
        } else if (const Link* l = in[i - out.size()];
                   ce_recv(ctx, l->conn, 0, c.phantom || c.direct ? nullptr : in[i - out.size()]->dst.data(), c.bytes, c.plants) == CeResult::kBadSlot &&
                   bad_slot.empty()) {
          bad_slot = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to) +
                     ": the receiver found a slot without the size of the step it was told had landed";
        }
      });
      if (c.next_kernel_queued) cuda.launch(ks, "next op's kernel gpu" + std::to_string(g), {1, 1, 1}, [](gpu_sim::SimCtx&) {});
      a.changed();
      // Lazily, before the first copy: each peer's buffer through CUDA IPC (ipc_open_ns each,
      // in the timed schedule), kept in this thread's handle cache.
      auto open = [&](const IpcHandle& h) { return cuda.memory().ipc_open(a, h); };
      auto close = [&](uint8_t* m, const IpcHandle& h) { m != nullptr ? cuda.memory().ipc_close(m) : cuda.memory().ipc_close(h); };
      IpcCache<decltype(open), decltype(close)> cache(open, close);  // closes its mappings however the thread ends
      for (Link* l : out) (c.direct ? l->proxy_conn.dst_direct : l->proxy_conn.recv_fifo) = cache.map(l->remote, l->remote.base);
      // The send proxies of this GPU's connections, until the call retires (all of them
      // finished; H3: what the counter says) and the kernel is done.
      call_total[g] = c.bytes * out.size();
      for (;;) {
        a.point();
        bool did = false;
        uint64_t completed = 0;
        for (Link* l : out) {
          if (!retired[g]) {
            ModelHost h{a, cuda, l->stream, l->events, &l->copied, &l->shm, &l->sub, &l->name, &violation};
            did |= send_proxy_progress(h, l->proxy_conn, l->sub, c.plants);
          }
          if (l->sub.bad_size != 0) return;  // reported after the run
          completed += std::min(l->sub.done * c.step_bytes, c.bytes);
        }
        call_completed[g] = completed;
        if (!retired[g] && counter_reads(completed, c.proxy_counter_bits) >= call_total[g]) retired[g] = 1, did = true;
        if (retired[g] && cuda.stream_idle(ks)) return;
        if (did) a.changed();
        else if (!a.spin(retired[g] ? "send proxy: call retired, waiting for the kernel" : "send proxy: nothing to post or complete")) return;
      }
    }, false);
  }
  CeRunResult r;
  r.run = s.run();
  r.bytes_copied = cuda.bytes_copied();
  // The proxy's own stop comes first: the hang it leaves behind is its consequence.
  const auto stopped = std::find_if(links.begin(), links.end(), [](const auto& l) { return l->sub.bad_size != 0; });
  if (stopped != links.end()) {
    const Link& l = **stopped;
    r.failure = "gpu" + std::to_string(l.from) + "->gpu" + std::to_string(l.to) + ": the send proxy found a staged size of " +
                std::to_string(l.sub.bad_size) + " B in a " + std::to_string(l.proxy_conn.step_bytes) + " B slot and stopped\n" +
                r.run.report;
  } else if (r.run.outcome != gpu_sim::Outcome::kCompleted) {
    r.failure = std::string(gpu_sim::outcome_name(r.run.outcome)) + ":\n" + r.run.report;
  } else if (!violation.empty() || !s.violation().empty()) {
    r.failure = "invariant: " + (violation.empty() ? s.violation() : violation);
  } else if (!bad_slot.empty()) {
    r.failure = bad_slot;
  } else if (cuda.memory().open_mappings() != 0) {
    r.failure = std::to_string(cuda.memory().open_mappings()) + " IPC mappings still open after the run";
  }
  for (const auto& l : links) {
    if (!r.failure.empty()) break;
    const std::string name = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to);
    if (l->shm.staged != l->sub.nsteps || l->copied != c.bytes) {
      r.failure = name + ": the kernel staged " + std::to_string(l->shm.staged) + " steps, the proxy counted " +
                  std::to_string(l->sub.nsteps) + " and copied " + std::to_string(l->copied) + " of " + std::to_string(c.bytes) + " bytes";
      break;
    }
    if (c.phantom) continue;
    const uint8_t* dst = c.direct ? l->received : l->dst.data();
    for (uint64_t b = 0; b < c.bytes; ++b)
      if (dst[b] != l->src[b]) {
        r.failure = "gpu" + std::to_string(l->from) + "->gpu" + std::to_string(l->to) + ": byte " + std::to_string(b) +
                    " (step " + std::to_string(b / c.step_bytes) + ") differs";
        break;
      }
  }
  if (!r.failure.empty()) r.failure += s.memory_report();
  r.kind = sim::finished_or(r.run.outcome, r.failure.empty() ? sim::RunKind::kCompleted : sim::RunKind::kWrongData);
  sim::take_races(r.run, &r.kind, &r.failure);
  return r;
}

}  // namespace doorbell::p2p
