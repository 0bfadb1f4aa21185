// Property: the engine's loop for runs of plain RDMA WRITEs (NicConfig::batch_writes) leaves
// exactly the state issue() alone leaves. Random streams of good and malformed WRITEs mixed
// with inline WRITEs, WRITEs from or to phantom memory, WRITEs onto their own WQE, WRITEs
// from or onto the CQ's first CQE (the loop holds a collapsed CQ's CQEs to its end), READs,
// atomics and NOPs, doorbells, engine steps of random budgets, CQ polls (or none: the CQ
// overruns), delayed CQEs, links going down for a while, and the responder failing or losing
// its write right, run on two identical rigs, batching on and off; memory, CQs, QPs and
// errors must be equal.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;
constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
constexpr uint32_t kRegion = 4096;

enum class Act : uint8_t {
  kWrite, kBadLkey, kBadRkey, kOutOfRange, kReadOnlyRkey, kWrongQpn, kZeroLength,
  kInline, kRead, kFetchAdd, kNop, kPhantomSrc, kPhantomDst, kDoorbell, kProgress, kPoll, kPeerError, kPeerNoWrite, kLinkDown, kCqDelay, kOntoOwnWqe,
  kOntoCqe, kFromCqe
};

struct Step {
  Act act = Act::kNop;
  uint32_t loff = 0, roff = 0, len = 8;
  bool signaled = false;
};

struct Stream {
  bool cross_nic = false;
  bool collapsed = false;    // IBGDA's CQ: every CQE in slot 0, overrun ignored
  bool oi = false;           // a ring CQ that ignores overrun too
  bool check_index = true;   // NicConfig::check_wqe_index
  uint32_t log_sq = 4, log_cq = 3;
  std::vector<Step> steps;
};

void showValue(const Stream& s, std::ostream& os) {
  os << "cross_nic=" << s.cross_nic << " collapsed=" << s.collapsed << " oi=" << s.oi << " check_index=" << s.check_index << " log_sq=" << s.log_sq << " log_cq=" << s.log_cq << "\n";
  for (const Step& t : s.steps)
    os << "  act=" << int(t.act) << " l=" << t.loff << " r=" << t.roff << " len=" << t.len << (t.signaled ? " sig" : "") << "\n";
}

rc::Gen<Stream> gen_stream() {
  return rc::gen::exec([] {
    Stream s;
    s.cross_nic = *rc::gen::arbitrary<bool>();
    s.collapsed = *rc::gen::arbitrary<bool>();
    s.oi = !s.collapsed && *rc::gen::inRange(0, 4) == 0;
    s.check_index = *rc::gen::inRange(0, 4) != 0;
    s.log_sq = *rc::gen::inRange<uint32_t>(2, 6);
    s.log_cq = *rc::gen::inRange<uint32_t>(1, 5);
    const int n = *rc::gen::inRange(1, 120);
    for (int i = 0; i < n; ++i) {
      Step t;
      // Mostly good WRITEs, doorbells, steps and polls: long runs for the batch loop to take.
      // What fails a QP is rare, so that what comes after it is reached too.
      const int pick = *rc::gen::inRange(0, 100);
      if (pick < 55) t.act = Act::kWrite;
      else if (pick < 68) t.act = Act::kDoorbell;
      else if (pick < 81) t.act = Act::kProgress;
      else if (pick < 86) t.act = Act::kPoll;
      else if (pick < 96)
        t.act = *rc::gen::element(Act::kInline, Act::kRead, Act::kFetchAdd, Act::kNop, Act::kPhantomSrc, Act::kPhantomDst, Act::kLinkDown,
                                  Act::kCqDelay, Act::kOntoOwnWqe, Act::kOntoCqe, Act::kFromCqe);
      else t.act = *rc::gen::element(Act::kBadLkey, Act::kBadRkey, Act::kOutOfRange, Act::kReadOnlyRkey, Act::kWrongQpn,
                                     Act::kZeroLength, Act::kPeerError, Act::kPeerNoWrite);
      t.loff = *rc::gen::inRange<uint32_t>(0, kRegion - 64);
      t.roff = *rc::gen::inRange<uint32_t>(0, kRegion - 64);
      t.len = *rc::gen::inRange<uint32_t>(1, 65);
      t.signaled = *rc::gen::inRange(0, 4) == 0;
      s.steps.push_back(t);
    }
    return s;
  });
}

