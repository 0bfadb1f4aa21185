// Every malformed-WQE class the model detects: the failing WQE gets an error CQE with the
// mlx5 syndrome (and the model's vendor code), the QP goes to ERR, later WQEs are flushed,
// and no byte outside registered memory (nor inside, for a failed op) changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "hw/mock_nic/devx/malformed_cases.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;

class MalformedWqe : public ::testing::TestWithParam<size_t> {};

TEST_P(MalformedWqe, ErrorCqeThenFlushAndNoStrayWrite) {
  const Case& c = cases()[GetParam()];
  Env e;
  std::vector<std::string> lines;
  e.rig.nic().set_trace([&](const doorbell::trace::Event& ev) { lines.push_back(doorbell::trace::line(ev)); });
  const uint64_t ok = e.a.nop(kCtrlCqUpdate);  // completes normally before the bad one
  const uint64_t bad_idx = e.a.pi;
  c.post(e);
  const uint64_t after1 = e.a.write(e.key, e.reg_lo, 8, e.key, e.reg_lo + 4096, 0);  // unsignaled: still flushed
  const uint64_t after2 = e.a.nop(kCtrlCqUpdate);
  e.snapshot();
  e.a.ring_doorbell();
  ASSERT_TRUE(e.rig.run());

  EXPECT_EQ(e.changed(), 0u) << "the failed WQE or a flushed one changed memory";
  const Cqe64* c0 = e.a.poll();
  ASSERT_NE(c0, nullptr);
  EXPECT_EQ(c0->opcode(), uint8_t(CqeOpcode::kReq));
  EXPECT_EQ(c0->wqe_counter.get(), uint16_t(ok));

  const auto* err = reinterpret_cast<const ErrCqe64*>(e.a.poll());
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->op_own >> 4, uint8_t(CqeOpcode::kReqErr));
  EXPECT_EQ(err->syndrome, uint8_t(c.syndrome)) << syndrome_name(CqeSyndrome(err->syndrome));
  EXPECT_EQ(err->vendor_err_synd, c.vendor);
  EXPECT_EQ(err->wqe_counter.get(), uint16_t(bad_idx));
  EXPECT_EQ(err->s_wqe_opcode_qpn.get() & 0xffffff, e.a.qpn);
  EXPECT_EQ(e.rig.nic().qp(e.a.qpn)->state, QpState::kErr);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("mock_nic_wqe_error") == 0; }));

  for (uint64_t idx : {after1, after2}) {
    const auto* f = reinterpret_cast<const ErrCqe64*>(e.a.poll());
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->syndrome, uint8_t(CqeSyndrome::kWrFlushErr));
    EXPECT_EQ(f->wqe_counter.get(), uint16_t(idx));
  }
  EXPECT_EQ(e.a.poll(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(AllClasses, MalformedWqe, ::testing::Range<size_t>(0, cases().size()),
                         [](const auto& info) { return std::string(cases()[info.param].name); });

TEST(PeerNotReady, TransportRetryExceeded) {
  Rig rig;
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  rig.connect(a, b);
  ASSERT_TRUE(rig.nic().modify_qp(b.qpn, QpState::kErr).is_ok());  // the responder drops everything
  auto buf = rig.alloc(64);
  auto k = rig.reg(buf, 64, kAll);
  a.write(k, buf, 8, k, buf + 8);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const auto* err = reinterpret_cast<const ErrCqe64*>(a.poll());
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->syndrome, uint8_t(CqeSyndrome::kTransportRetryExcErr));
}

TEST(BadDoorbell, WrongUarOrQpnIsIgnoredAndCounted) {
  Rig rig;
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  rig.connect(a, b);
  a.nop();
  a.dbr()->snd.set(uint32_t(a.pi));
  rig.nic().uar_write64(b.uar, kBfOffset, a.last_doorbell);  // a's QPN through b's UAR
  rig.nic().uar_write64(a.uar, 0x10, a.last_doorbell);       // not a BlueFlame register
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(rig.nic().bad_doorbells(), 2u);
  EXPECT_EQ(a.poll(), nullptr);
  EXPECT_TRUE(rig.nic().mmio_write64(rig.nic().uar_va(a.uar) + kBfOffset, a.last_doorbell));
  EXPECT_FALSE(rig.nic().mmio_write64(0x1234, a.last_doorbell));
  ASSERT_TRUE(rig.run());
  EXPECT_NE(a.poll(), nullptr);
}

TEST(ControlPath, BadObjectParametersAreRefused) {
  Rig rig;
  Nic& nic = rig.nic();
  EXPECT_EQ(nic.create_cq({6, 0xdead0000, 0, false}).status().code(), Errc::kBadParam);
  EXPECT_EQ(nic.create_cq({23, 0, 0, false}).status().code(), Errc::kBadParam);
  QpAttr qa;
  qa.send_cqn = 0x9999;
  EXPECT_EQ(nic.create_qp(qa).status().code(), Errc::kNotFound);
  qa.log_sq_size = 16;
  EXPECT_EQ(nic.create_qp(qa).status().code(), Errc::kBadParam);
  auto buf = rig.alloc(4096);
  EXPECT_EQ(nic.reg_mr(rig.pd, buf, 8192, kAll).status().code(), Errc::kBadParam);  // past the segment
  EXPECT_EQ(nic.dereg_mr(0x1234).code(), Errc::kNotFound);
  auto k = rig.reg(buf, 4096, kAll);
  EXPECT_EQ(rig.mem.free(buf).code(), Errc::kBadState);  // registered memory cannot be freed
  EXPECT_TRUE(nic.dereg_mr(k).is_ok());
  EXPECT_TRUE(rig.mem.free(buf).is_ok());
}

}  // namespace
}  // namespace doorbell::testing
