// The device-level workloads' sections, read straight into the configurations their runs
// take (p2p::CeRunConfig, nvls::NvlsRunConfig), enums included.
#include "core/nvls/collective.h"
#include "scenarios/replay/parse_sections.h"
#include "scenarios/replay/parse_values.h"

namespace doorbell::scenario {

P2pWorkload parse_p2p(const YAML::Node& p, const Scenario& sc) {
  only_keys(p, "p2p", {"pattern", "bytes", "step_bytes", "kernel_stream", "proxy_stream", "max_connections", "next_kernel_queued",
                       "registered_buffers", "kernel_chunk_bytes", "streams_before_proxies", "proxy_counter_bits"});
  P2pWorkload w;
  p2p::CeRunConfig& c = w.run;
  c.alltoall = true;          // the format's defaults: an alltoall,
  c.step_bytes = 512 << 10;   // in NCCL's FIFO slots (its 4 MiB SIMPLE buffer / 8)
  if (p["next_kernel_queued"]) c.next_kernel_queued = bool_of(p["next_kernel_queued"], "next_kernel_queued");
  if (p["registered_buffers"]) c.direct = bool_of(p["registered_buffers"], "registered_buffers");
  static const char* const kStreams[] = {"legacy_default", "per_thread_default", "blocking", "non_blocking"};  // StreamKind's order
  const auto stream = [](gpu_sim::StreamKind k) { return kStreams[int(k)]; };
  if (!p["bytes"]) fail(p, "p2p needs 'bytes' (per connection)");
  c.bytes = uint_of(p["bytes"], "bytes", 1, 1ull << 40);
  if (p["pattern"]) c.alltoall = choice_of(p["pattern"], "pattern", {"alltoall", "sendrecv"}) == "alltoall";
  if (p["step_bytes"]) c.step_bytes = uint_of(p["step_bytes"], "step_bytes", 8, 64ull << 20);
  if (p["kernel_stream"]) c.kernel_stream = enum_of<gpu_sim::StreamKind>(p["kernel_stream"], "kernel_stream", 4, stream);
  if (p["proxy_stream"]) c.proxy_stream = enum_of<gpu_sim::StreamKind>(p["proxy_stream"], "proxy_stream", 4, stream);
  if (p["max_connections"]) c.max_connections = uint32_t(uint_of(p["max_connections"], "max_connections", 1, 32));
  if (p["kernel_chunk_bytes"]) {
    c.kernel_chunk_bytes = uint_of(p["kernel_chunk_bytes"], "kernel_chunk_bytes", 8, 64ull << 20);
    if (!c.direct || !sc.phantom) fail(p["kernel_chunk_bytes"], "kernel_chunk_bytes needs 'registered_buffers: true' and 'memory: phantom'");
  }
  if (p["streams_before_proxies"]) c.extra_streams = uint32_t(uint_of(p["streams_before_proxies"], "streams_before_proxies", 0, 64));
  if (p["proxy_counter_bits"]) {
    const uint64_t bits = uint_of(p["proxy_counter_bits"], "proxy_counter_bits", 0, 64);
    if (bits != 0 && bits != 31 && bits != 32 && bits != 64)
      fail(p["proxy_counter_bits"], "proxy_counter_bits is 31 (int), 32 (uint32_t) or 64 (or 0: 64 bits)");
    c.proxy_counter_bits = bits == 64 ? 0 : uint32_t(bits);
  }
  if (sc.pes < 2) fail(p, "p2p needs at least 2 GPUs (topology.pes)");
  if (!sc.phantom && c.bytes > (64ull << 20)) fail(p["bytes"], "more than 64 MiB per connection needs 'memory: phantom'");
  return w;
}

NvlsWorkload parse_nvls(const YAML::Node& v, const Scenario& sc) {
  only_keys(v, "nvls", {"collective", "count", "dtype", "op", "channels", "reducers", "slot_bytes"});
  NvlsWorkload w;
  nvls::NvlsRunConfig& c = w.run;
  c.channels = 2;           // the format's defaults: two channels,
  c.slot_bytes = 1 << 20;   // 1 MiB FIFO slots
  if (!v["count"]) fail(v, "nvls needs 'count' (elements per rank)");
  c.count = uint_of(v["count"], "count", 1, 1ull << 36);
  if (v["collective"]) c.allreduce = choice_of(v["collective"], "collective", {"allreduce", "reducescatter"}) == "allreduce";
  if (v["dtype"]) c.dtype = enum_of<nvls::DType>(v["dtype"], "dtype", 8, nvls::dtype_name);
  if (v["op"]) c.op = enum_of<nvls::RedOp>(v["op"], "op", 3, nvls::redop_name);
  if (v["channels"]) c.channels = uint32_t(uint_of(v["channels"], "channels", 1, 32));
  if (v["reducers"]) c.reducers = uint32_t(uint_of(v["reducers"], "reducers", 1, nvls::kMaxReducers));
  if (v["slot_bytes"]) {
    c.slot_bytes = uint_of(v["slot_bytes"], "slot_bytes", 16, 64ull << 20);
    if (c.slot_bytes % 16 != 0) fail(v["slot_bytes"], "slot_bytes is a multiple of 16");
  }
  if (sc.pes < 2 || sc.pes > 8) fail(v, "nvls needs 2 to 8 GPUs (topology.pes) on one switch");
  if (!sc.phantom && c.count > (16ull << 20)) fail(v["count"], "more than 16 Mi elements per rank needs 'memory: phantom'");
  return w;
}

}  // namespace doorbell::scenario
