// The device-level workloads' sections, read straight into the configurations their runs
// take (p2p::CeRunConfig, PsmRunConfig or SmcudaRunConfig, nvls::NvlsRunConfig), enums included.
#include "core/nvls/collective.h"
#include "scenarios/replay/parse_sections.h"
#include "scenarios/replay/parse_values.h"

namespace doorbell::scenario {

namespace {

const char* const kStreams[] = {"legacy_default", "per_thread_default", "blocking", "non_blocking"};  // StreamKind's order
const char* stream_name(gpu_sim::StreamKind k) { return kStreams[int(k)]; }

// `transport: psm`: the kernel-less transport and the seed's open choices, by name.
P2pWorkload parse_psm(const YAML::Node& p, const Scenario& sc) {
  only_keys(p, "p2p", {"transport", "pattern", "bytes", "step_bytes", "channels", "calls", "window", "chunk_bytes", "offsets", "step_counter",
                       "first_credit", "free_slot", "receiver_on_free_slot", "shm", "overlap_calls", "proxy_stream", "recv_proxy_stream",
                       "user_stream_waits"});
  P2pWorkload w;
  w.transport = P2pTransport::kPsm;
  p2p::PsmRunConfig& c = w.psm_run;
  p2p::psm::Choices& ch = c.choices;
  c.alltoall = true;  // the format's defaults: an alltoall in 512 KiB steps (NCCL's 4 MiB SIMPLE buffer / 8)
  ch.step_bytes = 512 << 10;
  if (!p["bytes"]) fail(p, "p2p needs 'bytes' (per ordered GPU pair and call)");
  c.bytes_per_peer = uint_of(p["bytes"], "bytes", 1, 1ull << 40);
  if (p["pattern"]) c.alltoall = choice_of(p["pattern"], "pattern", {"alltoall", "sendrecv"}) == "alltoall";
  if (p["step_bytes"]) ch.step_bytes = uint_of(p["step_bytes"], "step_bytes", 8, 64ull << 20);
  if (p["channels"]) c.channels = uint32_t(uint_of(p["channels"], "channels", 1, 32));
  if (p["calls"]) c.calls = uint32_t(uint_of(p["calls"], "calls", 1, 64));
  if (p["window"]) ch.window = uint32_t(uint_of(p["window"], "window", 1, p2p::psm::kMaxWindow));
  if (p["chunk_bytes"]) {
    ch.chunk_bytes = uint_of(p["chunk_bytes"], "chunk_bytes", 8, 64ull << 20);
    if (ch.chunk_bytes < ch.step_bytes) fail(p["chunk_bytes"], "chunk_bytes (the slot stride) below step_bytes: slots would overlap");
  }
  if (p["offsets"]) ch.offsets_per_args = choice_of(p["offsets"], "offsets", {"per_sub", "per_args"}) == "per_args";
  if (p["step_counter"]) ch.step_at_done = choice_of(p["step_counter"], "step_counter", {"at_start", "at_done"}) == "at_done";
  if (p["first_credit"]) ch.first_credit = p2p::psm::FirstCredit(index_of(p["first_credit"], "first_credit", {"set_up", "receiver_start", "none"}));
  if (p["free_slot"]) ch.free_is_zero = choice_of(p["free_slot"], "free_slot", {"minus_one", "zero"}) == "zero";
  if (p["receiver_on_free_slot"]) ch.recv_waits_for_size = choice_of(p["receiver_on_free_slot"], "receiver_on_free_slot", {"refuses", "waits"}) == "waits";
  if (p["shm"]) c.shm = enum_of<p2p::ShmScope>(p["shm"], "shm", 4, p2p::shm_scope_name);
  if (p["overlap_calls"]) c.overlap_calls = bool_of(p["overlap_calls"], "overlap_calls");
  if (p["proxy_stream"]) c.proxy_stream = enum_of<gpu_sim::StreamKind>(p["proxy_stream"], "proxy_stream", 4, stream_name);
  if (p["recv_proxy_stream"]) c.recv_proxy_stream = enum_of<gpu_sim::StreamKind>(p["recv_proxy_stream"], "recv_proxy_stream", 4, stream_name);
  if (p["user_stream_waits"]) c.user_stream_waits = bool_of(p["user_stream_waits"], "user_stream_waits");
  if (c.bytes_per_peer % c.channels != 0) fail(p["bytes"], "bytes must split evenly over the channels");
  if (sc.pes < 2) fail(p, "p2p needs at least 2 GPUs (topology.pes)");
  if (!sc.phantom && c.bytes_per_peer > (64ull << 20)) fail(p["bytes"], "more than 64 MiB per GPU pair needs 'memory: phantom'");
  return w;
}

// `transport: smcuda`: two ranks' GPU-buffer sends after the lazy IPC set-up.
P2pWorkload parse_smcuda(const YAML::Node& p, const Scenario& sc) {
  only_keys(p, "p2p", {"transport", "messages", "bytes", "eager_bytes", "peer_access", "cuda_ready_after", "buffers", "realloc_every"});
  P2pWorkload w;
  w.transport = P2pTransport::kSmcuda;
  p2p::SmcudaRunConfig& c = w.smcuda_run;
  if (p["messages"]) c.messages = uint32_t(uint_of(p["messages"], "messages", 1, 4096));
  if (p["bytes"]) c.max_bytes = uint_of(p["bytes"], "bytes", 1, 64ull << 20);
  if (p["eager_bytes"]) c.options.eager_bytes = uint_of(p["eager_bytes"], "eager_bytes", 0, 64ull << 20);
  if (p["peer_access"]) c.peer_access = bool_of(p["peer_access"], "peer_access");
  if (const YAML::Node r = p["cuda_ready_after"]) {
    if (!r.IsSequence() || r.size() != 2) fail(r, "cuda_ready_after is [rank 0's, rank 1's] send index");
    for (uint32_t i = 0; i < 2; ++i) c.cuda_ready_after[i] = uint32_t(uint_of(r[i], "cuda_ready_after", 0, 4096));
  }
  if (p["buffers"]) c.buffers = uint32_t(uint_of(p["buffers"], "buffers", 1, 64));
  if (p["realloc_every"]) c.realloc_every = uint32_t(uint_of(p["realloc_every"], "realloc_every", 0, 4096));
  if (sc.pes != 2) fail(p, "smcuda runs between 2 ranks (topology.pes: 2)");
  if (sc.phantom) fail(p, "smcuda checks every byte: no 'memory: phantom'");
  if (uint64_t(c.messages) * c.max_bytes > (256ull << 20)) fail(p["bytes"], "messages x bytes above 256 MiB per rank");
  return w;
}

}  // namespace

P2pWorkload parse_p2p(const YAML::Node& p, const Scenario& sc) {
  const std::string transport = p["transport"] ? choice_of(p["transport"], "transport", {"ce", "psm", "smcuda"}) : "ce";
  if (transport == "psm") return parse_psm(p, sc);
  if (transport == "smcuda") return parse_smcuda(p, sc);
  only_keys(p, "p2p", {"transport", "pattern", "bytes", "step_bytes", "kernel_stream", "proxy_stream", "max_connections", "next_kernel_queued",
                       "registered_buffers", "kernel_chunk_bytes", "streams_before_proxies", "proxy_counter_bits"});
  P2pWorkload w;
  p2p::CeRunConfig& c = w.run;
  c.alltoall = true;          // the format's defaults: an alltoall,
  c.step_bytes = 512 << 10;   // in NCCL's FIFO slots (its 4 MiB SIMPLE buffer / 8)
  if (p["next_kernel_queued"]) c.next_kernel_queued = bool_of(p["next_kernel_queued"], "next_kernel_queued");
  if (p["registered_buffers"]) c.direct = bool_of(p["registered_buffers"], "registered_buffers");
  const auto stream = stream_name;
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
  only_keys(v, "nvls",
            {"collective", "count", "dtype", "op", "channels", "reducers", "slot_bytes", "step_bytes", "calls", "registered", "warps", "sync_warp",
             "warp_hunks"});
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
  if (v["step_bytes"]) {  // (Args::step_bytes: a step's bytes, the slot's by default)
    c.step_bytes = uint_of(v["step_bytes"], "step_bytes", 16, c.slot_bytes);
    if (c.step_bytes % 16 != 0) fail(v["step_bytes"], "step_bytes is a multiple of 16");
  }
  if (v["calls"]) c.calls = uint32_t(uint_of(v["calls"], "calls", 1, 16));  // back to back, the steps running on
  if (v["registered"]) {  // user buffers bound to multicast objects (Args::registered)
    c.registered = nvls::Registered(index_of(v["registered"], "registered", {"none", "output", "both"}));
    if (sc.phantom && c.registered != nvls::Registered::kNone)
      fail(v["registered"], "registered buffers need real memory, and this scenario has 'memory: phantom'");
  }
  // NCCL's structure: CTAs of `warps` warps, the last a sync warp that only posts; hunks a warp wide.
  if (v["warps"]) c.warps_per_cta = uint32_t(uint_of(v["warps"], "warps", 1, 4));
  if (v["sync_warp"]) c.sync_warp = bool_of(v["sync_warp"], "sync_warp");
  if (c.sync_warp && c.warps_per_cta < 2) fail(v["sync_warp"], "sync_warp needs 'warps' of 2 or more (the last warp only posts)");
  if (v["warp_hunks"]) c.warp_hunks = bool_of(v["warp_hunks"], "warp_hunks");
  if (sc.pes < 2 || sc.pes > 8) fail(v, "nvls needs 2 to 8 GPUs (topology.pes) on one switch");
  if (!sc.phantom && c.count > (16ull << 20)) fail(v["count"], "more than 16 Mi elements per rank needs 'memory: phantom'");
  return w;
}

}  // namespace doorbell::scenario
