// Target 4: the NIC model's DEVX command interpreter fed arbitrary PRM command buffers. Each
// command starts from one the real driver builds (CREATE_CQ / CREATE_QP with umems, UARs and
// CQs that exist or not, each QP transition, QUERY / DESTROY of QPs and CQs) or from raw
// bytes; the input then overwrites bytes anywhere, may cut the command short and picks the
// reply length. Buffers are exactly as long as claimed, so a read past either is a sanitizer
// report. Checked: every rejection carries a non-zero status and a syndrome the model can name
// in its reply, and every success a zero status.
#include <fuzzer/FuzzedDataProvider.h>

#include <vector>

#include "fuzz/check.h"
#include "hw/mlx5_devx/driver.h"
#include "hw/mock_nic/devx/model_devx.h"

using namespace doorbell;
using namespace doorbell::prm;
using devx::Driver;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  mem::AddressSpace mem;
  mock_nic::Nic nic(mem);
  mock_nic::ModelDevx dx(nic);
  const uint32_t pdn = *dx.alloc_pd();
  const devx::Uar uar = *dx.alloc_uar();
  void* qmem = *dx.alloc(1 << 16, true);
  const devx::Umem umem = *dx.umem_reg(qmem, 1 << 16, 0);
  std::vector<devx::Obj> cqs{{0, 0}}, qps{{0, 0}};
  // Builders take in-range field values (they check); bytes beyond that come from mutation.
  auto u24 = [&] { return in.ConsumeIntegral<uint32_t>() & 0xffffff; };
  auto umem_id = [&] { return in.ConsumeBool() ? umem.id : in.ConsumeIntegral<uint32_t>(); };
  auto pick = [&](const std::vector<devx::Obj>& v) {
    return in.ConsumeIntegralInRange<uint8_t>(0, 15) == 0 ? devx::Obj{u24(), 0}
                                                           : v[in.ConsumeIntegralInRange<size_t>(0, v.size() - 1)];
  };
  int steps = 0;
  while (in.remaining_bytes() > 0 && ++steps < 64) {
    const int kind = in.ConsumeIntegralInRange<int>(0, 8);
    std::vector<uint8_t> cmd;
    devx::Obj target{};
    switch (kind) {
      case 0: {
        devx::CqSpec s{in.ConsumeIntegralInRange<uint32_t>(0, 24), in.ConsumeBool(), umem_id(),
                       in.ConsumeIntegralInRange<uint64_t>(0, 1 << 17), umem_id(), in.ConsumeIntegralInRange<uint64_t>(0, 1 << 17),
                       in.ConsumeBool() ? uar.page_id : u24(), 0, in.ConsumeBool()};
        auto b = Driver::build_create_cq(s);
        cmd.assign(b.begin(), b.end());
        break;
      }
      case 1: {
        devx::RcQpSpec s{in.ConsumeBool() ? pdn : u24(), in.ConsumeIntegralInRange<uint32_t>(0, 15),
                         umem_id(), in.ConsumeIntegralInRange<uint64_t>(0, 1 << 17), umem_id(),
                         in.ConsumeIntegralInRange<uint64_t>(0, 1 << 17), pick(cqs).id, 0, 0,
                         in.ConsumeBool() ? uar.page_id : u24()};
        auto b = Driver::build_create_rc_qp(s);
        cmd.assign(b.begin(), b.end());
        break;
      }
      case 2: case 3: case 4: {
        target = pick(qps);
        devx::RtrSpec rtr;
        rtr.remote_qpn = in.ConsumeIntegral<uint32_t>() & 0xffffff;
        rtr.dlid = in.ConsumeIntegral<uint16_t>();
        rtr.mtu = in.ConsumeIntegralInRange<uint8_t>(0, 7);
        auto b = kind == 2 ? Driver::build_rst2init(target.id, {}) : kind == 3 ? Driver::build_init2rtr(target.id, rtr)
                                                                                : Driver::build_rtr2rts(target.id, {});
        cmd.assign(b.begin(), b.end());
        break;
      }
      case 5: case 6: {
        target = pick(qps);
        static constexpr uint16_t kQpOps[] = {kQueryQp, kQp2Err, kQp2Rst, kDestroyQp, kRts2RtsQp};
        auto b = Driver::build_qp_cmd(kQpOps[in.ConsumeIntegralInRange<size_t>(0, 4)], target.id);
        cmd.assign(b.begin(), b.end());
        break;
      }
      case 7: {
        target = pick(cqs);
        auto b = Driver::build_cq_cmd(in.ConsumeBool() ? kQueryCq : kDestroyCq, target.id);
        cmd.assign(b.begin(), b.end());
        break;
      }
      case 8: cmd = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 600)); break;
    }
    for (int m = in.ConsumeIntegralInRange<int>(0, 4); m > 0 && !cmd.empty(); --m)
      cmd[in.ConsumeIntegralInRange<size_t>(0, cmd.size() - 1)] = in.ConsumeIntegral<uint8_t>();
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) cmd.resize(in.ConsumeIntegralInRange<size_t>(0, cmd.size()));
    cmd.shrink_to_fit();  // exactly as long as claimed
    std::vector<uint8_t> out(in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegralInRange<size_t>(0, 512) : 512);
    out.shrink_to_fit();
    const uint16_t op = cmd.size() >= 2 ? uint16_t(cmd[0] << 8 | cmd[1]) : 0;
    Status st;
    const bool destroy = op == kDestroyQp || op == kDestroyCq;
    if (kind <= 1 || kind == 8) {
      auto r = dx.obj_create(cmd.data(), cmd.size(), out.data(), out.size());
      if (r.is_ok()) (op == kCreateCq ? cqs : qps).push_back(*r);
      st = r.status();
    } else if (op == kQueryQp || op == kQueryCq) {
      st = dx.obj_query(target, cmd.data(), cmd.size(), out.data(), out.size());
    } else if (destroy) {
      st = dx.obj_destroy(target, cmd.data(), cmd.size());
      if (st.is_ok()) {
        auto& v = op == kDestroyQp ? qps : cqs;
        for (size_t i = 1; i < v.size(); ++i)
          if (v[i].id == target.id) v.erase(v.begin() + long(i)), i = v.size();
      }
      continue;  // destroy has no reply buffer to check
    } else {
      st = dx.obj_modify(target, cmd.data(), cmd.size(), out.data(), out.size());
    }
    if (out.size() < sizeof(mbox_out) / 8) {
      FUZZ_CHECK(!st.is_ok(), "a reply shorter than a mailbox was accepted");
      continue;
    }
    const uint32_t status = uint32_t(DB_GET(mbox_out, out.data(), status)), syndrome = uint32_t(DB_GET(mbox_out, out.data(), syndrome));
    if (st.is_ok()) {
      FUZZ_CHECK(status == 0, "success with reply status 0x%x", status);
    } else {
      FUZZ_CHECK(status != 0, "rejected (%s) with reply status 0", st.to_string().c_str());
      FUZZ_CHECK(dx.syndrome_text(syndrome) != nullptr, "rejected with unnamed syndrome 0x%x", syndrome);
    }
  }
  return 0;
}
