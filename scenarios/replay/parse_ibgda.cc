// The IBGDA workload's sections: stack, planted, workload (dispatch, launch shape, alltoall,
// ops) and faults.
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "core/ibgda/ordering.h"
#include "scenarios/replay/parse_sections.h"
#include "scenarios/replay/parse_values.h"

namespace doorbell::scenario {

void parse_stack(const YAML::Node& s, ibgda::Stack& st) {
  only_keys(s, "stack", {"num_rc_per_pe", "default_rc_per_pe", "nics_per_pe", "qp_depth", "num_requests_in_batch", "qp_layout", "cst", "cpu_proxy", "nic_buffers", "ibuf_slots",
                         "failover", "ack_timeout", "retry_count", "rnr_retry", "start_index", "dc"});
  // Below 2^64 by far more than a run posts: indices must not wrap the 64 bits.
  if (s["start_index"]) st.start_index = uint_of(s["start_index"], "start_index", 0, (uint64_t(3) << 62));
  if (s["failover"]) st.failover = bool_of(s["failover"], "failover");
  if (s["dc"]) {  // which QPs are DC initiators (to a DCT per PE and NIC)
    const std::string dc = choice_of(s["dc"], "dc", {"none", "self", "all"});
    st.dc = dc == "self" ? ibgda::DcUse::kSelf : dc == "all" ? ibgda::DcUse::kAll : ibgda::DcUse::kNone;
    if (st.dc != ibgda::DcUse::kNone && st.failover) fail(s["dc"], "DC goes without failover (the backup QPs are RC)");
  }
  if (s["ack_timeout"]) st.ack_timeout = uint32_t(uint_of(s["ack_timeout"], "ack_timeout", 0, 31));
  if (s["retry_count"]) st.retry_count = uint32_t(uint_of(s["retry_count"], "retry_count", 0, 7));
  if (s["rnr_retry"]) st.rnr_retry = uint32_t(uint_of(s["rnr_retry"], "rnr_retry", 0, 7));
  if (s["num_rc_per_pe"]) st.num_rc_per_pe = uint32_t(uint_of(s["num_rc_per_pe"], "num_rc_per_pe", 1, 16));
  if (s["default_rc_per_pe"]) {
    st.default_rc_per_pe = uint32_t(uint_of(s["default_rc_per_pe"], "default_rc_per_pe", 1, 16));
    if (st.default_rc_per_pe > st.num_rc_per_pe)
      fail(s["default_rc_per_pe"], "'default_rc_per_pe' is " + std::to_string(st.default_rc_per_pe) + ", more than num_rc_per_pe (" +
                                       std::to_string(st.num_rc_per_pe) + ")");
  }
  if (s["nics_per_pe"]) st.nics_per_pe = uint32_t(uint_of(s["nics_per_pe"], "nics_per_pe", 1, 8));
  if (s["qp_depth"]) st.log_qp_depth = uint32_t(std::countr_zero(pow2_of(s["qp_depth"], "qp_depth", 8, 32768)));
  if (s["num_requests_in_batch"]) st.num_requests_in_batch = pow2_of(s["num_requests_in_batch"], "num_requests_in_batch", 1, 4096);
  if (s["qp_layout"]) st.pe_major = choice_of(s["qp_layout"], "qp_layout", {"qp-major", "pe-major"}) == "pe-major";
  if (s["cst"]) st.cst = bool_of(s["cst"], "cst");
  if (s["cpu_proxy"]) st.cpu_proxy = bool_of(s["cpu_proxy"], "cpu_proxy");
  if (s["nic_buffers"]) st.nic_buffers_on_gpu = choice_of(s["nic_buffers"], "nic_buffers", {"gpu", "host"}) == "gpu";
  if (s["ibuf_slots"]) st.ibuf_slots = pow2_of(s["ibuf_slots"], "ibuf_slots", 1, 1024);
}

namespace {

// The planted bugs a scenario switches on by name (core/ibgda/state.h's Plants).
constexpr std::pair<const char*, bool ibgda::Plants::*> kBoolPlants[] = {
    {"no_idle_doorbell", &ibgda::Plants::no_idle_doorbell}, {"no_carry", &ibgda::Plants::no_carry},
    {"cons_store", &ibgda::Plants::cons_store},             {"cas_swapped", &ibgda::Plants::cas_swapped},
    {"early_release", &ibgda::Plants::early_release},       {"dev0_keys", &ibgda::Plants::dev0_keys},
    {"amo_mask_inverted", &ibgda::Plants::amo_mask_inverted}, {"signal_first", &ibgda::Plants::signal_first},
    {"p_short", &ibgda::Plants::p_short},                   {"warp_get_shifted", &ibgda::Plants::warp_get_shifted},
    {"result_read_late", &ibgda::Plants::result_read_late}, {"signal_other_qp", &ibgda::Plants::signal_other_qp},
    {"chunk_of_address", &ibgda::Plants::chunk_of_address}, {"peer_unwrapped", &ibgda::Plants::peer_unwrapped},
    {"quiet_without_cst", &ibgda::Plants::quiet_without_cst}, {"fetch_without_cst", &ibgda::Plants::fetch_without_cst},
    {"ibuf_release_unowned", &ibgda::Plants::ibuf_release_unowned},
};

}  // namespace

void parse_planted(const YAML::Node& p, ibgda::Plants& plant) {
  std::vector<std::string> keys{"drop_ordering"};
  for (const auto& [key, member] : kBoolPlants) keys.push_back(key);
  only_keys(p, "planted", keys);
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
      plant.drop |= bit;
    }
  }
  for (const auto& [key, member] : kBoolPlants)
    if (p[key]) plant.*member = bool_of(p[key], key);
}

