#include "tools/demo.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "hw/mock_nic/driver.h"

namespace doorbell::tools {

using namespace mock_nic::driver;
using mlx5::kCtrlCqUpdate;

int run_demo(const DemoOptions& o) {
  if (o.batch == 0 || o.size == 0 || o.log_sq < 6 || o.log_sq > 15 || o.batch > (1u << o.log_sq)) {
    std::fprintf(stderr, "doorbell demo: need size > 0 and 0 < batch <= 2^log_sq, 6 <= log_sq <= 15\n");
    return 2;
  }
  Rig rig(o.cross_nic ? 2 : 1);
  SendQueue a = rig.make_sq(0, o.log_sq, 0, true);
  SendQueue b = rig.make_sq(o.cross_nic ? 1 : 0, 6, 0, true);
  rig.connect(a, b);
  const uint64_t span = 1 << 20;
  const uint64_t src = rig.alloc(span), dst = rig.alloc(span);
  for (uint64_t i = 0; i < span; ++i) rig.mem.translate(src, span)[i] = std::byte(i * 131 + 7);
  const uint32_t all = mock_nic::kLocalWrite | mock_nic::kRemoteWrite | mock_nic::kRemoteRead;
  const uint32_t sk = rig.reg(src, span, all), dk = rig.reg(dst, span, all, o.cross_nic ? 1 : 0);
  const uint64_t slots = span / o.size;

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t posted = 0, doorbells = 0, last_signaled = 0;
  while (posted < o.wqes) {
    uint32_t n = uint32_t(std::min<uint64_t>(o.batch, o.wqes - posted));
    for (uint32_t i = 0; i < n; ++i, ++posted) {
      const uint64_t off = (posted % slots) * o.size;
      const uint64_t idx = a.write(sk, src + off, o.size, dk, dst + off, i + 1 == n ? kCtrlCqUpdate : 0);
      if (i + 1 == n) last_signaled = idx;
    }
    a.ring_doorbell();
    ++doorbells;
    rig.fabric.run_until_idle();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto* cqe = rig.mem.as<mlx5::Cqe64>(a.cq_va);
  const bool counter_ok = cqe->wqe_counter.get() == uint16_t(last_signaled) && cqe->opcode() == 0;
  const uint64_t checked = std::min<uint64_t>(o.wqes, slots) * o.size;
  const bool data_ok = std::memcmp(rig.mem.translate(src, checked), rig.mem.translate(dst, checked), checked) == 0;
  const mock_nic::Qp* qp = rig.nic().qp(a.qpn);

  std::printf("doorbell demo — software mlx5 NIC, %s QP pair, collapsed CQ\n", o.cross_nic ? "two-NIC" : "loopback");
  std::printf("  %-28s %llu x %u B RDMA WRITE\n", "WQEs executed", (unsigned long long)qp->stats.wqes, o.size);
  std::printf("  %-28s %llu (batch %u)\n", "doorbells rung", (unsigned long long)doorbells, o.batch);
  std::printf("  %-28s %llu\n", "CQEs written", (unsigned long long)rig.nic().cq(a.cqn)->cqes_written);
  std::printf("  %-28s %u (expected %u)\n", "last CQE wqe_counter", cqe->wqe_counter.get(), uint16_t(last_signaled));
  std::printf("  %-28s %.3f s wall, %.2f M WQE/s (driver + model)\n", "time", secs, double(qp->stats.wqes) / secs / 1e6);
  std::printf("  %-28s %s\n", "data check", data_ok ? "ok" : "MISMATCH");
  std::printf("  %-28s %s\n", "completion check", counter_ok ? "ok" : "WRONG");
  return data_ok && counter_ok && qp->stats.wqes == o.wqes ? 0 : 1;
}

}  // namespace doorbell::tools
