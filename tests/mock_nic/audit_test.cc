// NicConfig::audit, the harness's checks on a client's queues at each doorbell: each finding
// fires on its planted client mistake, names the QP and the slot, and stays silent for the
// same client without the mistake.
#include <gtest/gtest.h>

#include <string>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using mock_nic::NicConfig;
using mock_nic::QpState;

NicConfig audited() {
  NicConfig c;
  c.audit = true;
  return c;
}

std::string lines(const Nic& n) {
  std::string s;
  for (const std::string& l : n.audit()) s += l + "\n";
  return s;
}

struct Pair {
  Rig rig{1, audited()};
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  Pair() { rig.connect(a, b); }
};

TEST(Audit, AWellBehavedClientFiresNothing) {
  Pair p;
  for (int round = 0; round < 5; ++round) {  // past the 64-WQEBB ring's wrap
    for (int i = 0; i < 20; ++i) p.a.nop(i == 19 ? kCtrlCqUpdate : 0);
    p.a.ring_doorbell();
    ASSERT_TRUE(p.rig.run());
    while (p.a.poll() != nullptr) {
    }
  }
  EXPECT_EQ(lines(p.rig.nic()), "");
}

// A doorbell rung past a WQE another thread reserved but had not written: its slot still
// holds the previous lap's WQE (another wqe_index), or nothing at all.
TEST(Audit, ADoorbellPastAWqeNotYetWrittenIsReportedWithItsSlot) {
  Pair p;
  for (int i = 0; i < 64; ++i) p.a.nop(0);  // one lap: slot 1 holds WQE 1
  p.a.ring_doorbell();
  ASSERT_TRUE(p.rig.run());
  p.a.nop(0);  // WQE 64 in slot 0
  p.a.pi += 1;  // WQE 65 reserved by "another thread", not written: slot 1 still holds WQE 1
  p.a.nop(kCtrlCqUpdate);
  p.a.ring_doorbell();
  const std::string got = lines(p.rig.nic());
  EXPECT_NE(got.find("slot 65 (WQEBB 1) below the doorbell record 67 is not a whole WQE: its wqe_index field is another slot's"),
            std::string::npos)
      << got;
  // The engine does not execute it either: the WQE's index check ends the QP with an error CQE.
  ASSERT_TRUE(p.rig.run());
  EXPECT_EQ(p.rig.nic().qp(p.a.qpn)->state, QpState::kErr);
}

TEST(Audit, TheDoorbellRecordMovingBackIsReported) {
  Pair p;
  for (int i = 0; i < 4; ++i) p.a.nop(0);
  p.a.ring_doorbell();
  p.a.ring_doorbell(2);
  EXPECT_NE(lines(p.rig.nic()).find("the doorbell record went from 4 to 2"), std::string::npos) << lines(p.rig.nic());
}

TEST(Audit, ABlueFlameIndexOutsideTheDoorbellRecordIsReported) {
  Pair p;
  p.a.nop(0);
  p.a.nop(0);
  WqeCtrlSeg bad{};
  set_ctrl_seg(&bad, 40, WqeOpcode::kNop, 0, p.a.qpn, 0, 1, 0);  // index 40: not among [0, 2]
  p.a.last_doorbell = doorbell_word(bad);
  p.a.ring_doorbell();
  EXPECT_NE(lines(p.rig.nic()).find("BlueFlame index 40 outside the doorbell record's [0, 2]"), std::string::npos) << lines(p.rig.nic());
}

TEST(Audit, WqesPostedToAQpInErrAreReported) {
  Pair p;
  ASSERT_TRUE(p.rig.nic().modify_qp(p.a.qpn, QpState::kErr));
  p.a.nop();
  p.a.ring_doorbell();
  EXPECT_NE(lines(p.rig.nic()).find("WQEBBs [0, 1) posted to a QP in ERR"), std::string::npos) << lines(p.rig.nic());
}

TEST(Audit, ACqOverrunIsReported) {
  Rig rig{1, audited()};
  SendQueue a = rig.make_sq(0, 6, 2), b = rig.make_sq();  // a 4-entry CQ nobody polls
  rig.connect(a, b);
  for (int i = 0; i < 6; ++i) a.nop(kCtrlCqUpdate);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_NE(lines(rig.nic()).find("overrun - CQE 4 found the client's consumer index at 0 on a 4-entry CQ"), std::string::npos)
      << lines(rig.nic());
}

}  // namespace
}  // namespace doorbell::testing
