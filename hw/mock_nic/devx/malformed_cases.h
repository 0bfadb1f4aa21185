// Every malformed-WQE class the NIC model detects, as a case that posts exactly one bad WQE
// (and the syndrome and vendor code it must get): one table for the CPU model's test
// (tests/mock_nic/errors_test.cc) and the GPU-resident engine's check (gpu/engine_check.cu).
#pragma once

#include <functional>
#include <vector>

#include "hw/mock_nic/devx/rig.h"

namespace doorbell::testing {

using namespace doorbell::mlx5;
using namespace mock_nic;
using mock_nic::driver::Rig;
using mock_nic::driver::SendQueue;
constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

struct Env {
  Rig rig;
  SendQueue a, b;
  uint64_t buf = 0;                  // 64 KiB canary-filled; only [16K, 32K) is registered
  uint32_t key = 0, ro_key = 0, other_pd_key = 0, no_lw_key = 0;
  uint64_t reg_lo = 0, reg_hi = 0;
  std::vector<std::byte> before;

  Env() {
    a = rig.make_sq();
    b = rig.make_sq();
    rig.connect(a, b);
    buf = rig.alloc(1 << 16, 0xc5);
    reg_lo = buf + 16384, reg_hi = buf + 32768;
    key = rig.reg(reg_lo, 8192, kAll);
    ro_key = rig.reg(reg_lo + 8192, 4096, kLocalWrite | kRemoteRead);  // no remote write/atomic
    no_lw_key = rig.reg(reg_lo + 12288, 4096, kRemoteWrite);           // no local write
    other_pd_key = rig.reg(reg_lo, 4096, kAll, 0, *rig.devx().alloc_pd());
    snapshot();
  }
  void snapshot() {
    auto* p = rig.mem.translate(buf, 1 << 16);
    before.assign(p, p + (1 << 16));
  }
  // Bytes changed anywhere in the buffer since the snapshot.
  size_t changed() const {
    auto* p = rig.mem.translate(buf, 1 << 16);
    size_t n = 0;
    for (size_t i = 0; i < before.size(); ++i) n += p[i] != before[i];
    return n;
  }
};

struct Case {
  const char* name;
  CqeSyndrome syndrome;
  uint8_t vendor;
  std::function<void(Env&)> post;  // posts exactly one bad WQE on e.a
};

inline uint64_t atomic_on(Env& e, uint64_t raddr, uint32_t rkey, uint32_t lkey = 0) {
  return e.a.atomic(WqeOpcode::kAtomicFa, 1, 0, lkey ? lkey : e.key, e.reg_lo + 64, rkey, raddr);
}

inline const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"bad_opcode", CqeSyndrome::kLocalQpOpErr, vendor::kBadOpcode,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode(0x07), kCtrlCqUpdate);
         e.a.finish(w);
       }},
      {"ds_zero", CqeSyndrome::kLocalQpOpErr, vendor::kBadDs,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kNop, kCtrlCqUpdate);
         w.ctrl()->qpn_ds.set(e.a.qpn << 8);  // DS = 0
         e.a.post_raw(w.b, 1);
       }},
      {"ds_too_small_for_atomic", CqeSyndrome::kLocalQpOpErr, vendor::kBadDs,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kAtomicFa, kCtrlCqUpdate);
         set_raddr_seg(w.seg<WqeRaddrSeg>(1), e.reg_lo, e.key);
         w.ds = 2;
         e.a.finish(w);
       }},
      {"qpn_mismatch", CqeSyndrome::kLocalQpOpErr, vendor::kQpnMismatch,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kNop, kCtrlCqUpdate);
         w.ctrl()->qpn_ds.set(((e.a.qpn + 1) << 8) | 1);
         e.a.post_raw(w.b, 1);
       }},
      {"wqe_index_mismatch", CqeSyndrome::kLocalQpOpErr, vendor::kWqeIndexMismatch,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kNop, kCtrlCqUpdate);
         set_ctrl_seg(w.ctrl(), uint16_t(e.a.pi + 5), WqeOpcode::kNop, 0, e.a.qpn, kCtrlCqUpdate, 1);
         e.a.post_raw(w.b, 1);
       }},
      {"lkey_out_of_table", CqeSyndrome::kLocalProtErr, vendor::kLocalKeyBase + 1,
       [](Env& e) { e.a.write(0x00ffff01, e.reg_lo, 8, e.key, e.reg_lo + 8); }},
      {"lkey_stale_variant", CqeSyndrome::kLocalProtErr, vendor::kLocalKeyBase + 1,
       [](Env& e) { e.a.write(e.key ^ 0x80, e.reg_lo, 8, e.key, e.reg_lo + 8); }},
      {"lkey_other_pd", CqeSyndrome::kLocalProtErr, vendor::kLocalKeyBase + 2,
       [](Env& e) { e.a.write(e.other_pd_key, e.reg_lo, 8, e.key, e.reg_lo + 8); }},
      {"lkey_range_past_end", CqeSyndrome::kLocalProtErr, vendor::kLocalKeyBase + 4,
       [](Env& e) { e.a.write(e.key, e.reg_lo + 8190, 8, e.key, e.reg_lo + 8); }},
      {"read_into_mr_without_local_write", CqeSyndrome::kLocalProtErr, vendor::kLocalKeyBase + 3,
       [](Env& e) { e.a.read(e.no_lw_key, e.reg_lo + 12288, 8, e.key, e.reg_lo); }},
      {"rkey_out_of_table", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 1,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 8, 0x00abcd01, e.reg_lo + 8); }},
      {"rkey_other_pd", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 2,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 8, e.other_pd_key, e.reg_lo + 8); }},
      {"write_without_remote_write", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 3,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 8, e.ro_key, e.reg_lo + 8192); }},
      {"read_without_remote_read", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 3,
       [](Env& e) { e.a.read(e.key, e.reg_lo, 8, e.no_lw_key, e.reg_lo + 12288); }},
      {"atomic_without_remote_atomic", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 3,
       [](Env& e) { atomic_on(e, e.reg_lo + 8192, e.ro_key); }},
      {"rkey_range_one_byte_past_end", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 4,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 16, e.key, e.reg_lo + 8192 - 15); }},
      {"rkey_range_before_start", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 4,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 16, e.key, e.reg_lo - 8); }},
      {"rkey_range_huge_wraps_address", CqeSyndrome::kRemoteAccessErr, vendor::kRemoteKeyBase + 4,
       [](Env& e) { e.a.write(e.key, e.reg_lo, 16, e.key, ~uint64_t{0} - 7); }},
      {"atomic_misaligned", CqeSyndrome::kRemoteInvalReqErr, vendor::kAtomicMisaligned,
       [](Env& e) { atomic_on(e, e.reg_lo + 4, e.key); }},
      {"atomic_local_length_not_8", CqeSyndrome::kLocalLengthErr, vendor::kAtomicBadLength,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kAtomicFa, kCtrlCqUpdate);
         set_raddr_seg(w.seg<WqeRaddrSeg>(1), e.reg_lo, e.key);
         set_atomic_seg(w.seg<WqeAtomicSeg>(2), 1, 0);
         set_data_seg(w.seg<WqeDataSeg>(3), 16, e.key, e.reg_lo + 64);
         w.ds = 4;
         e.a.finish(w);
       }},
      {"masked_atomic_bad_opmod", CqeSyndrome::kLocalQpOpErr, vendor::kBadSegment,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kAtomicMaskedFa, kCtrlCqUpdate, 0x0c);
         set_raddr_seg(w.seg<WqeRaddrSeg>(1), e.reg_lo, e.key);
         set_data_seg(w.seg<WqeDataSeg>(3), 8, e.key, e.reg_lo + 64);
         w.ds = 4;
         e.a.finish(w);
       }},
      {"inline_longer_than_wqe", CqeSyndrome::kLocalLengthErr, vendor::kBadSegment,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kRdmaWrite, kCtrlCqUpdate);
         set_raddr_seg(w.seg<WqeRaddrSeg>(1), e.reg_lo, e.key);
         w.seg<WqeInlineSeg>(2)->byte_count.set(200 | kInlineSegFlag);  // claims 200, has 12
         w.ds = 3;
         e.a.finish(w);
       }},
      {"inline_segment_in_read", CqeSyndrome::kLocalQpOpErr, vendor::kBadSegment,
       [](Env& e) {
         SendQueue::Wqe w = e.a.begin(WqeOpcode::kRdmaRead, kCtrlCqUpdate);
         set_raddr_seg(w.seg<WqeRaddrSeg>(1), e.reg_lo, e.key);
         w.seg<WqeInlineSeg>(2)->byte_count.set(8 | kInlineSegFlag);
         w.ds = 3;
         e.a.finish(w);
       }},
  };
  return c;
}

}  // namespace doorbell::testing
