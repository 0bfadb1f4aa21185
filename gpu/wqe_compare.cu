// WQE for WQE with NVSHMEM (run through the device tool: gpu/run-wqe-compare). Each case of
// gpu/wqe_cases.h is posted twice into fresh rings of one shape (gpu/post_rig.h: PE 0 to PE 1,
// one QP, RC or for the DC cases a DCI with the half AV, depth 1024, NIC buffers in GPU
// memory, the same keys, heaps and ibuf), once through doorbell's device API (core/ibgda,
// CudaCtx; gpu/wqe_doorbell.cu) and once through NVSHMEM 3.4.5's ibgda_device.cuh, an instant
// fake NIC completing both; then the rings are compared byte for byte. Bytes the NIC reads (each WQE's DS) and bytes past them (never read) are told apart.
// One table row per case: WQEBBs, the control segment and the verdict; the differing fields
// follow. Exits non-zero when a case expected to match differs, a case listed as differing
// matches (its reason is stale), or doorbell reports an error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/post_rig.cuh"
#include "gpu/wqe_cases.h"

using namespace doorbell;
using namespace doorbell::wqe_compare;
using ibgda::AmoOp;

namespace {

// ---- the cases ----

constexpr const char* kLanesCoalesce = "NVSHMEM coalesces a converged warp's thread-scope calls into one reservation, "
                                       "the CQE on the last; doorbell posts each lane's on its own (a CQE each, lanes in any order)";
std::vector<Case> cases() {
  std::vector<Case> v = {
      {"put 8 B", Op::kPut, Scope::kThread, 8},
      {"put 64 KiB", Op::kPut, Scope::kThread, 64 << 10},
      {"put 8 B", Op::kPut, Scope::kLanes, 8},
      {"put 8 B", Op::kPut, Scope::kWarp, 8},
      {"put 64 KiB", Op::kPut, Scope::kBlock, 64 << 10},
      {"get 8 B", Op::kGet, Scope::kThread, 8},
      {"get 8 B", Op::kGet, Scope::kWarp, 8},
      {"get 64 KiB", Op::kGet, Scope::kBlock, 64 << 10},
      {"put_signal 64 B, set", Op::kPutSignal, Scope::kThread, 64},
      {"put_signal 64 B, add", Op::kPutSignal, Scope::kThread, 64, AmoOp::kAdd, true},
      {"put_signal 64 B, set", Op::kPutSignal, Scope::kWarp, 64},
      {"put_signal 64 KiB, add", Op::kPutSignal, Scope::kBlock, 64 << 10, AmoOp::kAdd, true},
      {"signal_op set", Op::kSignalOp, Scope::kThread, 8},
      {"signal_op add", Op::kSignalOp, Scope::kThread, 8, AmoOp::kAdd, true},
  };
  for (uint32_t b : {1u, 2u, 4u, 8u}) v.push_back({"p", Op::kP, Scope::kThread, b});
  v.push_back({"p", Op::kP, Scope::kLanes, 4, AmoOp::kAdd, false, false, kLanesCoalesce});
  for (uint32_t b : {1u, 4u, 8u}) v.push_back({"g", Op::kG, Scope::kThread, b});
  v.push_back({"g, no write ordering", Op::kG, Scope::kThread, 8, AmoOp::kAdd, false, true});
  static const char* const kNames[] = {"fetch_add", "compare_swap", "swap", "fetch_and", "fetch_or", "fetch_xor", "fetch_inc",
                                       "add",       "inc",          "set",  "and",       "or",       "xor"};
  for (uint32_t k = 0; k < ibgda::kAmoOps; ++k)
    for (uint32_t b : {4u, 8u}) v.push_back({kNames[k], Op::kAmo, Scope::kThread, b, AmoOp(k)});
  v.push_back({"fetch_add, no write ordering", Op::kAmo, Scope::kThread, 8, AmoOp::kFetchAdd, false, true});
  v.push_back({"swap, no write ordering", Op::kAmo, Scope::kThread, 8, AmoOp::kSwap, false, true});
  v.push_back({"add", Op::kAmo, Scope::kLanes, 8, AmoOp::kAdd, false, false, kLanesCoalesce});
  v.push_back({"fetch_add", Op::kAmo, Scope::kLanes, 8, AmoOp::kFetchAdd, false, false, kLanesCoalesce});
  // Over a DCI (NVSHMEM with the half AV: every port IB with a LID, compact AVs).
  const Case dc[] = {
      {"DC put 8 B", Op::kPut, Scope::kThread, 8},
      {"DC put 64 KiB", Op::kPut, Scope::kBlock, 64 << 10},
      {"DC get 8 B", Op::kGet, Scope::kWarp, 8},
      {"DC put_signal 64 B, set", Op::kPutSignal, Scope::kThread, 64},
      {"DC put_signal 64 B, add", Op::kPutSignal, Scope::kWarp, 64, AmoOp::kAdd, true},
      {"DC signal_op add", Op::kSignalOp, Scope::kThread, 8, AmoOp::kAdd, true},
      {"DC p", Op::kP, Scope::kThread, 4},
      {"DC g", Op::kG, Scope::kThread, 8},
      {"DC fetch_add", Op::kAmo, Scope::kThread, 8, AmoOp::kFetchAdd},
      {"DC compare_swap", Op::kAmo, Scope::kThread, 8, AmoOp::kCompareSwap},
      {"DC swap", Op::kAmo, Scope::kThread, 8, AmoOp::kSwap},
      {"DC add", Op::kAmo, Scope::kThread, 4, AmoOp::kAdd},
  };
  for (Case c : dc) {
    c.dc = true;
    v.push_back(c);
  }
  return v;
}

const char* scope_name(Scope s) {
  static const char* const k[] = {"thread", "32 lanes", "warp", "block"};
  return k[int(s)];
}

// ---- comparing rings ----

struct Snapshot {
  std::vector<uint8_t> wq;  // ring 0
  uint32_t wqebbs = 0;      // the DBR's send counter: WQEBBs posted
};

// The WQE starting at WQEBB i: opcode, opmod, DS, fm_ce_se (from its control segment).
struct Ctrl {
  uint8_t opcode, opmod, ds, fm_ce_se;
};
Ctrl ctrl_at(const Snapshot& s, uint32_t i) {
  const uint8_t* w = s.wq.data() + size_t(i) * 64;
  return {w[3], w[0], uint8_t(w[7] & 0x3f), w[11]};
}

// The WQEBBs the WQE starting at WQEBB i spans, by its DS (at least one).
uint32_t wqebbs_at(const Snapshot& s, uint32_t i) { return std::max(1u, (ctrl_at(s, i).ds * 16u + 63) / 64); }

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 0x00: return "NOP";
    case 0x08: return "WRITE";
    case 0x10: return "READ";
    case 0x11: return "CS";
    case 0x12: return "FA";
    case 0x14: return "MASKED_CS";
    case 0x15: return "MASKED_FA";
    case 0x23: return "DUMP";
    default: return "?";
  }
}

