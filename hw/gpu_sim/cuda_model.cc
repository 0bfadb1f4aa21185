#include "hw/gpu_sim/cuda_model.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::gpu_sim {

const char* stream_kind_name(StreamKind k) {
  switch (k) {
    case StreamKind::kLegacyDefault: return "legacy default stream";
    case StreamKind::kPerThreadDefault: return "per-thread default stream";
    case StreamKind::kBlocking: return "blocking stream";
    case StreamKind::kNonBlocking: return "non-blocking stream";
  }
  return "?";
}

CudaModel::CudaModel(Scheduler& s, CudaModelConfig c) : s_(s), cfg_(c), mem_(c.gpus, s.options().costs) {
  cfg_.max_connections = std::max<uint32_t>(1, cfg_.max_connections);
  queue_last_.assign(size_t(cfg_.gpus) * cfg_.max_connections, -1);
  ce_.resize(cfg_.gpus);
  for (uint32_t g = 0; g < cfg_.gpus; ++g)
    streams_.push_back({g, StreamKind::kLegacyDefault, 0, "gpu" + std::to_string(g) + " stream 0", -1});
  s_.add_agent("cuda work dispatcher", [this](AgentCtx& a) {
    for (;;) {
      a.point();
      if (dispatch()) a.changed(++version_);
      else if (!a.spin("cuda: no work can start")) return;
    }
  });
  for (uint32_t g = 0; g < cfg_.gpus; ++g)
    s_.add_agent("copy engine gpu" + std::to_string(g), [this, g](AgentCtx& a) {
      for (;;) {
        a.point();
        if (ce_[g].empty()) {
          if (!a.spin("copy engine: idle")) return;
          continue;
        }
        const uint32_t id = ce_[g].front();
        Work& w = work_[id];
        if (w.moved == 0) hand_on(id, true);
        const uint64_t n = std::min(cfg_.copy_bytes_per_step, w.bytes - w.moved);
        if (w.dst != nullptr && w.src != nullptr) {
          auto* dst = static_cast<uint8_t*>(w.dst) + w.moved;
          const auto* src = static_cast<const uint8_t*>(w.src) + w.moved;
          if (mem::Observer* m = s_.device_observer()) {  // a copy engine is a system-scope observer
            m->device_read(src, n, "copy engine", "copy source at byte", w.moved);
            m->device_write(dst, n, "copy destination at byte", w.moved);
          }
          std::memmove(dst, src, n);
        }
        w.moved += n;
        bytes_copied_ += n;
        a.advance(double(n) / s_.options().costs.nvlink_bytes_per_ns);
        if (w.moved == w.bytes) {
          complete(id);
          ce_[g].pop_front();
        }
        a.changed(++version_);
      }
    });
  s_.add_reporter([this] { return pending(); });
}

StreamHandle CudaModel::create_stream(uint32_t gpu, StreamKind k, std::string name) {
  uint32_t on_gpu = 0;
  for (const Stream& st : streams_) on_gpu += st.gpu == gpu;
  if (name.empty()) name = "gpu" + std::to_string(gpu) + " stream " + std::to_string(on_gpu);
  // Streams take hardware queues round-robin; stream 0 (legacy default) has queue 0.
  streams_.push_back({gpu, k, on_gpu % cfg_.max_connections, std::move(name), -1});
  return StreamHandle(streams_.size() - 1);
}

EventHandle CudaModel::create_event() {
  events_.push_back(-1);
  return EventHandle(events_.size() - 1);
}

uint32_t CudaModel::enqueue(StreamHandle s, Work w) {
  const uint32_t id = uint32_t(work_.size());
  Stream& st = streams_[s];
  w.stream = s;
  w.queue = st.queue;
  auto dep = [&w](int64_t d) {
    if (d >= 0) w.deps.push_back(uint32_t(d));
  };
  dep(st.last);
  int64_t& ql = queue_last_[size_t(st.gpu) * cfg_.max_connections + st.queue];
  w.ahead = ql;  // the hardware queue issues its work in order
  // The legacy default stream waits for, and is waited on by, every blocking stream.
  for (const Stream& o : streams_) {
    if (o.gpu != st.gpu || &o == &st) continue;
    const bool blocking = o.kind == StreamKind::kBlocking || o.kind == StreamKind::kPerThreadDefault;
    if (st.kind == StreamKind::kLegacyDefault && blocking) dep(o.last);
    if ((st.kind == StreamKind::kBlocking || st.kind == StreamKind::kPerThreadDefault) && o.kind == StreamKind::kLegacyDefault)
      dep(o.last);
  }
  work_.push_back(std::move(w));
  hand_on(id, false);  // what the enqueuer did comes first
  st.last = id;
  ql = id;
  return id;
}

void CudaModel::launch(StreamHandle s, const std::string& name, const LaunchConfig& cfg, std::function<void(SimCtx&)> body) {
  Work w{Kind::kKernel};
  w.name = name;
  w.cfg = cfg;
  w.cfg.gpu = streams_[s].gpu;  // the stream's GPU runs it
  w.body = std::move(body);
  enqueue(s, std::move(w));
}