namespace {

void parse_dispatch(const YAML::Node& d, uint32_t pes, DispatchGen& g) {
  only_keys(d, "dispatch", {"experts", "tokens", "topk", "token_bytes", "direction"});
  if (d["direction"]) {
    const std::string dir = choice_of(d["direction"], "direction", {"dispatch", "combine", "both"});
    g.forward = dir != "combine", g.combine = dir != "dispatch";
  }
  for (const char* k : {"experts", "tokens", "topk", "token_bytes"})
    if (!d[k]) fail(d, std::string("dispatch needs '") + k + "'");
  g.experts = uint32_t(uint_of(d["experts"], "experts", 1, 1u << 16));
  g.tokens = uint32_t(uint_of(d["tokens"], "tokens", 1, 1u << 16));
  g.topk = uint32_t(uint_of(d["topk"], "topk", 1, g.experts));
  g.token_bytes = uint_of(d["token_bytes"], "token_bytes", 8, 1u << 24);
  if (g.experts % pes != 0)
    fail(d["experts"], std::to_string(g.experts) + " experts do not spread evenly over " + std::to_string(pes) + " PEs");
}

void parse_alltoall(const YAML::Node& a, const Scenario& sc, AlltoallGen& g) {
  only_keys(a, "alltoall", {"bytes_per_pe", "message_bytes"});
  if (!a["bytes_per_pe"] || !a["message_bytes"]) fail(a, "alltoall needs 'bytes_per_pe' and 'message_bytes'");
  g.bytes_per_pe = uint_of(a["bytes_per_pe"], "bytes_per_pe", 8, 1ull << 40);
  g.message_bytes = uint_of(a["message_bytes"], "message_bytes", 1, 1u << 30);
  if (g.bytes_per_pe % (uint64_t(sc.pes) * 8) != 0)
    fail(a["bytes_per_pe"], "'bytes_per_pe' must split into 8-byte-aligned blocks for " + std::to_string(sc.pes) + " PEs");
  if (!sc.phantom && g.bytes_per_pe > (256ull << 20)) fail(a["bytes_per_pe"], "more than 256 MiB per PE needs 'memory: phantom'");
}

// An op's name: its kind, and for an AMO which one.
struct OpName {
  const char* name;
  OpKind kind;
  AmoOp amo = AmoOp::kFetchAdd;
};
constexpr OpName kOpNames[] = {
    {"put", OpKind::kPut},           {"get", OpKind::kGet},          {"fetch_add", OpKind::kFetchAdd}, {"add", OpKind::kAdd},
    {"compare_swap", OpKind::kCompareSwap}, {"quiet", OpKind::kQuiet}, {"put_signal", OpKind::kPutSignal}, {"p", OpKind::kP},
    {"g", OpKind::kG},               {"swap", OpKind::kAmo, AmoOp::kSwap}, {"fetch_and", OpKind::kAmo, AmoOp::kFetchAnd},
    {"fetch_or", OpKind::kAmo, AmoOp::kFetchOr}, {"fetch_xor", OpKind::kAmo, AmoOp::kFetchXor}, {"fetch_inc", OpKind::kAmo, AmoOp::kFetchInc},
    {"inc", OpKind::kAmo, AmoOp::kInc}, {"set", OpKind::kAmo, AmoOp::kSet}, {"and", OpKind::kAmo, AmoOp::kAnd},
    {"or", OpKind::kAmo, AmoOp::kOr}, {"xor", OpKind::kAmo, AmoOp::kXor},
};

Op parse_op(const YAML::Node& o, const Scenario& sc, const IbgdaWorkload& iw) {
  only_keys(o, "an op", {"op", "pe", "warp", "target", "bytes", "count", "word", "value", "compare", "scope", "width", "signal", "qp"});
  std::string names;
  for (const OpName& n : kOpNames) names += (names.empty() ? "" : ", ") + std::string(n.name);
  if (!o["op"]) fail(o, "an op needs 'op' (" + names + ")");
  const OpName& name = kOpNames[index_of(o["op"], "op", [] {
    std::vector<std::string> v;
    for (const OpName& n : kOpNames) v.push_back(n.name);
    return v;
  }())];
  Op op;
  op.kind = name.kind, op.amo = name.amo;
  const std::string k = name.name;
  const bool atomic = is_atomic(op.kind), signal = op.kind == OpKind::kPutSignal;
  for (const char* key : {"word", "value", "compare", "width"}) {
    const std::string key_s = key;
    const bool fits = key_s == "compare" ? op.kind == OpKind::kCompareSwap : key_s == "value" ? atomic || signal : atomic;
    if (o[key] && !fits)
      fail(o[key], "'" + key_s + "' is for " + (key_s == "compare" ? "compare_swap" : key_s == "value" ? "atomics and put_signal" : "atomics") + ", not " + k);
  }
  if (o["signal"] && !signal) fail(o["signal"], "'signal' is for put_signal, not " + k);
  if (signal) op.signal_add = o["signal"] && choice_of(o["signal"], "signal", {"set", "add"}) == "add";
  if (o["scope"]) {
    static const char* const kScopes[] = {"thread", "warp", "block"};  // Scope's order
    op.scope = enum_of<Scope>(o["scope"], "scope", 3, [](Scope s) { return kScopes[int(s)]; });
    if (op.scope != Scope::kThread && op.kind != OpKind::kPut && op.kind != OpKind::kGet && op.kind != OpKind::kPutSignal)
      fail(o["scope"], "warp and block scope are for puts, gets and put_signal, not " + k);
    if (op.scope == Scope::kBlock && o["warp"]) fail(o["warp"], "a block-scope " + k + " is called by every warp of the CTA: no 'warp'");
  }
  if (o["qp"]) {  // which QP a thread-scope put or get takes: a pool's next, or its warp's / CTA's
    if ((op.kind != OpKind::kPut && op.kind != OpKind::kGet) || op.scope != Scope::kThread)
      fail(o["qp"], "'qp' picks the QP of a thread-scope put or get, not of a " + (op.scope != Scope::kThread ? "collective " : std::string()) + k);
    static const std::pair<const char*, QpSelector::Kind> kQps[] = {
        {"default", QpSelector::kDefault}, {"any", QpSelector::kAny}, {"warp", QpSelector::kByWarp}, {"cta", QpSelector::kByCta}};
    const std::string q = choice_of(o["qp"], "qp", {"default", "any", "warp", "cta"});
    for (const auto& [name, kind] : kQps)
      if (q == name) op.qp = kind;
  }
  if (o["word"]) op.word = uint32_t(uint_of(o["word"], "word", 0, kCounterWords - 1));
  if (o["value"]) op.value = uint_of(o["value"], "value", 0, ~0ull);
  if (o["compare"]) op.compare = uint_of(o["compare"], "compare", 0, ~0ull);
  if (o["width"]) {
    op.width = uint8_t(uint_of(o["width"], "width", 4, 8));
    if (op.width != 4 && op.width != 8) fail(o["width"], "'width' is 4 or 8 bytes");
    // A 4-byte fetch_add / add / compare_swap is the general AMO of that name.
    if (op.width == 4 && op.kind != OpKind::kAmo)
      op.amo = op.kind == OpKind::kFetchAdd ? AmoOp::kFetchAdd : op.kind == OpKind::kAdd ? AmoOp::kAdd : AmoOp::kCompareSwap, op.kind = OpKind::kAmo;
  }
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
  if (op.kind == OpKind::kP || op.kind == OpKind::kG) op.bytes = 8;
  if (o["bytes"]) {
    if (o["bytes"].IsScalar() && !o["bytes"].Scalar().empty() && o["bytes"].Scalar()[0] == '-') fail(o["bytes"], "'bytes' must not be negative");
    // Real memory: 16 MiB an op (the replay fills and checks every byte); phantom: sizes only.
    op.bytes = uint_of(o["bytes"], "bytes", 1, sc.phantom ? 1ull << 40 : 1ull << 24);
    if (atomic && op.bytes != 8) fail(o["bytes"], "atomics are 8 bytes (a 4-byte one says 'width: 4')");
    if ((op.kind == OpKind::kP || op.kind == OpKind::kG) && op.bytes > 8) fail(o["bytes"], k + " moves one value of 1 to 8 bytes");
  }
  if (o["count"]) op.count = uint32_t(uint_of(o["count"], "count", 1, 1u << 20));
  // The target waits until its signal word (0 before) equals the value it ends with.
  if (signal && (op.value == 0 || (op.signal_add && op.value * op.count == 0)))
    fail(o["value"] ? o["value"] : o, "a put_signal's signal must end nonzero (the target waits for it; the word starts at 0)");
  if (o["warp"]) op.warp = int32_t(uint_of(o["warp"], "warp", 0, iw.warps - 1));
  if (sc.phantom && (atomic || signal || op.kind == OpKind::kP || op.kind == OpKind::kG))
    fail(o["op"], k + " needs real memory, and this scenario has 'memory: phantom'");
  // The check explains a word's results by some order of its adds, or of its swaps; other
  // AMOs share a word with anything, up to the order search's size.
  if (op.kind == OpKind::kAdd || op.kind == OpKind::kFetchAdd || op.kind == OpKind::kCompareSwap)
    for (const Op& e : iw.ops)
      if ((e.kind == OpKind::kAdd || e.kind == OpKind::kFetchAdd || e.kind == OpKind::kCompareSwap) && e.target == op.target && e.word == op.word &&
          (e.kind == OpKind::kCompareSwap) != (op.kind == OpKind::kCompareSwap))
        fail(o, "word " + std::to_string(op.word) + " of PE " + std::to_string(op.target) + " takes adds and compare-swaps; give them different words");
  // A word with any other AMO is searched for an order: it takes at most kMaxSearched calls.
  const auto calls = [&](const Op& e) { return uint64_t(e.count) * iw.ctas * (e.warp >= 0 ? 1 : iw.warps) * iw.lanes; };
  if (atomic) {
    uint64_t on_word = calls(op);
    bool searched = op.kind == OpKind::kAmo;
    for (const Op& e : iw.ops)
      if (is_atomic(e.kind) && e.target == op.target && e.word == op.word) on_word += calls(e), searched |= e.kind == OpKind::kAmo;
    if (searched && on_word > AtomicCheck::kMaxSearched)
      fail(o, "word " + std::to_string(op.word) + " of PE " + std::to_string(op.target) + " takes " + std::to_string(on_word) +
                  " atomic calls with " + k + "; the order check searches " + std::to_string(AtomicCheck::kMaxSearched) + " at most");
  }
  return op;
}

}  // namespace