// The WQEs of a snapshot, walked by their DS, as "OP/ds" (+: an opmod, c: asks for a CQE),
// a run of equal ones as "31x OP/ds".
std::string wqe_list(const Snapshot& s) {
  std::vector<std::string> names;
  for (uint32_t i = 0; i < s.wqebbs;) {
    const Ctrl c = ctrl_at(s, i);
    char b[40];
    std::snprintf(b, sizeof b, "%s%s/%u%s", opcode_name(c.opcode), c.opmod ? "+" : "", c.ds, (c.fm_ce_se & 0x08) ? "c" : "");
    names.push_back(b);
    i += wqebbs_at(s, i);
  }
  std::string out;
  for (size_t i = 0, run; i < names.size(); i += run) {
    for (run = 1; i + run < names.size() && names[i + run] == names[i];) ++run;
    out += (out.empty() ? "" : " ") + (run > 1 ? std::to_string(run) + "x " : std::string()) + names[i];
  }
  return out;
}

// Which bytes of the ring the NIC reads: each WQE's first ds * 16 bytes.
std::vector<bool> read_mask(const Snapshot& s) {
  std::vector<bool> m(size_t(s.wqebbs) * 64, false);
  for (uint32_t i = 0; i < s.wqebbs;) {
    const uint32_t ds = ctrl_at(s, i).ds;
    for (uint32_t b = 0; b < ds * 16 && size_t(i) * 64 + b < m.size(); ++b) m[size_t(i) * 64 + b] = true;
    i += wqebbs_at(s, i);
  }
  return m;
}