void CudaModel::memcpy_async(StreamHandle s, void* dst, const void* src, uint64_t bytes) {
  Work w{Kind::kCopy};
  w.dst = dst;
  w.src = src;
  w.bytes = bytes;
  enqueue(s, std::move(w));
}

void CudaModel::record(EventHandle e, StreamHandle s) { events_[e] = enqueue(s, Work{Kind::kRecord}); }

void CudaModel::wait_event(StreamHandle s, EventHandle e) {
  Work w{Kind::kWait};
  if (events_[e] >= 0) w.deps.push_back(uint32_t(events_[e]));
  enqueue(s, std::move(w));
}

// Stream order in the race detector: work comes after what its enqueuer did and after the
// work it depends on; a query that finds work done orders the asker after it.
void CudaModel::hand_on(uint32_t w, bool acquire) const {
  RaceDetector* r = s_.race();
  if (r == nullptr || s_.race_thread() == RaceDetector::kNoThread) return;
  if (acquire) r->acquire_from(s_.race_thread(), this, w);
  else r->release_to(s_.race_thread(), this, w);
}

bool CudaModel::query(EventHandle e) const {
  if (!completed(e)) return false;
  if (events_[e] >= 0) hand_on(uint32_t(events_[e]), true);
  return true;
}

bool CudaModel::stream_idle(StreamHandle s) const {
  if (streams_[s].last < 0) return true;
  if (!work_[size_t(streams_[s].last)].done) return false;
  hand_on(uint32_t(streams_[s].last), true);
  return true;
}

bool CudaModel::dispatch() {
  bool any = false;
  while (first_unstarted_ < work_.size() && work_[first_unstarted_].started) ++first_unstarted_;
  for (uint32_t i = first_unstarted_; i < work_.size(); ++i) {
    Work& w = work_[i];
    if (w.started) continue;
    if (w.ahead >= 0 && !work_[size_t(w.ahead)].started) continue;
    if (!std::all_of(w.deps.begin(), w.deps.end(), [this](uint32_t d) { return work_[d].done; })) continue;
    w.started = any = true;
    hand_on(i, true);  // the enqueuer's release
    for (uint32_t d : w.deps) hand_on(d, true);
    switch (w.kind) {
      case Kind::kKernel:
        s_.launch(w.name, w.cfg, w.body, [this, i] { complete(i); });
        break;
      case Kind::kCopy:
        hand_on(i, false);  // to its copy engine
        if (w.bytes == 0) complete(i);
        else ce_[streams_[w.stream].gpu].push_back(i);
        break;
      case Kind::kRecord:
      case Kind::kWait: complete(i); break;
    }
  }
  return any;
}

void CudaModel::complete(uint32_t w) {
  work_[w].done = true;
  hand_on(w, false);
}

std::string CudaModel::describe(uint32_t i) const {
  const Work& w = work_[i];
  std::ostringstream os;
  switch (w.kind) {
    case Kind::kKernel: os << "kernel '" << w.name << "'"; break;
    case Kind::kCopy: os << "copy of " << w.bytes << " B"; break;
    case Kind::kRecord: os << "event record"; break;
    case Kind::kWait: os << "event wait"; break;
  }
  const Stream& st = streams_[w.stream];
  os << " on " << st.name << " (" << stream_kind_name(st.kind) << ", hardware queue " << st.queue << ")";
  return os.str();
}

// Per stream, its oldest unfinished work and what that waits for; the rest only counted.
std::string CudaModel::pending() const {
  std::ostringstream os;
  for (StreamHandle sh = 0; sh < streams_.size(); ++sh) {
    int64_t head = -1;
    uint32_t behind = 0;
    for (uint32_t i = 0; i < work_.size(); ++i)
      if (work_[i].stream == sh && !work_[i].done) (head < 0 ? head = i : ++behind);
    if (head < 0) continue;
    const Work& w = work_[size_t(head)];
    os << "  cuda: " << describe(uint32_t(head));
    if (w.started) {
      os << (w.kind == Kind::kCopy ? " is running (" + std::to_string(w.moved) + " B moved)" : " is running");
    } else {
      os << " has not started; it waits for:";
      if (w.ahead >= 0 && !work_[size_t(w.ahead)].started)
        os << "\n    - " << describe(uint32_t(w.ahead)) << ", ahead of it in hardware queue " << w.queue << " (not started)";
      std::vector<uint32_t> seen;
      for (uint32_t d : w.deps)
        if (!work_[d].done && std::find(seen.begin(), seen.end(), d) == seen.end()) {
          seen.push_back(d);
          os << "\n    - " << describe(d) << (work_[d].started ? " (running)" : " (not started)");
        }
    }
    if (behind != 0) os << "\n    (" << behind << " more queued behind it on this stream)";
    os << "\n";
  }
  return os.str();
}

}  // namespace doorbell::gpu_sim
