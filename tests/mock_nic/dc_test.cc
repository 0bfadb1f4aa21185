// DC in the NIC model: a DC initiator names its target in each WQE's address vector (LID,
// DCT number, DC key); a DCT made with CREATE_DCT answers any DCI whose key is its own, on
// its own NIC (loopback, as NVSHMEM's sends to self) or another. A wrong key is dropped: the
// DCT's NIC raises DCT_KEY_VIOLATION and the DCI retries until TRANSPORT_RETRY_EXC_ERR.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;

constexpr uint64_t kKey = 0x5623ceaf;  // NVSHMEM's DC access key
constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

TEST(Dc, OneDciReachesDctsOnItsOwnNicAndAnother) {
  Rig rig(2);
  SendQueue dci = rig.make_dci(0);
  const uint32_t self = rig.make_dct(0, kKey), other = rig.make_dct(1, kKey);
  const uint64_t buf = rig.alloc(4096);
  const uint32_t k0 = rig.reg(buf, 4096, kAll, 0), k1 = rig.reg(buf, 4096, kAll, 1);
  auto* b = reinterpret_cast<uint8_t*>(buf);
  for (int i = 0; i < 256; ++i) b[i] = uint8_t(i * 3 + 1);
  std::memset(b + 2048, 0, 8);
  *reinterpret_cast<uint64_t*>(b + 1024) = 40;
  dci.dc_rdma(WqeOpcode::kRdmaWrite, rig.nic(1).lid(), other, kKey, k0, buf, 256, k1, buf + 512, 0);  // over the wire
  dci.dc_fetch_add(rig.nic(0).lid(), self, kKey, 2, k0, buf + 2048, k0, buf + 1024);          // loopback to self
  const uint64_t last = dci.dc_rdma(WqeOpcode::kRdmaRead, rig.nic(1).lid(), other, kKey, k0, buf + 3072, 256, k1, buf + 512);
  dci.ring_doorbell();
  ASSERT_TRUE(rig.run());
  for (const uint64_t want : {uint64_t(1), last}) {  // the fetch-add's CQE (it takes WQEBBs 1 and 2), then the READ's
    const Cqe64* c = dci.poll();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->opcode(), uint8_t(CqeOpcode::kReq)) << "syndrome 0x" << std::hex << int(reinterpret_cast<const ErrCqe64*>(c)->syndrome);
    EXPECT_EQ(c->wqe_counter.get(), uint16_t(want));
  }
  EXPECT_EQ(std::memcmp(b + 512, b, 256), 0);
  EXPECT_EQ(std::memcmp(b + 3072, b, 256), 0);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(b + 1024), 42u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(b + 2048), 40u);
  EXPECT_EQ(rig.nic(0).qp(dci.qpn)->stats.wqes, 3u);
}

TEST(Dc, AWrongKeyIsDroppedAndTheDciRetriesOut) {
  Rig rig(2);
  SendQueue dci = rig.make_dci(0);
  const uint32_t dct = rig.make_dct(1, kKey);
  const uint64_t buf = rig.alloc(4096, 0x5a);
  const uint32_t k0 = rig.reg(buf, 4096, kAll, 0), k1 = rig.reg(buf, 4096, kAll, 1);
  dci.dc_rdma(WqeOpcode::kRdmaWrite, rig.nic(1).lid(), dct, kKey ^ 1, k0, buf, 64, k1, buf + 1024);
  dci.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const auto* err = reinterpret_cast<const ErrCqe64*>(dci.poll());
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->syndrome, uint8_t(CqeSyndrome::kTransportRetryExcErr));
  ASSERT_EQ(rig.nic(1).events().size(), 1u);
  EXPECT_EQ(rig.nic(1).events()[0].kind, AsyncEvent::kDctKeyViolation);
  EXPECT_EQ(rig.nic(1).events()[0].object, dct);
  EXPECT_EQ(rig.nic(1).qp(dct)->state, QpState::kRtr) << "a DCT serves every DCI: a bad key does not fail it";
  for (int i = 0; i < 64; ++i) ASSERT_EQ(reinterpret_cast<uint8_t*>(buf)[1024 + i], 0x5a) << "a dropped WRITE landed a byte";
}

// The address vector is part of the WQE's shape on a DCI: a WRITE too short to hold one is a
// bad DS; an RC-shaped WQE has its raddr read as the AV (a target nobody answers), as is an
// unknown DCT number (retry exceeded); a NOP carries none.
TEST(Dc, DciWqesAreCheckedWithTheirAddressVector) {
  Rig rig(1);
  const uint32_t dct = rig.make_dct(0, kKey);
  const uint64_t buf = rig.alloc(4096);
  const uint32_t k = rig.reg(buf, 4096, kAll, 0);
  {
    SendQueue dci = rig.make_dci(0);
    dci.nop();
    SendQueue::Wqe bare = dci.begin(WqeOpcode::kRdmaWrite, kCtrlCqUpdate);  // ds 1: the control segment alone
    const uint64_t w = dci.finish(bare);
    dci.ring_doorbell();
    ASSERT_TRUE(rig.run());
    ASSERT_NE(dci.poll(), nullptr);  // the NOP
    const auto* err = reinterpret_cast<const ErrCqe64*>(dci.poll());
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(err->syndrome, uint8_t(CqeSyndrome::kLocalQpOpErr));
    EXPECT_EQ(err->wqe_counter.get(), uint16_t(w));
  }
  for (const bool rc_shaped : {true, false}) {
    SendQueue dci = rig.make_dci(0);
    if (rc_shaped) dci.rdma(WqeOpcode::kRdmaWrite, k, buf, 8, k, buf + 8);
    else dci.dc_rdma(WqeOpcode::kRdmaWrite, rig.nic(0).lid(), dct + 7, kKey, k, buf, 8, k, buf + 8);
    dci.ring_doorbell();
    ASSERT_TRUE(rig.run());
    const auto* err = reinterpret_cast<const ErrCqe64*>(dci.poll());
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(err->syndrome, uint8_t(CqeSyndrome::kTransportRetryExcErr)) << (rc_shaped ? "RC-shaped" : "no such DCT") << ": nobody answers";
  }
}

}  // namespace
}  // namespace doorbell::testing