const char* field_name(uint32_t off_in_wqe) {
  if (off_in_wqe < 4) return "ctrl opmod/idx/opcode";
  if (off_in_wqe < 8) return "ctrl qpn/ds";
  if (off_in_wqe < 11) return "ctrl signature";
  if (off_in_wqe < 12) return "ctrl fm_ce_se";
  if (off_in_wqe < 16) return "ctrl imm";
  static char b[32];
  std::snprintf(b, sizeof b, "segment %u", off_in_wqe / 16);
  return b;
}

// Bytes within the DS that NVSHMEM never writes or writes from an uninitialised local
// (docs/nvshmem-device-ops.md §8), all ignored by the NIC: an 8-byte ATOMIC_FA's compare
// field and a 4-byte MASKED_FA segment's reserved half (bytes 40..47), a NOP's bytes 16..31
// (ds 2, only the control segment written), an inline WRITE's padding after its payload.
// `w`: the WQE's first byte; `av`: the bytes of its address vector (16 on a DCI, else 0),
// which move the segments after it.
bool indeterminate(const uint8_t* w, uint32_t off, uint32_t av) {
  const uint8_t opcode = w[3], opmod = w[0];
  if (opcode == 0x00) return off >= 16 && off < 32;
  if (off < av) return false;
  off -= av, w += av;
  if (opcode == 0x12 || (opcode == 0x15 && opmod == mlx5::ext_atomic_opmod(4))) return off >= 40 && off < 48;
  if (opcode == 0x08 && (w[32] & 0x80) != 0) return off >= 36 + ((uint32_t(w[34]) << 8 | w[35]) & 0x3ff) && off < 48;
  return false;
}

struct Diff {
  uint32_t read = 0, unread = 0;  // differing bytes the NIC reads / never reads
  uint32_t indeterminate = 0;     // ... that NVSHMEM leaves indeterminate
  std::vector<std::string> where;
};

