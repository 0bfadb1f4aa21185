// The CUDA runtime as the CPU model sees it: GPUs with a bounded number of hardware work
// queues (CUDA_DEVICE_MAX_CONNECTIONS), streams with CUDA's ordering rules (the legacy
// default stream, per-thread default streams, blocking and non-blocking streams), events,
// kernels launched on a stream and copy engines executing cudaMemcpyAsync.
//
// A piece of work starts once what it depends on has completed: the previous work of its
// stream; for the legacy default stream, the last work of every blocking stream of its GPU,
// and for a blocking stream, the last work of the legacy default stream (CUDA's implicit
// synchronisation); an event it waits for. A hardware queue (streams share them round-robin)
// issues its work in order: work starts only after everything ahead of it in its queue has
// started, so work blocked on a dependency blocks the unrelated work queued behind it — how a
// copy comes to wait for a kernel it has no dependency on. Kernels become scheduler agents when
// they start; copy engines and the dispatcher are daemon agents, host threads are agents the
// caller adds, so a deadlock among kernels, copies and proxies is a hang report that names
// which work waits for which. Device memory and CUDA IPC handles are a DeviceMemory
// (device_memory.h), `memory()`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "hw/gpu_sim/device_memory.h"
#include "hw/gpu_sim/scheduler.h"

namespace doorbell::gpu_sim {

enum class StreamKind : uint8_t { kLegacyDefault, kPerThreadDefault, kBlocking, kNonBlocking };
const char* stream_kind_name(StreamKind k);

struct CudaModelConfig {
  uint32_t gpus = 2;
  uint32_t max_connections = 8;          // hardware work queues per GPU (CUDA_DEVICE_MAX_CONNECTIONS)
  uint64_t copy_bytes_per_step = 1 << 20;  // a copy engine moves at most this much per scheduling step
};

using StreamHandle = uint32_t;
using EventHandle = uint32_t;

class CudaModel {
 public:
  // Adds its agents (a dispatcher, one copy engine per GPU) to `s` and a section to its hang
  // reports. The model must outlive the run.
  CudaModel(Scheduler& s, CudaModelConfig c);
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  StreamHandle legacy_default(uint32_t gpu) const { return gpu; }  // stream 0 of each GPU
  StreamHandle create_stream(uint32_t gpu, StreamKind k, std::string name = {});
  EventHandle create_event();

  // Enqueue work, from a host agent or before the run.
  void launch(StreamHandle s, const std::string& name, const LaunchConfig& cfg, std::function<void(SimCtx&)> body);
  // A copy of `bytes` from src to dst (null pointers: phantom, sizes only); runs on the copy
  // engine of the stream's GPU.
  void memcpy_async(StreamHandle s, void* dst, const void* src, uint64_t bytes);
  void record(EventHandle e, StreamHandle s);
  void wait_event(StreamHandle s, EventHandle e);

  // cudaEventQuery / cudaStreamQuery: true once the recorded work (every enqueued work) completed.
  bool query(EventHandle e) const;
  // The same as the model sees it: no ordering for the race detector (a checker's question).
  bool completed(EventHandle e) const { return events_[e] < 0 || work_[size_t(events_[e])].done; }
  bool stream_idle(StreamHandle s) const;
  uint64_t bytes_copied() const { return bytes_copied_; }
  // Work not yet completed and what each waits for (hang reports).
  std::string pending() const;
  // cudaMalloc / cudaFree and CUDA IPC on the model's GPUs (costs: the scheduler's).
  DeviceMemory& memory() { return mem_; }
  const DeviceMemory& memory() const { return mem_; }

 private:
  enum class Kind : uint8_t { kKernel, kCopy, kRecord, kWait };
  struct Work {
    Kind kind;
    StreamHandle stream;
    uint32_t queue;              // hardware queue on the stream's GPU
    std::vector<uint32_t> deps;  // work that must complete first
    int64_t ahead = -1;          // the work before it in its hardware queue: must have started
    bool started = false, done = false;
    std::string name;            // kernels
    LaunchConfig cfg;
    std::function<void(SimCtx&)> body;
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t bytes = 0, moved = 0;
  };
  struct Stream {
    uint32_t gpu;
    StreamKind kind;
    uint32_t queue;
    std::string name;
    int64_t last = -1;  // last work enqueued
  };

  uint32_t enqueue(StreamHandle s, Work w);
  bool dispatch();  // start every work whose dependencies completed; true if any did
  void complete(uint32_t w);
  void hand_on(uint32_t w, bool acquire) const;  // stream order in the race detector
  std::string describe(uint32_t w) const;

  Scheduler& s_;
  CudaModelConfig cfg_;
  std::vector<Stream> streams_;
  std::vector<Work> work_;
  std::vector<int64_t> queue_last_;       // per (gpu, queue): last work enqueued
  std::vector<std::deque<uint32_t>> ce_;  // per GPU: copies started and not finished, in order
  uint32_t first_unstarted_ = 0;          // work below this has all started
  std::vector<int64_t> events_;           // the record work of each event (-1: never recorded)
  uint64_t version_ = 0, bytes_copied_ = 0;
  DeviceMemory mem_;
};

}  // namespace doorbell::gpu_sim
