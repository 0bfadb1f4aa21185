#include "tools/demo.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mlx5_devx/driver.h"
#include "hw/mlx5_devx/queue_set.h"
#include "hw/mock_nic/devx/model_devx.h"
#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/nic.h"

namespace doorbell::tools {
namespace {

// One NIC as a host sees it: the model behind the DEVX seam, a PD, a UAR and one RC QP with
// its collapsed send CQ (devx::QueueSet, as the IBGDA set-up makes them).
struct Device {
  std::unique_ptr<mock_nic::Nic> nic;
  std::unique_ptr<mock_nic::ModelDevx> devx;
  uint32_t pdn = 0;
  devx::Uar uar;
  std::unique_ptr<devx::QueueSet> qs;
};

// The set-up either works or the demo stops, saying what failed.
struct SetupError {
  std::string what;
};
void must(const Status& st, const char* what) {
  if (!st) throw SetupError{std::string(what) + ": " + st.to_string()};
}
template <class T>
T must(Result<T> r, const char* what) {
  must(r.status(), what);
  return std::move(r).value();
}

Device make_device(mem::AddressSpace& mem, mock_nic::Fabric& fabric, uint16_t lid, uint32_t log_sq) {
  Device d;
  mock_nic::NicConfig nc;
  nc.lid = lid;
  d.nic = std::make_unique<mock_nic::Nic>(mem, nc);
  must(fabric.attach(*d.nic), "attaching the NIC");
  d.devx = std::make_unique<mock_nic::ModelDevx>(*d.nic, "demo_nic" + std::to_string(lid));
  d.pdn = must(d.devx->alloc_pd(), "ALLOC_PD");
  d.uar = must(d.devx->alloc_uar(), "alloc_uar");
  devx::QueueSetSpec s;
  s.num_qps = 1, s.log_sq_size = log_sq, s.pdn = d.pdn, s.uar_page = d.uar.page_id;
  d.qs = must(devx::QueueSet::create(*d.devx, *d.devx, s), "the queue set");
  return d;
}

// RST -> RTS, connected to `peer`'s QP.
void connect(Device& d, const Device& peer) {
  devx::Driver drv(*d.devx);
  devx::RtrSpec r;
  r.remote_qpn = peer.qs->qp(0).id;
  r.dlid = peer.nic->lid();
  must(drv.rst2init(d.qs->qp(0), {}), "RST2INIT");
  must(drv.init2rtr(d.qs->qp(0), r), "INIT2RTR");
  must(drv.rtr2rts(d.qs->qp(0), {}), "RTR2RTS");
}

}  // namespace

int run_demo(const DemoOptions& o) {
  if (o.batch == 0 || o.size == 0 || o.log_sq < 6 || o.log_sq > 15 || o.batch > (1u << o.log_sq)) {
    std::fprintf(stderr, "doorbell demo: need size > 0 and 0 < batch <= 2^log_sq, 6 <= log_sq <= 15\n");
    return 2;
  }
  mem::AddressSpace mem;
  mock_nic::Fabric fabric;
  std::vector<Device> devs;
  const uint64_t span = 1 << 20;
  std::byte *src = nullptr, *dst = nullptr;
  uint32_t sk = 0, dk = 0;
  try {  // the host's set-up, through DEVX only
    devs.push_back(make_device(mem, fabric, 1, o.log_sq));
    if (o.cross_nic) devs.push_back(make_device(mem, fabric, 2, 6));
    Device& a = devs.front();
    Device& b = devs.back();
    if (&a == &b) {  // loopback: the QP is its own peer
      connect(a, a);
    } else {
      connect(a, b);
      connect(b, a);
    }
    const uint32_t all = mock_nic::kLocalWrite | mock_nic::kRemoteWrite | mock_nic::kRemoteRead;
    src = static_cast<std::byte*>(must(a.devx->alloc(span, true), "source buffer"));
    dst = static_cast<std::byte*>(must(b.devx->alloc(span, true), "destination buffer"));
    sk = must(a.devx->reg_mr(a.pdn, src, span, all), "registering the source").lkey;
    dk = must(b.devx->reg_mr(b.pdn, dst, span, all), "registering the destination").rkey;
  } catch (const SetupError& e) {
    std::fprintf(stderr, "doorbell demo: %s\n", e.what.c_str());
    return 1;
  }
  for (uint64_t i = 0; i < span; ++i) src[i] = std::byte(i * 131 + 7);
  Device& a = devs.front();
  const uint32_t qpn = a.qs->qp(0).id, depth = 1u << o.log_sq;
  const uint64_t slots = span / o.size;

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t pi = 0, doorbells = 0;
  while (pi < o.wqes) {
    const uint32_t n = uint32_t(std::min<uint64_t>(o.batch, o.wqes - pi));
    for (uint32_t i = 0; i < n; ++i, ++pi) {  // one RDMA WRITE per WQEBB; the batch's last asks for a CQE
      const uint64_t off = (pi % slots) * o.size;
      uint8_t* w = a.qs->wq(0) + (pi & (depth - 1)) * mlx5::kWqebb;
      mlx5::set_ctrl_seg(reinterpret_cast<mlx5::WqeCtrlSeg*>(w), uint16_t(pi), mlx5::WqeOpcode::kRdmaWrite, 0, qpn,
                         i + 1 == n ? mlx5::kCtrlCqUpdate : 0, 3);
      mlx5::set_raddr_seg(reinterpret_cast<mlx5::WqeRaddrSeg*>(w + 16), reinterpret_cast<uint64_t>(dst + off), dk);
      mlx5::set_data_seg(reinterpret_cast<mlx5::WqeDataSeg*>(w + 32), o.size, sk, reinterpret_cast<uint64_t>(src + off));
    }
    // The doorbell record, then the BlueFlame store to the UAR (the NIC finds the QP by its QPN).
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(a.qs->qp_dbr(0))).store(mlx5::dbr_word(pi), std::memory_order_release);
    a.nic->mmio_write64(a.uar.reg_addr, mlx5::doorbell_value(pi, qpn));
    ++doorbells;
    fabric.run_until_idle();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // What a host can see: the collapsed CQE, and the QP's send queue position (QUERY_QP).
  const mlx5::Cqe64& cqe = *a.qs->cq_buf(0);
  const uint16_t last = uint16_t(o.wqes - 1);
  const bool counter_ok = cqe.wqe_counter.get() == last && cqe.opcode() == uint8_t(mlx5::CqeOpcode::kReq);
  Result<devx::QpQuery> q = devx::Driver(*a.devx).query_qp(a.qs->qp(0));
  const bool consumed = q && q->hw_sq_wqebb_counter == uint16_t(pi) && q->state == prm::kQpcRts;
  const uint64_t checked = std::min<uint64_t>(o.wqes, slots) * o.size;
  const bool data_ok = std::memcmp(src, dst, checked) == 0;

  std::printf("doorbell demo — software mlx5 NIC set up through DEVX, %s QP pair, collapsed CQ\n", o.cross_nic ? "two-NIC" : "loopback");
  std::printf("  %-28s %llu x %u B RDMA WRITE\n", "WQEs posted", (unsigned long long)pi, o.size);
  std::printf("  %-28s %llu (batch %u)\n", "doorbells rung", (unsigned long long)doorbells, o.batch);
  std::printf("  %-28s %u (expected %u; QUERY_QP, 16 bits)\n", "NIC send queue position", q ? unsigned(q->hw_sq_wqebb_counter) : 0u,
              unsigned(uint16_t(pi)));
  std::printf("  %-28s %u (expected %u)\n", "last CQE wqe_counter", cqe.wqe_counter.get(), last);
  std::printf("  %-28s %.3f s wall, %.2f M WQE/s (driver + model)\n", "time", secs, double(pi) / secs / 1e6);
  std::printf("  %-28s %s\n", "data check", data_ok ? "ok" : "MISMATCH");
  std::printf("  %-28s %s\n", "completion check", counter_ok && consumed ? "ok" : "WRONG");
  return data_ok && counter_ok && consumed ? 0 : 1;
}

}  // namespace doorbell::tools