Diff compare(const Snapshot& nv, const Snapshot& db, uint32_t av) {
  Diff d;
  const uint32_t n = std::max(nv.wqebbs, db.wqebbs);
  const std::vector<bool> mn = read_mask(nv), md = read_mask(db);
  // The first WQEBB of the WQE each WQEBB belongs to, along the longer ring's WQEs.
  const Snapshot& walk = nv.wqebbs >= db.wqebbs ? nv : db;
  std::vector<uint32_t> first(n);
  for (uint32_t w = 0; w < n;) {
    const uint32_t len = wqebbs_at(walk, w);
    for (uint32_t k = w; k < w + len && k < n; ++k) first[k] = w;
    w += len;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t start = first[i];
    for (uint32_t b = 0; b < 64; ++b) {
      const size_t at = size_t(i) * 64 + b;
      if (nv.wq[at] == db.wq[at]) continue;
      const bool read = (at < mn.size() && mn[at]) || (at < md.size() && md[at]);
      const uint32_t off = uint32_t(at - size_t(start) * 64);
      if (read && indeterminate(walk.wq.data() + size_t(start) * 64, off, av)) {
        ++d.indeterminate;
        continue;
      }
      ++(read ? d.read : d.unread);
      if (!read || d.where.size() >= 8) continue;
      char line[160];
      std::snprintf(line, sizeof line, "WQEBB %u byte %2u (%s): NVSHMEM %02x, doorbell %02x", i, b, field_name(off), nv.wq[at], db.wq[at]);
      d.where.push_back(line);
    }
  }
  return d;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s; one QP (RC; DC rows: a DCI, the half AV), depth %u, NIC buffers in GPU memory; the rings' unwritten bytes 0xee\n", prop.name,
              post_rig::kDepth);
  if (const char* why = nvshmem_missing()) {
    std::printf("NVSHMEM: %s; nothing to compare\n", why);
    return 2;
  }
  post_rig::PostRig rig;
  unsigned long long* fails = dalloc<unsigned long long>(1);
  const size_t ring = size_t(post_rig::kDepth) * 64;
  auto snapshot = [&] {
    Snapshot s;
    s.wq.resize(ring);
    CHECK(cudaMemcpy(s.wq.data(), rig.r.wq, ring, cudaMemcpyDeviceToHost));
    uint64_t dbr = 0;
    CHECK(cudaMemcpy(&dbr, rig.r.dbr, 8, cudaMemcpyDeviceToHost));
    s.wqebbs = mlx5::dbr_send(dbr);
    return s;
  };
  int bad = 0;
  std::printf("%-32s %-8s | %-36s | %-36s | %s\n", "operation", "scope", "NVSHMEM 3.4.5 WQEs (OP/ds, c: CQE)", "doorbell WQEs",
              "verdict");
  std::vector<std::string> details;
  for (const Case& c : cases()) {
    // doorbell
    std::vector<void*> allocs;
    ibgda::DevState s = post_rig::doorbell_rig_state(rig.r, 1, allocs, c.dc);
    s.opt.may_skip_cst = !c.cst;
    doorbell_set_state(s);
    doorbell_launch(c, 0, true, fails);  // loads the kernel before the NIC runs
    CHECK(cudaDeviceSynchronize());
    rig.run(1, "doorbell", c.name, [&] { doorbell_launch(c, rig.work_stream, false, fails); }, 0xee);
    const Snapshot db = snapshot();
    for (void* p : allocs) CHECK(cudaFree(p));
    // NVSHMEM
    nvshmem_prepare(rig.r, c.cst, c.dc);
    rig.run(1, "NVSHMEM", c.name, [&] { nvshmem_launch(c, rig.work_stream); }, 0xee);
    const Snapshot nv = snapshot();
    nvshmem_release();

    const Diff d = compare(nv, db, c.dc ? 16 : 0);
    const bool same = d.read == 0 && nv.wqebbs == db.wqebbs;
    std::string verdict = same ? "same" : "DIFFERENT";
    if (same && d.indeterminate != 0) verdict += " (but " + std::to_string(d.indeterminate) + " bytes NVSHMEM leaves indeterminate)";
    if (same && d.unread != 0) verdict += " (" + std::to_string(d.unread) + " unread bytes differ)";
    if (!same) verdict += " (" + std::to_string(d.read) + " bytes)";
    if (same == (c.known == nullptr)) {
      if (c.known != nullptr) verdict += ": known";
    } else {
      ++bad;
      verdict += same ? ": listed as differing, but matches" : ": unexpected";
    }
    std::printf("%-32s %-8s | %-36s | %-36s | %s\n", (c.name + std::string(c.op == Op::kAmo || c.op == Op::kP || c.op == Op::kG
                                                                                 ? " " + std::to_string(c.bytes) + " B"
                                                                                 : "")).c_str(),
                scope_name(c.scope), wqe_list(nv).c_str(), wqe_list(db).c_str(), verdict.c_str());
    if (!same) {
      std::string det = std::string("  ") + c.name + " (" + scope_name(c.scope) + "): " + std::to_string(nv.wqebbs) + " vs " +
                        std::to_string(db.wqebbs) + " WQEBBs" + (c.known ? std::string("; ") + c.known : std::string()) + "\n";
      for (const std::string& w : d.where) det += "    " + w + "\n";
      details.push_back(det);
    }
  }
  if (!details.empty()) std::printf("\ndifferences (first 8 read bytes each):\n");
  for (const std::string& d : details) std::printf("%s", d.c_str());
  unsigned long long f = 0;
  CHECK(cudaMemcpy(&f, fails, 8, cudaMemcpyDeviceToHost));
  // (A wait that timed out is logged in gpu/wqe_doorbell.cu's own timeout log, not read here:
  // `fails` counts it.)
  if (f != 0) std::printf("doorbell: %llu calls saw an error or a timeout\n", f);
  std::printf("%s: %d case(s) not as listed\n", bad == 0 && f == 0 ? "PASS" : "FAIL", bad);
  return bad == 0 && f == 0 ? 0 : 1;
}
