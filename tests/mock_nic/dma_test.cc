// The engine reaches registered device memory only through its Dma (dma.h). Here "device
// memory" is a memfd mapped twice: the view the NICs are given is PROT_NONE, so a load or
// store of it by the engine itself is a crash; the Dma's own view is read-write. WRITEs
// (gathered from several pieces, inline too), READs and atomics between two NICs then move
// the right bytes, every one of them through the Dma.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "tests/mock_nic/rig.h"

namespace doorbell::testing {
namespace {

constexpr uint32_t kAll = mock_nic::kLocalWrite | mock_nic::kRemoteWrite | mock_nic::kRemoteRead | mock_nic::kRemoteAtomic;
constexpr size_t kBytes = 1 << 16;

// Device memory the engine may not touch, and the backend that may.
class AliasDma : public mock_nic::Dma {
 public:
  AliasDma() {
    const int fd = memfd_create("doorbell-dma-test", 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, kBytes), 0);
    device_ = static_cast<std::byte*>(mmap(nullptr, kBytes, PROT_NONE, MAP_SHARED, fd, 0));
    alias_ = static_cast<std::byte*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
  }
  ~AliasDma() override { munmap(device_, kBytes), munmap(alias_, kBytes); }
  std::byte* device() const { return device_; }
  std::byte* backing(size_t off) const { return alias_ + off; }  // the test's own view

  void copy(std::byte* dst, const std::byte* src, size_t len) override {
    ++copies, bytes += len;
    std::memmove(tr(dst), tr(src), len);
  }
  uint64_t fetch_add64(std::byte* t, uint64_t v) override {
    ++atomics;
    return __atomic_fetch_add(reinterpret_cast<uint64_t*>(tr(t)), v, __ATOMIC_ACQ_REL);
  }
  uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) override {
    ++atomics;
    __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(tr(t)), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
  }
  uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) override {
    ++atomics;
    __atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(tr(t)), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
  }
  const char* name() const override { return "alias"; }
  uint64_t copies = 0, bytes = 0, atomics = 0;

 protected:
  std::byte* tr(const std::byte* p) const {  // device addresses to the backend's view
    if (p >= device_ && p < device_ + kBytes) return alias_ + (p - device_);
    return const_cast<std::byte*>(p);
  }

 private:
  std::byte* device_ = nullptr;
  std::byte* alias_ = nullptr;
};

// Both NICs of `rig` behind `dma`, its device memory registered on each: dev, key0, key1.
struct Device {
  uint64_t dev;
  uint32_t key0, key1;
};
Device attach(Rig& rig, AliasDma& dma) {
  for (int i = 0; i < 2; ++i) rig.nic(i).set_dma(&dma);
  EXPECT_TRUE(rig.mem.map_external(dma.device(), kBytes, mem::MemKind::kGpu, "device").is_ok());
  const uint64_t dev = reinterpret_cast<uint64_t>(dma.device());
  return {dev, rig.reg(dev, kBytes, kAll, 0), rig.reg(dev, kBytes, kAll, 1)};
}

// The CQEs `sq` has, every one good (-1 at the first error CQE).
int good_cqes(SendQueue& sq) {
  int n = 0;
  while (const Cqe64* c = sq.poll()) {
    if (c->opcode() != uint8_t(CqeOpcode::kReq)) return -1;
    ++n;
  }
  return n;
}

