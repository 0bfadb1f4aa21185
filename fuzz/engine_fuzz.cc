// Target 3: the NIC model's engine fed arbitrary send-queue bytes and doorbells. Two NICs,
// a connected RC pair, three registered buffers (one remote-read-only), each inside a larger
// segment whose unregistered margins hold a canary. The input writes WQEs — structured ones
// (any opcode, keys and addresses near or across the buffers' edges, lying DS counts) and raw
// bytes — rings honest and dishonest doorbells and runs the engines. Checked: no crash or
// sanitizer report, no byte outside registered memory changes, every CQE is a request
// completion or an error CQE carrying a known syndrome.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <string>

#include "fuzz/check.h"
#include "hw/mock_nic/devx/rig.h"

using namespace doorbell;
using namespace doorbell::mlx5;
using mock_nic::driver::Rig;
using mock_nic::driver::SendQueue;

namespace {

constexpr uint64_t kGuard = 256, kLen = 1024;
constexpr uint8_t kCanary = 0xa5;

struct Buf {
  uint64_t seg = 0, va = 0;
  uint32_t key = 0;
};

Buf make_buf(Rig& rig, int nic, uint32_t access) {
  Buf b;
  b.seg = rig.alloc(kLen + 2 * kGuard, kCanary);
  b.va = b.seg + kGuard;
  std::memset(rig.mem.translate(b.va, kLen), 0, kLen);
  b.key = rig.reg(b.va, kLen, access, nic);
  return b;
}

bool canaries_intact(Rig& rig, const Buf& b) {
  const std::byte* p = rig.mem.translate(b.seg, kLen + 2 * kGuard);
  for (uint64_t i = 0; i < kGuard; ++i)
    if (p[i] != std::byte{kCanary} || p[kGuard + kLen + i] != std::byte{kCanary}) return false;
  return true;
}

constexpr WqeOpcode kOps[] = {WqeOpcode::kNop,         WqeOpcode::kRdmaWrite,      WqeOpcode::kRdmaWriteImm,
                              WqeOpcode::kSend,        WqeOpcode::kRdmaRead,       WqeOpcode::kAtomicCs,
                              WqeOpcode::kAtomicFa,    WqeOpcode::kAtomicMaskedCs, WqeOpcode::kAtomicMaskedFa,
                              WqeOpcode::kDump,        WqeOpcode::kSendInval};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Rig rig(2);
  SendQueue a = rig.make_sq(0, 4, 4), b = rig.make_sq(1, 4, 4);
  rig.connect(a, b);
  constexpr uint32_t kAll = mock_nic::kLocalWrite | mock_nic::kRemoteWrite | mock_nic::kRemoteRead | mock_nic::kRemoteAtomic;
  const Buf bufs[] = {make_buf(rig, 0, kAll), make_buf(rig, 1, kAll), make_buf(rig, 1, mock_nic::kRemoteRead)};
  auto pick_key = [&]() -> uint32_t {
    const uint8_t k = in.ConsumeIntegral<uint8_t>();
    return k < 240 ? bufs[k % 3].key : in.ConsumeIntegral<uint32_t>();
  };
  auto pick_addr = [&]() -> uint64_t {
    const Buf& bf = bufs[in.ConsumeIntegralInRange<int>(0, 2)];
    return bf.va + in.ConsumeIntegralInRange<int64_t>(-int64_t(kGuard), int64_t(kLen + kGuard));
  };
  int steps = 0;
  while (in.remaining_bytes() > 0 && ++steps < 200) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: {  // a structured WQE
        const uint8_t pick = in.ConsumeIntegral<uint8_t>();
        const WqeOpcode op = pick < 240 ? kOps[pick % std::size(kOps)] : WqeOpcode(in.ConsumeIntegral<uint8_t>());
        SendQueue::Wqe w = a.begin(op, in.ConsumeIntegral<uint8_t>(), in.ConsumeIntegral<uint8_t>(), in.ConsumeIntegral<uint32_t>());
        set_raddr_seg(w.seg<WqeRaddrSeg>(1), pick_addr(), pick_key());
        uint32_t ds = 2;
        if (op == WqeOpcode::kAtomicCs || op == WqeOpcode::kAtomicFa || op == WqeOpcode::kAtomicMaskedCs ||
            op == WqeOpcode::kAtomicMaskedFa) {
          set_atomic_seg(w.seg<WqeAtomicSeg>(2), in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>());
          ds = 3;
        }
        const uint32_t nsge = in.ConsumeIntegralInRange<uint32_t>(0, 4);
        for (uint32_t i = 0; i < nsge && ds < kMaxDs; ++i, ++ds) {
          if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {  // inline data of up to 3 octowords' room
            const uint32_t len = in.ConsumeIntegralInRange<uint32_t>(0, 40);
            const uint32_t segs = set_inline_seg(w.seg<WqeInlineSeg>(ds), len);
            ds += segs - 1;
            break;
          }
          set_data_seg(w.seg<WqeDataSeg>(ds), in.ConsumeIntegralInRange<uint32_t>(0, kLen + kGuard), pick_key(), pick_addr());
        }
        if (in.ConsumeIntegralInRange<int>(0, 15) == 0) ds = in.ConsumeIntegralInRange<uint32_t>(0, kMaxDs);  // lie
        w.ds = ds == 0 ? 1 : ds;
        a.finish(w);
        if (ds == 0) reinterpret_cast<WqeCtrlSeg*>(a.ring() + ((a.pi - 1) % 16) * kWqebb)->qpn_ds.set(a.qpn << 8);
        break;
      }
      case 1: {  // raw bytes as a WQE, the QPN right or not
        SendQueue::Wqe w;
        const uint32_t ds = in.ConsumeIntegralInRange<uint32_t>(1, 8);
        const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(ds * kDsBytes);
        if (!bytes.empty()) std::memcpy(w.b, bytes.data(), bytes.size());
        w.ds = ds;
        if (in.ConsumeBool()) w.ctrl()->qpn_ds.set((a.qpn << 8) | ds);
        a.post_raw(w.b, ds);
        break;
      }
      case 2: a.ring_doorbell(); break;
      case 3:  // a doorbell that lies: any DBR value, any BlueFlame word
        a.dbr()->snd.set(in.ConsumeIntegral<uint16_t>());
        rig.nic(0).uar_write64(a.uar, kBfOffset, in.ConsumeIntegral<uint64_t>());
        break;
      case 4: rig.fabric.progress(); break;
    }
  }
  rig.fabric.run_until_idle(100'000);
  for (const Buf& bf : bufs) FUZZ_CHECK(canaries_intact(rig, bf), "a write landed outside registered memory (key 0x%x)", bf.key);
  for (int i = 0; i < 16; ++i) {
    const Cqe64* c = a.poll();
    if (c == nullptr) break;
    const uint8_t op = c->opcode();
    FUZZ_CHECK(op == uint8_t(CqeOpcode::kReq) || op == uint8_t(CqeOpcode::kReqErr), "CQE opcode %u on a send CQ", op);
    if (op == uint8_t(CqeOpcode::kReqErr)) {
      const uint8_t syn = reinterpret_cast<const ErrCqe64*>(c)->syndrome;
      FUZZ_CHECK(std::string(syndrome_name(CqeSyndrome(syn))) != "UNKNOWN_SYNDROME", "error CQE with unknown syndrome 0x%x", syn);
    }
  }
  return 0;
}
