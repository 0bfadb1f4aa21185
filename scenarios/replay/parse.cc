#include "scenarios/replay/parse.h"

#include "core/ibgda/ordering.h"
#include "core/nvls/collective.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace doorbell::scenario {

namespace {

// A parse error at a node's line.
struct Bad {
  std::string msg;
  int line;
};

// yaml-cpp marks an empty document at line -1: report line 1.
int line_of(const YAML::Mark& m) { return m.line < 0 ? 1 : m.line + 1; }

[[noreturn]] void fail(const YAML::Node& n, const std::string& msg) { throw Bad{msg, line_of(n.Mark())}; }

void only_keys(const YAML::Node& map, const char* where, std::initializer_list<const char*> known) {
  if (!map.IsMap()) fail(map, std::string(where) + " must be a mapping");
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    bool ok = false;
    for (const char* c : known) ok |= k == c;
    if (!ok) {
      std::string list;
      for (const char* c : known) list += std::string(list.empty() ? "" : ", ") + c;
      fail(kv.first, "unknown key '" + k + "' in " + where + " (known: " + list + ")");
    }
  }
}

uint64_t uint_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) {
  const std::string s = n.Scalar();
  if (!n.IsScalar() || s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    fail(n, "'" + key + "' must be a non-negative integer, not '" + (n.IsScalar() ? s : std::string("a ") + (n.IsMap() ? "mapping" : "list")) + "'");
  uint64_t v;
  try {
    v = std::stoull(s);
  } catch (...) {
    fail(n, "'" + key + "' is out of range");
  }
  if (v < lo || v > hi) fail(n, "'" + key + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " + s);
  return v;
}

uint32_t pow2_of(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) {
  const uint64_t v = uint_of(n, key, lo, hi);
  if ((v & (v - 1)) != 0) fail(n, "'" + key + "' must be a power of two, not " + std::to_string(v));
  return uint32_t(v);
}

bool bool_of(const YAML::Node& n, const std::string& key) {
  const std::string s = n.IsScalar() ? n.Scalar() : "";
  if (s == "true") return true;
  if (s == "false") return false;
  fail(n, "'" + key + "' must be true or false");
}

std::string choice_of(const YAML::Node& n, const std::string& key, std::initializer_list<const char*> options) {
  const std::string s = n.IsScalar() ? n.Scalar() : "";
  std::string list;
  for (const char* o : options) {
    if (s == o) return s;
    list += std::string(list.empty() ? "" : ", ") + o;
  }
  fail(n, "'" + key + "' must be one of " + list + ", not '" + s + "'");
}

Scenario parse_root(const YAML::Node& root, const std::string& file) {
  Scenario sc;
  sc.file = file;
  if (!root.IsMap()) fail(root, "a scenario is a mapping (name, stack, workload, expect, ...)");
  only_keys(root, "the scenario",
            {"name", "description", "topology", "memory", "stack", "planted", "workload", "faults", "run", "expect"});
  if (root["memory"]) sc.phantom = choice_of(root["memory"], "memory", {"real", "phantom"}) == "phantom";
  if (!root["name"]) fail(root, "missing 'name'");
  sc.name = root["name"].Scalar();
  if (root["description"]) sc.description = root["description"].Scalar();
  if (const YAML::Node t = root["topology"]) {
    only_keys(t, "topology", {"pes", "wire_gbps", "pcie_gbps"});
    if (t["pes"]) sc.pes = uint32_t(uint_of(t["pes"], "pes", 1, 1024));
    if (t["wire_gbps"]) sc.wire_gbps = double(uint_of(t["wire_gbps"], "wire_gbps", 1, 100000));
    if (t["pcie_gbps"]) sc.pcie_gbps = double(uint_of(t["pcie_gbps"], "pcie_gbps", 1, 100000));
  }
  if (const YAML::Node s = root["stack"]) {
    only_keys(s, "stack", {"num_rc_per_pe", "nics_per_pe", "qp_depth", "num_requests_in_batch", "qp_layout", "cst", "cpu_proxy", "nic_buffers", "ibuf_slots",
                           "failover", "ack_timeout", "retry_count", "rnr_retry", "start_index"});
    // Below 2^64 by far more than a run posts: indices must not wrap the 64 bits.
    if (s["start_index"]) sc.start_index = uint_of(s["start_index"], "start_index", 0, (uint64_t(3) << 62));
    if (s["failover"]) sc.failover = bool_of(s["failover"], "failover");
    if (s["ack_timeout"]) sc.ack_timeout = uint32_t(uint_of(s["ack_timeout"], "ack_timeout", 0, 31));
    if (s["retry_count"]) sc.retry_count = uint32_t(uint_of(s["retry_count"], "retry_count", 0, 7));
    if (s["rnr_retry"]) sc.rnr_retry = uint32_t(uint_of(s["rnr_retry"], "rnr_retry", 0, 7));
    if (s["num_rc_per_pe"]) sc.num_rc_per_pe = uint32_t(uint_of(s["num_rc_per_pe"], "num_rc_per_pe", 1, 16));
    if (s["nics_per_pe"]) sc.nics_per_pe = uint32_t(uint_of(s["nics_per_pe"], "nics_per_pe", 1, 8));
    if (s["qp_depth"]) sc.qp_depth = pow2_of(s["qp_depth"], "qp_depth", 8, 32768);
    if (s["num_requests_in_batch"]) sc.num_requests_in_batch = pow2_of(s["num_requests_in_batch"], "num_requests_in_batch", 1, 4096);
    if (s["qp_layout"]) sc.pe_major = choice_of(s["qp_layout"], "qp_layout", {"qp-major", "pe-major"}) == "pe-major";
    if (s["cst"]) sc.cst = bool_of(s["cst"], "cst");
    if (s["cpu_proxy"]) sc.cpu_proxy = bool_of(s["cpu_proxy"], "cpu_proxy");
    if (s["nic_buffers"]) sc.nic_buffers_on_gpu = choice_of(s["nic_buffers"], "nic_buffers", {"gpu", "host"}) == "gpu";
    if (s["ibuf_slots"]) sc.ibuf_slots = pow2_of(s["ibuf_slots"], "ibuf_slots", 1, 1024);
  }
  if (const YAML::Node p = root["planted"]) {
    only_keys(p, "planted", {"no_idle_doorbell", "no_carry", "cons_store", "cas_swapped", "early_release", "dev0_keys", "drop_ordering"});
    if (const YAML::Node d = p["drop_ordering"]) {
      if (!d.IsSequence()) fail(d, "'drop_ordering' must be a list of orderings");
      for (const YAML::Node& o : d) {
        uint32_t bit = 0;
        for (uint32_t i = 0; i < ibgda::kOrderingCount; ++i)
          if (o.IsScalar() && o.Scalar() == ibgda::ordering_name(1u << i)) bit = 1u << i;
        if (bit == 0) {
          std::string all;
          for (uint32_t i = 0; i < ibgda::kOrderingCount; ++i) all += std::string(i ? ", " : "") + ibgda::ordering_name(1u << i);
          fail(o, "unknown ordering (one of: " + all + ")");
        }
        sc.plant.drop |= bit;
      }
    }
    if (p["no_idle_doorbell"]) sc.plant.no_idle_doorbell = bool_of(p["no_idle_doorbell"], "no_idle_doorbell");
    if (p["no_carry"]) sc.plant.no_carry = bool_of(p["no_carry"], "no_carry");
    if (p["cons_store"]) sc.plant.cons_store = bool_of(p["cons_store"], "cons_store");
    if (p["cas_swapped"]) sc.plant.cas_swapped = bool_of(p["cas_swapped"], "cas_swapped");
    if (p["early_release"]) sc.plant.early_release = bool_of(p["early_release"], "early_release");
    if (p["dev0_keys"]) sc.plant.dev0_keys = bool_of(p["dev0_keys"], "dev0_keys");
  }
  const YAML::Node w = root["workload"];
  if (!w) fail(root, "missing 'workload'");
  only_keys(w, "workload", {"ctas", "warps", "lanes", "ops", "alltoall", "dispatch", "p2p", "nvls"});
  if (const YAML::Node v = w["nvls"]) {
    only_keys(v, "nvls", {"collective", "count", "dtype", "op", "channels", "reducers", "slot_bytes"});
    sc.nvls.on = true;
    if (!v["count"]) fail(v, "nvls needs 'count' (elements per rank)");
    sc.nvls.count = uint_of(v["count"], "count", 1, 1ull << 36);
    if (v["collective"]) sc.nvls.allreduce = choice_of(v["collective"], "collective", {"allreduce", "reducescatter"}) == "allreduce";
    if (v["dtype"]) sc.nvls.dtype = choice_of(v["dtype"], "dtype", {"f32", "f16", "bf16", "f64", "i32", "i64", "u32", "u64"});
    if (v["op"]) sc.nvls.op = choice_of(v["op"], "op", {"sum", "min", "max"});
    if (v["channels"]) sc.nvls.channels = uint32_t(uint_of(v["channels"], "channels", 1, 32));
    if (v["reducers"]) sc.nvls.reducers = uint32_t(uint_of(v["reducers"], "reducers", 1, nvls::kMaxReducers));
    if (v["slot_bytes"]) {
      sc.nvls.slot_bytes = uint_of(v["slot_bytes"], "slot_bytes", 16, 64ull << 20);
      if (sc.nvls.slot_bytes % 16 != 0) fail(v["slot_bytes"], "slot_bytes is a multiple of 16");
    }
    if (sc.pes < 2 || sc.pes > 8) fail(v, "nvls needs 2 to 8 GPUs (topology.pes) on one switch");
    if (!sc.phantom && sc.nvls.count > (16ull << 20)) fail(v["count"], "more than 16 Mi elements per rank needs 'memory: phantom'");
  }
  if (const YAML::Node p = w["p2p"]) {
    only_keys(p, "p2p", {"pattern", "bytes", "step_bytes", "kernel_stream", "proxy_stream", "max_connections", "next_kernel_queued",
                         "registered_buffers", "kernel_chunk_bytes", "streams_before_proxies", "proxy_counter_bits"});
    if (p["next_kernel_queued"]) sc.p2p.next_kernel_queued = bool_of(p["next_kernel_queued"], "next_kernel_queued");
    if (p["registered_buffers"]) sc.p2p.registered = bool_of(p["registered_buffers"], "registered_buffers");
    static const std::initializer_list<const char*> kStreams = {"legacy_default", "per_thread_default", "blocking", "non_blocking"};
    sc.p2p.on = true;
    if (!p["bytes"]) fail(p, "p2p needs 'bytes' (per connection)");
    sc.p2p.bytes = uint_of(p["bytes"], "bytes", 1, 1ull << 40);
    if (p["pattern"]) sc.p2p.alltoall = choice_of(p["pattern"], "pattern", {"alltoall", "sendrecv"}) == "alltoall";
    if (p["step_bytes"]) sc.p2p.step_bytes = uint_of(p["step_bytes"], "step_bytes", 8, 64ull << 20);
    if (p["kernel_stream"]) sc.p2p.kernel_stream = choice_of(p["kernel_stream"], "kernel_stream", kStreams);
    if (p["proxy_stream"]) sc.p2p.proxy_stream = choice_of(p["proxy_stream"], "proxy_stream", kStreams);
    if (p["max_connections"]) sc.p2p.max_connections = uint32_t(uint_of(p["max_connections"], "max_connections", 1, 32));
    if (p["kernel_chunk_bytes"]) {
      sc.p2p.kernel_chunk_bytes = uint_of(p["kernel_chunk_bytes"], "kernel_chunk_bytes", 8, 64ull << 20);
      if (!sc.p2p.registered || !sc.phantom) fail(p["kernel_chunk_bytes"], "kernel_chunk_bytes needs 'registered_buffers: true' and 'memory: phantom'");
    }
    if (p["streams_before_proxies"]) sc.p2p.streams_before_proxies = uint32_t(uint_of(p["streams_before_proxies"], "streams_before_proxies", 0, 64));
    if (p["proxy_counter_bits"]) {
      sc.p2p.proxy_counter_bits = uint32_t(uint_of(p["proxy_counter_bits"], "proxy_counter_bits", 0, 64));
      if (sc.p2p.proxy_counter_bits != 0 && sc.p2p.proxy_counter_bits != 31 && sc.p2p.proxy_counter_bits != 32 &&
          sc.p2p.proxy_counter_bits != 64)
        fail(p["proxy_counter_bits"], "proxy_counter_bits is 31 (int), 32 (uint32_t) or 64 (or 0: 64 bits)");
      if (sc.p2p.proxy_counter_bits == 64) sc.p2p.proxy_counter_bits = 0;
    }
    if (sc.pes < 2) fail(p, "p2p needs at least 2 GPUs (topology.pes)");
    if (!sc.phantom && sc.p2p.bytes > (64ull << 20)) fail(p["bytes"], "more than 64 MiB per connection needs 'memory: phantom'");
  }
  if (const YAML::Node d = w["dispatch"]) {
    only_keys(d, "dispatch", {"experts", "tokens", "topk", "token_bytes", "direction"});
    if (d["direction"]) {
      const std::string dir = choice_of(d["direction"], "direction", {"dispatch", "combine", "both"});
      sc.dispatch_forward = dir != "combine", sc.combine = dir != "dispatch";
    }
    for (const char* k : {"experts", "tokens", "topk", "token_bytes"})
      if (!d[k]) fail(d, std::string("dispatch needs '") + k + "'");
    sc.dispatch_experts = uint32_t(uint_of(d["experts"], "experts", 1, 1u << 16));
    sc.dispatch_tokens = uint32_t(uint_of(d["tokens"], "tokens", 1, 1u << 16));
    sc.dispatch_topk = uint32_t(uint_of(d["topk"], "topk", 1, sc.dispatch_experts));
    sc.dispatch_token_bytes = uint_of(d["token_bytes"], "token_bytes", 8, 1u << 24);
    if (sc.dispatch_experts % sc.pes != 0)
      fail(d["experts"], std::to_string(sc.dispatch_experts) + " experts do not spread evenly over " + std::to_string(sc.pes) + " PEs");
  }
  if (w["ctas"]) sc.ctas = uint32_t(uint_of(w["ctas"], "ctas", 1, 64));
  if (w["warps"]) sc.warps = uint32_t(uint_of(w["warps"], "warps", 1, 32));
  if (w["lanes"]) sc.lanes = uint32_t(uint_of(w["lanes"], "lanes", 1, 32));
  if (const YAML::Node a = w["alltoall"]) {
    only_keys(a, "alltoall", {"bytes_per_pe", "message_bytes"});
    if (!a["bytes_per_pe"] || !a["message_bytes"]) fail(a, "alltoall needs 'bytes_per_pe' and 'message_bytes'");
    sc.alltoall_bytes_per_pe = uint_of(a["bytes_per_pe"], "bytes_per_pe", 8, 1ull << 40);
    sc.alltoall_message_bytes = uint_of(a["message_bytes"], "message_bytes", 1, 1u << 30);
    if (sc.alltoall_bytes_per_pe % (uint64_t(sc.pes) * 8) != 0)
      fail(a["bytes_per_pe"], "'bytes_per_pe' must split into 8-byte-aligned blocks for " + std::to_string(sc.pes) + " PEs");
    if (!sc.phantom && sc.alltoall_bytes_per_pe > (256ull << 20))
      fail(a["bytes_per_pe"], "more than 256 MiB per PE needs 'memory: phantom'");
  }
  const YAML::Node ops = w["ops"];
  const bool need_ops = ops || (sc.alltoall_bytes_per_pe == 0 && sc.dispatch_experts == 0 && !sc.p2p.on && !sc.nvls.on);  // generators may stand alone
  if (need_ops && (!ops || !ops.IsSequence() || ops.size() == 0))
    fail(ops ? ops : w, "'workload.ops' must be a non-empty list of ops");
  for (const YAML::Node& o : need_ops ? ops : YAML::Node(YAML::NodeType::Sequence)) {
    only_keys(o, "an op", {"op", "pe", "warp", "target", "bytes", "count", "word", "value", "compare", "scope"});
    if (!o["op"]) fail(o, "an op needs 'op' (put, get, fetch_add, add, compare_swap, quiet)");
    Op op;
    const std::string k = choice_of(o["op"], "op", {"put", "get", "fetch_add", "add", "compare_swap", "quiet"});
    op.kind = k == "put" ? OpKind::kPut : k == "get" ? OpKind::kGet : k == "fetch_add" ? OpKind::kFetchAdd : k == "add" ? OpKind::kAdd
            : k == "compare_swap" ? OpKind::kCompareSwap : OpKind::kQuiet;
    const bool atomic = is_atomic(op.kind);
    for (const char* key : {"word", "value", "compare"})
      if (o[key] && (!atomic || (std::string(key) == "compare" && op.kind != OpKind::kCompareSwap)))
        fail(o[key], "'" + std::string(key) + "' is for " + (std::string(key) == "compare" ? "compare_swap" : "atomics") + ", not " + k);
    if (o["scope"]) {
      const std::string sc_ = choice_of(o["scope"], "scope", {"thread", "warp", "block"});
      op.scope = sc_ == "warp" ? Scope::kWarp : sc_ == "block" ? Scope::kBlock : Scope::kThread;
      if (op.scope != Scope::kThread && op.kind != OpKind::kPut) fail(o["scope"], "warp and block scope are for puts, not " + k);
      if (op.scope == Scope::kBlock && o["warp"]) fail(o["warp"], "a block-scope put is called by every warp of the CTA: no 'warp'");
    }
    if (o["word"]) op.word = uint32_t(uint_of(o["word"], "word", 0, kCounterWords - 1));
    if (o["value"]) op.value = uint_of(o["value"], "value", 0, ~0ull);
    if (o["compare"]) op.compare = uint_of(o["compare"], "compare", 0, ~0ull);
    if (o["pe"]) op.pe = uint32_t(uint_of(o["pe"], "pe", 0, 1u << 20));
#ifndef DOORBELL_PLANT  // planted for fuzz/scenario_fuzz: PEs beyond the topology pass
    if (op.pe >= sc.pes) fail(o["pe"], "op on PE " + std::to_string(op.pe) + ", but the topology has " + std::to_string(sc.pes) + " PEs");
#endif
    if (op.kind != OpKind::kQuiet) {
      if (!o["target"]) fail(o, "'" + k + "' needs a 'target' PE");
      op.target = uint32_t(uint_of(o["target"], "target", 0, 1u << 20));
      if (op.target >= sc.pes)
        fail(o["target"], "target PE " + std::to_string(op.target) + " is unreachable: the topology has " + std::to_string(sc.pes) + " PEs");
    }
    if (o["bytes"]) {
      if (o["bytes"].IsScalar() && !o["bytes"].Scalar().empty() && o["bytes"].Scalar()[0] == '-')
        fail(o["bytes"], "'bytes' must not be negative");
      // Real memory: 16 MiB an op (the replay fills and checks every byte); phantom: sizes only.
      op.bytes = uint_of(o["bytes"], "bytes", 1, sc.phantom ? 1ull << 40 : 1ull << 24);
      if (atomic && op.bytes != 8) fail(o["bytes"], "atomics are 8 bytes");
    }
    if (o["count"]) op.count = uint32_t(uint_of(o["count"], "count", 1, 1u << 20));
    if (o["warp"]) op.warp = int32_t(uint_of(o["warp"], "warp", 0, sc.warps - 1));
    if (sc.phantom && atomic) fail(o["op"], "atomics need real memory, and this scenario has 'memory: phantom'");
    // The check explains a word's results by some order of its adds, or of its swaps.
    if (atomic)
      for (const Op& e : sc.ops)
        if (is_atomic(e.kind) && e.target == op.target && e.word == op.word &&
            (e.kind == OpKind::kCompareSwap) != (op.kind == OpKind::kCompareSwap))
          fail(o, "word " + std::to_string(op.word) + " of PE " + std::to_string(op.target) +
                      " takes adds and compare-swaps; give them different words");
    sc.ops.push_back(op);
  }
  if (const YAML::Node f = root["faults"]) {
    if (f.IsScalar() && f.Scalar() == "random") {
      sc.random_faults = true;
    } else {
      if (!f.IsSequence()) fail(f, "'faults' must be a list, or 'random'");
      for (const YAML::Node& n : f) {
        using ibgda::WorldFault;
        only_keys(n, "a fault", {"fault", "pe", "target", "count", "at_us", "for_us"});
        if (!n["fault"]) fail(n, "a fault needs 'fault'");
        WorldFault fl;
        const std::string k = choice_of(n["fault"], "fault",
                                        {"drop_doorbells", "doorbell_delay", "stale_rkey", "stall_nic", "qp_error", "link_down",
                                         "late_cqes", "node_death"});
        for (int i = 0; i <= int(WorldFault::kNodeDeath); ++i)
          if (k == ibgda::fault_name(WorldFault::Kind(i))) fl.kind = WorldFault::Kind(i);
        if (n["pe"]) fl.pe = uint32_t(uint_of(n["pe"], "pe", 0, sc.pes - 1));
        if (n["target"]) fl.target = uint32_t(uint_of(n["target"], "target", 0, sc.pes - 1));
        if (n["count"]) fl.count = uint32_t(uint_of(n["count"], "count", 1, 1ull << 31));
        if (n["at_us"]) fl.at_ns = 1000.0 * double(uint_of(n["at_us"], "at_us", 0, 1ull << 40));
        if (n["for_us"]) fl.for_ns = 1000.0 * double(uint_of(n["for_us"], "for_us", 1, 1ull << 40));
        if (fl.kind == WorldFault::kLinkDown && !n["for_us"]) fail(n, "link_down needs 'for_us' (how long the port is down)");
        sc.faults.push_back(fl);
      }
    }
  }
  if (const YAML::Node r = root["run"]) {
    only_keys(r, "run", {"schedule", "seed", "response_delay", "compare", "memory"});
    if (r["memory"]) sc.memory_model = choice_of(r["memory"], "memory", {"sc", "weak"});
    if (r["compare"]) sc.compare_cpu_proxy = choice_of(r["compare"], "compare", {"cpu_proxy"}) == "cpu_proxy";
    if (r["schedule"]) sc.schedule = choice_of(r["schedule"], "schedule", {"random", "pct", "timed", "preempt"});
    if (r["seed"]) sc.seed = uint_of(r["seed"], "seed", 0, ~0ull);
    if (r["response_delay"]) sc.response_delay = uint32_t(uint_of(r["response_delay"], "response_delay", 0, 1000));
  }
  const YAML::Node e = root["expect"];
  if (!e) fail(root, "missing 'expect' (completes, hangs or errors)");
  only_keys(e, "expect", {"result", "syndrome", "waits_on", "max_sim_time_us", "words"});
  if (const YAML::Node ws = e["words"]) {
    if (!ws.IsSequence()) fail(ws, "'words' must be a list of {pe, word, equals}");
    for (const YAML::Node& x : ws) {
      only_keys(x, "an expected word", {"pe", "word", "equals"});
      if (!x["equals"]) fail(x, "an expected word needs 'equals'");
      ExpectWord ew;
      if (x["pe"]) ew.pe = uint32_t(uint_of(x["pe"], "pe", 0, sc.pes - 1));
      if (x["word"]) ew.word = uint32_t(uint_of(x["word"], "word", 0, kCounterWords - 1));
      ew.equals = uint_of(x["equals"], "equals", 0, ~0ull);
      if (sc.phantom) fail(x, "expected words need real memory, and this scenario has 'memory: phantom'");
      sc.expect_words.push_back(ew);
    }
  }
  if (e["max_sim_time_us"]) sc.expect_max_sim_us = double(uint_of(e["max_sim_time_us"], "max_sim_time_us", 1, 1ull << 40));
  if (!e["result"]) fail(e, "expect needs 'result'");
  const std::string res = choice_of(e["result"], "result", {"completes", "hangs", "errors"});
  sc.expect = res == "completes" ? Expect::kCompletes : res == "hangs" ? Expect::kHangs : Expect::kErrors;
  if (e["syndrome"]) sc.expect_syndrome = e["syndrome"].Scalar();
  if (e["waits_on"]) sc.expect_waits_on = e["waits_on"].Scalar();
  if (sc.expect == Expect::kErrors && sc.expect_syndrome.empty()) fail(e, "an expected error needs 'syndrome'");
  return sc;
}

}  // namespace

Result<Scenario> parse_text(const std::string& text, const std::string& file) {
  try {
    return parse_root(YAML::Load(text), file);
  } catch (const Bad& b) {
    return Status(Errc::kBadParam, file + ":" + std::to_string(b.line) + ": " + b.msg);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kBadParam, file + ":" + std::to_string(line_of(e.mark)) + ": " + e.msg);
  }
}

Result<Scenario> parse_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(Errc::kNotFound, path + ":0: cannot open the scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_text(ss.str(), path);
}

}  // namespace doorbell::scenario