TEST(Dma, DeviceMemoryIsMovedOnlyThroughTheDma) {
  AliasDma dma;
  Rig rig(2);
  const auto [dev, dkey0, dkey1] = attach(rig, dma);
  const uint64_t host = rig.alloc(4096);  // host memory on NIC 0: READ results land here
  const uint32_t hkey = rig.reg(host, 4096, kAll, 0);
  for (size_t i = 0; i < 4096; ++i) *dma.backing(i) = std::byte(i * 5 + 1);
  SendQueue a = rig.make_sq(0), b = rig.make_sq(1);
  rig.connect(a, b);

  // Device -> device (WRITE, and a 2-piece gather), inline -> device, device -> host (READ),
  // atomics on a device word with results landing in device memory.
  a.write(dkey0, dev, 1024, dkey1, dev + 8192);
  a.write(dkey0, dev + 100, 8, dkey1, dev + 12288);
  const char msg[] = "inline to device";
  a.write_inline(msg, sizeof msg, dkey1, dev + 16384);
  a.read(hkey, host, 512, dkey1, dev + 64);
  a.atomic(mlx5::WqeOpcode::kAtomicFa, 5, 0, dkey0, dev + 20480, dkey1, dev + 24576);
  a.atomic(mlx5::WqeOpcode::kAtomicFa, 7, 0, dkey0, dev + 20488, dkey1, dev + 24576);
  a.atomic(mlx5::WqeOpcode::kAtomicCs, 99, 12, dkey0, dev + 20496, dkey1, dev + 24576);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  ASSERT_EQ(good_cqes(a), 7);
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(*dma.backing(8192 + i), std::byte(i * 5 + 1)) << i;
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(*dma.backing(12288 + i), std::byte((100 + i) * 5 + 1)) << i;
  EXPECT_EQ(std::memcmp(dma.backing(16384), msg, sizeof msg), 0);
  for (size_t i = 0; i < 512; ++i) ASSERT_EQ(rig.mem.translate(host, 512)[i], std::byte((64 + i) * 5 + 1)) << i;
  uint64_t word, old[3];
  std::memcpy(&word, dma.backing(24576), 8);
  std::memcpy(old, dma.backing(20480), 24);
  EXPECT_EQ(word, 99u);  // 0 + 5 + 7, then swapped 12 -> 99
  EXPECT_EQ(old[0], 0u);
  EXPECT_EQ(old[1], 5u);
  EXPECT_EQ(old[2], 12u);
  EXPECT_EQ(dma.atomics, 3u);
  EXPECT_GE(dma.copies, 7u);  // each WRITE, the READ's response and landing, each atomic's result
}

// A Dma whose posted writes land only when something orders them: a later copy or atomic
// (they share its stream) or flush().
class DeferringDma : public AliasDma {
 public:
  void post(std::byte* dst, const std::byte* src, size_t len) override {
    ++posted;
    waiting.push_back({dst, std::vector<std::byte>(tr(src), tr(src) + len)});  // the source may be reused at once
  }
  void flush() override {
    for (auto& [dst, bytes] : waiting) AliasDma::copy(dst, bytes.data(), bytes.size());
    waiting.clear();
  }
  void copy(std::byte* dst, const std::byte* src, size_t len) override { flush(), AliasDma::copy(dst, src, len); }
  uint64_t fetch_add64(std::byte* t, uint64_t v) override { return flush(), AliasDma::fetch_add64(t, v); }
  uint64_t posted = 0;
  std::vector<std::pair<std::byte*, std::vector<std::byte>>> waiting;
};

// A WRITE's bytes are posted, not waited for; the CQE behind them must not come first (the
// engine flushes before it writes a CQE), or a client polling it would read stale data.
TEST(Dma, PostedWritesLandBeforeTheCqeBehindThem) {
  DeferringDma dma;
  Rig rig(2);
  const auto [dev, dkey0, dkey1] = attach(rig, dma);
  for (size_t i = 0; i < 64; ++i) *dma.backing(i) = std::byte(i + 1);
  SendQueue a = rig.make_sq(0), b = rig.make_sq(1);
  rig.connect(a, b);
  const char msg[] = "posted";
  a.write_inline(msg, sizeof msg, dkey1, dev + 4096);
  a.write(dkey0, dev, 64, dkey1, dev + 8192);
  a.ring_doorbell();
  ASSERT_TRUE(rig.run());
  ASSERT_EQ(good_cqes(a), 2);
  EXPECT_EQ(dma.posted, 2u);  // both WRITEs' bytes were posted
  EXPECT_TRUE(dma.waiting.empty()) << dma.waiting.size() << " posted write(s) still on their way after the CQE";
  EXPECT_EQ(std::memcmp(dma.backing(4096), msg, sizeof msg), 0);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(*dma.backing(8192 + i), std::byte(i + 1)) << i;
}

}  // namespace
}  // namespace doorbell::testing