// Runs `s` on a fresh rig and describes everything the engine left behind.
std::string run(const Stream& s, bool batch) {
  NicConfig cfg;
  cfg.batch_writes = batch;
  cfg.check_wqe_index = s.check_index;
  Rig rig(2, cfg);
  const int rn = s.cross_nic ? 1 : 0;
  SendQueue a = rig.make_sq(0, s.log_sq, s.log_cq, s.collapsed, {}, s.collapsed || s.oi ? 1 : 0);
  SendQueue b = rig.make_sq(rn, 6, 6);
  rig.connect(a, b);
  const uint64_t src = rig.alloc(kRegion), dst = rig.alloc(kRegion), ro = rig.alloc(kRegion);
  for (uint32_t i = 0; i < kRegion; ++i) *rig.mem.translate(src + i, 1) = std::byte(i * 13 + 5);
  const uint32_t lkey = rig.reg(src, kRegion, kAll), rkey = rig.reg(dst, kRegion, kAll, rn);
  const uint32_t ro_key = rig.reg(ro, kRegion, kLocalWrite | kRemoteRead, rn);
  // Phantom memory (address space without bytes; a write to or from it is logged, not done)
  // at the same address in both rigs.
  const uint64_t ph = 0x6a00'0000'0000ull;
  mock_nic::driver::check(rig.mem.map_external(reinterpret_cast<void*>(ph), kRegion, mem::MemKind::kGpu, "phantom", true));
  const uint32_t ph_lkey = rig.reg(ph, kRegion, kAll), ph_rkey = rig.reg(ph, kRegion, kAll, rn);
  // The send ring is registered too: a WRITE may land on its own control segment.
  const uint32_t ring_key = rig.reg(a.sq_va, uint64_t(kWqebb) << s.log_sq, kAll, rn);
  // And the CQ: a WRITE may read its first CQE or land on it (on bytes 0..31, which a CQE
  // zeroes, so that polls still see the CQEs as they are; what it lands is read back, since
  // a later CQE would zero it).
  const uint64_t cq_bytes = uint64_t(64) << s.log_cq;
  const uint32_t cq_lkey = rig.reg(a.cq_va, cq_bytes, kAll), cq_rkey = rig.reg(a.cq_va, cq_bytes, kAll, rn);
  const uint64_t result = rig.alloc(64);
  const uint32_t result_key = rig.reg(result, 64, kAll);
  auto room = [&](uint32_t k) { return a.pi - rig.nic(0).qp(a.qpn)->head + k < (1u << s.log_sq); };
  for (const Step& t : s.steps) {
    const uint8_t f = t.signaled ? kCtrlCqUpdate : 0;
    const bool post = t.act <= Act::kNop || t.act >= Act::kOntoCqe;
    if (post && !room(t.act == Act::kOntoCqe ? 2 : 1)) {
      rig.nic(0).progress(4);
      continue;
    }
    switch (t.act) {
      case Act::kWrite: a.write(lkey, src + t.loff, t.len, rkey, dst + t.roff, f); break;
      case Act::kBadLkey: a.write(lkey + 0x100, src + t.loff, t.len, rkey, dst + t.roff, f); break;
      case Act::kBadRkey: a.write(lkey, src + t.loff, t.len, rkey ^ 0x1, dst + t.roff, f); break;
      case Act::kOutOfRange: a.write(lkey, src + t.loff, t.len, rkey, dst + kRegion - t.len / 2, f); break;
      case Act::kReadOnlyRkey: a.write(lkey, src + t.loff, t.len, ro_key, ro + t.roff, f); break;
      case Act::kWrongQpn: {
        const uint64_t i = a.write(lkey, src + t.loff, t.len, rkey, dst + t.roff, f);
        auto* ctrl = reinterpret_cast<WqeCtrlSeg*>(a.ring() + (i & ((1u << s.log_sq) - 1)) * kWqebb);
        ctrl->qpn_ds.set(((a.qpn + 1) << 8) | 3);
        break;
      }
      case Act::kZeroLength: a.write(lkey, src + t.loff, 0, rkey, dst + t.roff, f); break;
      case Act::kInline: a.write_inline(rig.mem.translate(src + t.loff, 1), t.len % 40 + 1, rkey, dst + t.roff, f); break;
      case Act::kRead: a.read(lkey, src + t.loff, t.len, rkey, dst + t.roff, f); break;
      case Act::kFetchAdd: a.atomic(WqeOpcode::kAtomicFa, t.len, 0, result_key, result, rkey, dst + (t.roff & ~7u), f); break;
      case Act::kNop: a.nop(f); break;
      case Act::kPhantomSrc: a.write(ph_lkey, ph + t.loff, t.len, rkey, dst + t.roff, f); break;
      case Act::kPhantomDst: a.write(lkey, src + t.loff, t.len, ph_rkey, ph + t.roff, f); break;
      case Act::kDoorbell: a.ring_doorbell(); break;
      case Act::kProgress: rig.nic(0).progress(t.len % 24 + 1); break;
      case Act::kPoll: while (a.poll() != nullptr) {} break;
      case Act::kPeerError: (void)b.nic->force_qp_error(b.qpn); break;
      case Act::kPeerNoWrite: (void)b.nic->set_qp_access(b.qpn, kRemoteRead | kRemoteAtomic); break;
      case Act::kOntoOwnWqe:  // one source byte onto its own fm_ce_se byte (CQ_UPDATE is 0x08)
        a.write(lkey, src + t.loff, 1, ring_key, a.sq_va + (a.pi & ((1u << s.log_sq) - 1)) * kWqebb + 11, f);
        break;
      case Act::kOntoCqe:  // bytes onto the CQE (unsignaled: its own CQE would zero them), read back into dst
        a.write(lkey, src + t.loff, t.len % 8 + 1, cq_rkey, a.cq_va + t.roff % 24, 0);
        a.write(cq_lkey, a.cq_va + t.roff % 24, t.len % 8 + 1, rkey, dst + t.roff, f);
        break;
      case Act::kFromCqe: a.write(cq_lkey, a.cq_va + 56, 8, rkey, dst + t.roff, f); break;  // wqe_counter, op_own
      case Act::kCqDelay: (void)a.nic->set_completion_delay(a.cqn, t.len % 6); break;  // CQEs appear later
      case Act::kLinkDown: {  // a few engine actions from now, for a few more: inside a run of WRITEs
        Nic& n = t.len % 2 != 0 ? *a.nic : *b.nic;
        const double from = n.clock_ns() + double(t.loff % 8 + 1) * n.config().action_ns;
        n.set_link_down(from, from + double(t.roff % 16 + 1) * n.config().action_ns);
        break;
      }
    }
  }
  a.ring_doorbell();
  for (int i = 0; i < 10000 && rig.nic(0).progress() + rig.nic(1).progress() != 0;) ++i;

  std::ostringstream os;
  // An address as region + offset: the regions' addresses differ between the two rigs.
  auto at = [&](uint64_t va) {
    const std::pair<const char*, uint64_t> regions[] = {{"src", src}, {"dst", dst}, {"ro", ro}, {"ph", ph}, {"cq", a.cq_va}, {"result", result}};
    for (const auto& [name, base] : regions)
      if (va - base < kRegion) return std::string(name) + "+" + std::to_string(va - base);
    return std::to_string(va);
  };
  auto bytes = [&](const char* what, uint64_t va, uint64_t len) {
    const std::byte* p = rig.mem.translate(va, len);
    os << what << ":";
    for (uint64_t i = 0; i < len; ++i) os << ' ' << int(p[i]);
    os << "\n";
  };
  bytes("dst", dst, kRegion);
  bytes("ro", ro, kRegion);
  bytes("result", result, 64);
  bytes("cq", a.cq_va, uint64_t(64) << s.log_cq);
  for (const SendQueue* q : {&a, &b}) {
    const Qp& p = *q->nic->qp(q->qpn);
    os << "qp " << p.qpn << " state " << int(p.state) << " head " << p.head << " prod " << p.prod << " rcv_upto " << p.rcv_upto
       << " wqes " << p.stats.wqes << " wqebbs " << p.stats.wqebbs << " bytes " << p.stats.bytes << " errors " << p.stats.errors
       << " flushed " << p.stats.flushed << " inflight " << p.inflight.size() << "\n";
  }
  const Cq& cq = *rig.nic(0).cq(a.cqn);
  os << "cq pi " << cq.pi << " written " << cq.cqes_written << " errors " << cq.errors_written << " overrun " << cq.overrun << "\n";
  for (int n = 0; n < 2; ++n) {
    const Nic& nic = rig.nic(n);
    os << "nic " << n << " now " << nic.now() << " moved " << nic.bytes_moved() << "\n";
    for (const auto& e : nic.errors())
      os << "  error qpn " << e.qpn << " wqe " << e.wqe_idx << " op " << int(e.wqe_opcode) << " synd " << int(e.syndrome) << " vendor "
         << int(e.vendor) << "\n";
    for (const auto& c : nic.phantom_log()) os << "  phantom " << at(c.dst) << " " << at(c.src) << " " << c.len << "\n";
    for (const auto& e : nic.events()) os << "  event " << int(e.kind) << " " << e.object << " " << int(e.syndrome) << "\n";
  }
  return os.str();
}

