// Phantom memory: address space without bytes. The pages here are PROT_NONE, so any attempt
// by the model to touch them would crash the test; transfers are recorded instead, key and
// range checks still apply, and an atomic (which needs a value) is refused.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

using namespace mock_nic;

TEST(Phantom, TransfersAreRecordedNotPerformed) {
  Rig rig;
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  rig.connect(a, b);
  const size_t big = size_t(1) << 30;  // 1 GiB of address space, no memory behind it
  void* p = mmap(nullptr, 2 * big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* src = static_cast<std::byte*>(p);
  auto* dst = src + big;
  ASSERT_TRUE(rig.mem.map_external(src, big, mem::MemKind::kGpu, "src", true).is_ok());
  ASSERT_TRUE(rig.mem.map_external(dst, big, mem::MemKind::kGpu, "dst", true).is_ok());
  const uint32_t all = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  const uint32_t sk = rig.reg(reinterpret_cast<uint64_t>(src), big, all), dk = rig.reg(reinterpret_cast<uint64_t>(dst), big, all);
  const auto s = reinterpret_cast<uint64_t>(src), d = reinterpret_cast<uint64_t>(dst);
  a.write(sk, s + 4096, 1u << 30 >> 1, dk, d + 8192);  // 512 MiB in one WQE
  a.read(sk, s, 1 << 20, dk, d);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const auto& log = rig.nic().phantom_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].dst, d + 8192);
  EXPECT_EQ(log[0].src, s + 4096);
  EXPECT_EQ(log[0].len, 1u << 29);
  EXPECT_EQ(log[1].dst, s);
  EXPECT_EQ(log[1].src, d);
  EXPECT_NE(a.poll(), nullptr);
  EXPECT_NE(a.poll(), nullptr);
  // Bounds are still checked: one byte past the region.
  a.write(sk, s, 16, dk, d + big - 8);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  EXPECT_EQ(reinterpret_cast<const ErrCqe64*>(a.poll())->syndrome, uint8_t(CqeSyndrome::kRemoteAccessErr));
  EXPECT_FALSE(rig.mem.write(d, "x", 1));  // and the host API refuses it too
  munmap(p, 2 * big);
}

TEST(Phantom, AtomicsNeedRealBytes) {
  Rig rig;
  SendQueue a = rig.make_sq(), b = rig.make_sq();
  rig.connect(a, b);
  void* p = mmap(nullptr, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_TRUE(rig.mem.map_external(p, 1 << 20, mem::MemKind::kGpu, "ph", true).is_ok());
  const uint64_t real = rig.alloc(64);
  const uint32_t all = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  const uint32_t pk = rig.reg(reinterpret_cast<uint64_t>(p), 1 << 20, all), rk = rig.reg(real, 64, all);
  a.atomic(WqeOpcode::kAtomicFa, 1, 0, rk, real, pk, reinterpret_cast<uint64_t>(p));
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  const auto* e = reinterpret_cast<const ErrCqe64*>(a.poll());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->syndrome, uint8_t(CqeSyndrome::kRemoteOpErr));
  EXPECT_EQ(e->vendor_err_synd, vendor::kPhantomAtomic);
  munmap(p, 1 << 20);
}

}  // namespace
}  // namespace doorbell::testing