void parse_ibgda_workload(const YAML::Node& w, const Scenario& sc, IbgdaWorkload& iw) {
  if (const YAML::Node d = w["dispatch"]) parse_dispatch(d, sc.pes, iw.dispatch);
  if (w["ctas"]) iw.ctas = uint32_t(uint_of(w["ctas"], "ctas", 1, 64));
  if (w["warps"]) iw.warps = uint32_t(uint_of(w["warps"], "warps", 1, 32));
  if (w["lanes"]) iw.lanes = uint32_t(uint_of(w["lanes"], "lanes", 1, 32));
  if (const YAML::Node a = w["alltoall"]) parse_alltoall(a, sc, iw.alltoall);
  const YAML::Node ops = w["ops"];
  if (!ops && (iw.alltoall.bytes_per_pe != 0 || iw.dispatch.experts != 0)) return;  // generators may stand alone
  if (!ops || !ops.IsSequence() || ops.size() == 0) fail(ops ? ops : w, "'workload.ops' must be a non-empty list of ops");
  for (const YAML::Node& o : ops) iw.ops.push_back(parse_op(o, sc, iw));
}

void parse_faults(const YAML::Node& f, uint32_t pes, IbgdaWorkload& iw) {
  using ibgda::WorldFault;
  if (f.IsScalar() && f.Scalar() == "random") {
    iw.random_faults = true;
    return;
  }
  if (!f.IsSequence()) fail(f, "'faults' must be a list, or 'random'");
  for (const YAML::Node& n : f) {
    only_keys(n, "a fault", {"fault", "pe", "target", "count", "at_us", "for_us"});
    if (!n["fault"]) fail(n, "a fault needs 'fault'");
    WorldFault fl;
    fl.kind = enum_of<WorldFault::Kind>(n["fault"], "fault", WorldFault::kNodeDeath + 1, ibgda::fault_name);
    if (n["pe"]) fl.pe = uint32_t(uint_of(n["pe"], "pe", 0, pes - 1));
    if (n["target"]) fl.target = uint32_t(uint_of(n["target"], "target", 0, pes - 1));
    if (n["count"]) fl.count = uint32_t(uint_of(n["count"], "count", 1, 1ull << 31));
    if (n["at_us"]) fl.at_ns = 1000.0 * double(uint_of(n["at_us"], "at_us", 0, 1ull << 40));
    if (n["for_us"]) fl.for_ns = 1000.0 * double(uint_of(n["for_us"], "for_us", 1, 1ull << 40));
    if (fl.kind == WorldFault::kLinkDown && !n["for_us"]) fail(n, "link_down needs 'for_us' (how long the port is down)");
    iw.faults.push_back(fl);
  }
}

}  // namespace doorbell::scenario