RC_GTEST_PROP(BatchWrites, LeaveTheStateIssueAloneLeaves, ()) {
  const Stream s = *gen_stream();
  const std::string batched = run(s, true), single = run(s, false);
  RC_ASSERT(batched == single);
}

// The streams reach the batch loop's exits: a run of good WRITEs, then each kind of WQE it
// must leave to issue() right behind it.
TEST(BatchWrites, EveryExitOfTheLoopIsTaken) {
  for (const bool collapsed : {false, true})  // a ring CQ, and one whose CQEs the loop holds to its end
    for (int act = int(Act::kBadLkey); act <= int(Act::kFromCqe); ++act) {
      Stream s;
      s.cross_nic = act % 2 == 0;
      s.collapsed = collapsed;
      for (int i = 0; i < 5; ++i) s.steps.push_back({Act::kWrite, uint32_t(8 * i), uint32_t(16 * i), 8, i == 2});
      s.steps.push_back({Act(act), 64, 128, 24, true});
      for (int i = 0; i < 3; ++i) s.steps.push_back({Act::kWrite, uint32_t(200 + 8 * i), uint32_t(300 + 8 * i), 8, true});
      s.steps.push_back({Act::kDoorbell});
      s.steps.push_back({Act::kProgress, 0, 0, 23});  // one step of 24 actions: one run of the batch loop
      EXPECT_EQ(run(s, true), run(s, false)) << "after act " << act << (collapsed ? " (collapsed CQ)" : "");
    }
}

}  // namespace
}  // namespace doorbell::testing
