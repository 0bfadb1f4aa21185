// A GPU-resident software NIC for the Hopper checks: one warp per PE watches its QPs'
// BlueFlame doorbell words (WQ, DBR, doorbell and CQ all in GPU memory); a doorbell wakes a
// QP, which then consumes WQEs in order up to its DBR, as a ConnectX does (a doorbell that is
// lost leaves posted WQEs unexecuted until the next one: `lost_doorbells` plants that).
// It executes RDMA WRITE
// (data or inline), READ, ATOMIC_FA / ATOMIC_CS and DUMP, and writes collapsed CQEs (slot 0)
// for CQ_UPDATE WQEs, the CQE's last 8 bytes in one store after the data. Its checks are the
// NIC model's own (hw/mock_nic/wqe_check.h for the WQE's structure, mr_resolve.h for keys,
// rights and ranges), so a malformed WQE gets the same syndrome and vendor code; what needs
// the responder's QP (its access flags, atomic mode) is not modelled here, nor are masked
// atomics. It is the device twin of hw/mock_nic's engine, reduced to what IBGDA posts. For the failover
// check it also takes commands per QP (to ERR; reset to a fresh RTS — what DEVX's 2ERR and
// RST2INIT..RTR2RTS do on a ConnectX), flushes a QP in ERR, records how far each QP's
// requests executed (the responder's next_rcv_psn), and can fail a QP by itself after a
// given number of WQEs (an injected error).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/ibgda/state.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/mr_resolve.h"
#include "hw/mock_nic/wqe_check.h"

namespace doorbell::gpu_nic {

struct Region {
  uint64_t base, len;
  uint32_t key;
};

inline constexpr uint32_t kPd = 1;  // every region and QP of the checks is in one PD

// Keys as the NIC model makes them: the region's table index above a variant byte.
constexpr uint32_t key_of(uint32_t index) { return (index << 8) | 0x5a; }

// The engine's key table (indexed by key >> 8, as the NIC model's) for these regions, all
// access rights granted. Their keys must come from key_of(), each index once.
inline std::vector<mock_nic::MemoryRegion> region_table(const std::vector<Region>& regions) {
  std::vector<mock_nic::MemoryRegion> t;
  for (const Region& r : regions) {
    if (t.size() <= (r.key >> 8)) t.resize((r.key >> 8) + 1);
    if (t[r.key >> 8].valid) {
      std::fprintf(stderr, "gpu_nic: two regions share key index %u\n", r.key >> 8);
      std::exit(2);
    }
    t[r.key >> 8] = {r.base, r.len, reinterpret_cast<std::byte*>(r.base), kPd, ~0u, r.key, true, false};
  }
  return t;
}

struct Engine {
  ibgda::DevQp* qps = nullptr;   // this PE's QPs (device memory)
  uint32_t nqps = 0;
  uint64_t* heads = nullptr;     // per QP: next WQE to execute
  uint32_t* dead = nullptr;      // per QP: in error
  const mock_nic::MemoryRegion* mrs = nullptr;  // region_table()
  uint32_t nmrs = 0;
  unsigned long long* executed = nullptr;
  unsigned long long* errors = nullptr;
  uint64_t* rung = nullptr;      // per QP: the last doorbell word seen at its BlueFlame register
  uint32_t* awake = nullptr;     // per QP: a doorbell came since the QP last drained to its DBR
  unsigned long long* lost_doorbells = nullptr;  // planted: the next N doorbells are lost (null: none)
  // Failover (null: unused), per QP: a command the engine clears once done, the WQE index
  // after the last request it executed, and an injected error after that many WQEs.
  uint32_t* cmd = nullptr;
  uint64_t* executed_upto = nullptr;
  uint64_t* fail_after = nullptr;
};

enum : uint32_t { kCmdNone = 0, kCmdToErr = 1, kCmdReset = 2 };

__device__ inline void write_cqe(const ibgda::DevQp& q, uint16_t wqe_counter, uint8_t opcode, uint8_t syndrome, uint8_t vendor = 0) {
  auto* c = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(q.cqe));
  if (syndrome != 0) c[55] = syndrome, c[54] = vendor;
  __threadfence();  // data (and syndrome) before the CQE word that announces it (same GPU)
  const uint64_t word = uint64_t(mlx5::bswap32(q.qpn & 0xffffff)) | (uint64_t(wqe_counter >> 8) << 32) |
                        (uint64_t(wqe_counter & 0xff) << 40) | (uint64_t(uint8_t(opcode << 4)) << 56);
  *reinterpret_cast<volatile uint64_t*>(c + 56) = word;
}

__device__ inline void copy_bytes(uint8_t* dst, const uint8_t* src, uint64_t n) {
  if (((reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) | n) & 7) == 0) {
    for (uint64_t i = 0; i < n; i += 8) *reinterpret_cast<uint64_t*>(dst + i) = *reinterpret_cast<const volatile uint64_t*>(src + i);
  } else {
    for (uint64_t i = 0; i < n; ++i) dst[i] = reinterpret_cast<const volatile uint8_t*>(src)[i];
  }
}

// Execute the WQE at index `idx`; returns its fault (none: success) and, in *nbb, the
// WQEBBs it takes (1 for a bad DS: it fails alone).
__device__ inline mock_nic::WqeFault execute(const Engine& e, const ibgda::DevQp& q, uint64_t idx, uint8_t* fm_ce_se,
                                             uint32_t* nbb) {
  using mlx5::CqeSyndrome;
  using mlx5::WqeOpcode;
  using mock_nic::KeyFault;
  namespace vendor = mock_nic::vendor;
  const uint64_t off = (idx & (q.nwqes - 1)) * mlx5::kWqebb, ring = uint64_t(q.nwqes) * mlx5::kWqebb;
  const auto* wb = reinterpret_cast<const std::byte*>(q.wq + off);
  const auto& ctrl = *reinterpret_cast<const mlx5::WqeCtrlSeg*>(wb);
  *fm_ce_se = ctrl.fm_ce_se;
  const uint32_t ds = ctrl.ds();
  *nbb = ds != 0 && ds <= mlx5::kMaxDs ? mlx5::wqebbs_for_ds(ds) : 1;
  alignas(16) std::byte scratch[mlx5::kMaxDs * mlx5::kDsBytes];
  if (ds != 0 && ds <= mlx5::kMaxDs && off + ds * mlx5::kDsBytes > ring) {  // it wraps: gather it
    for (uint64_t i = 0; i < ds * mlx5::kDsBytes; ++i) scratch[i] = reinterpret_cast<const std::byte*>(q.wq)[(off + i) % ring];
    wb = scratch;
  }
  mock_nic::WqeView v;
  if (const mock_nic::WqeFault f = mock_nic::check_wqe(wb, q.qpn, uint16_t(idx), true, mlx5::kMaxDs, &v); f.failed()) return f;
  auto local = [&](const mock_nic::WqePiece& p, uint32_t need, std::byte** out) -> mock_nic::WqeFault {
    KeyFault k{};
    *out = mock_nic::resolve_key(e.mrs, e.nmrs, p.lkey, kPd, p.addr, p.len, need, &k);
    return *out == nullptr ? mock_nic::local_key_fault(k) : mock_nic::WqeFault{};
  };
  auto remote = [&](uint64_t len, uint32_t need, std::byte** out) -> mock_nic::WqeFault {
    KeyFault k{};
    *out = mock_nic::resolve_key(e.mrs, e.nmrs, v.rkey, kPd, v.raddr, len, need, &k);
    return *out == nullptr ? mock_nic::remote_key_fault(k) : mock_nic::WqeFault{};
  };
  std::byte* at[mlx5::kMaxDs];
  switch (v.op) {
    case WqeOpcode::kNop: return {};
    case WqeOpcode::kDump:  // in-order engine: earlier READs have landed already
      for (uint32_t i = 0; i < v.npieces; ++i)
        if (const auto f = local(v.pieces[i], 0, &at[i]); f.failed()) return f;
      return {};
    case WqeOpcode::kRdmaWrite:
    case WqeOpcode::kRdmaRead: {
      const bool write = v.op == WqeOpcode::kRdmaWrite;
      for (uint32_t i = 0; i < v.npieces; ++i) {
        if (v.pieces[i].inline_data != nullptr) continue;
        if (const auto f = local(v.pieces[i], write ? 0 : mock_nic::kLocalWrite, &at[i]); f.failed()) return f;
      }
      if (v.total == 0) return {};  // a zero-length transfer carries no key to check
      std::byte* r = nullptr;
      if (const auto f = remote(v.total, write ? mock_nic::kRemoteWrite : mock_nic::kRemoteRead, &r); f.failed()) return f;
      for (uint32_t i = 0; i < v.npieces; ++i) {
        const mock_nic::WqePiece& p = v.pieces[i];
        const uint8_t* from = p.inline_data != nullptr ? reinterpret_cast<const uint8_t*>(p.inline_data) : reinterpret_cast<uint8_t*>(at[i]);
        if (write) copy_bytes(reinterpret_cast<uint8_t*>(r), from, p.len);
        else copy_bytes(reinterpret_cast<uint8_t*>(at[i]), reinterpret_cast<const uint8_t*>(r), p.len);
        r += p.len;
      }
      return {};
    }
    case WqeOpcode::kAtomicFa:
    case WqeOpcode::kAtomicCs: {
      if (const auto f = local(v.pieces[0], mock_nic::kLocalWrite, &at[0]); f.failed()) return f;
      if (v.total != 8) return {CqeSyndrome::kLocalLengthErr, vendor::kAtomicBadLength};
      if (v.raddr % 8 != 0) return {CqeSyndrome::kRemoteInvalReqErr, vendor::kAtomicMisaligned};
      std::byte* r = nullptr;
      if (const auto f = remote(8, mock_nic::kRemoteAtomic, &r); f.failed()) return f;
      const auto* a = reinterpret_cast<const mlx5::WqeAtomicSeg*>(v.atomic_args);
      auto* t = reinterpret_cast<unsigned long long*>(r);
      const unsigned long long old = v.op == WqeOpcode::kAtomicFa ? atomicAdd_system(t, a->swap_add.get())
                                                                   : atomicCAS_system(t, a->compare.get(), a->swap_add.get());
      *reinterpret_cast<volatile uint64_t*>(at[0]) = old;
      return {};
    }
    default: return {CqeSyndrome::kLocalQpOpErr, vendor::kBadOpcode};  // masked atomics: not in this twin
  }
}

// The planted fault: true while lost_doorbells still counts (engines may share the counter).
__device__ inline bool lose_doorbell(const Engine& e) {
  if (e.lost_doorbells == nullptr) return false;
  for (unsigned long long n = *reinterpret_cast<volatile unsigned long long*>(e.lost_doorbells); n != 0;) {
    const unsigned long long was = atomicCAS(e.lost_doorbells, n, n - 1);
    if (was == n) return true;
    n = was;
  }
  return false;
}

// One pass over every QP; returns the WQEs executed.
__device__ inline uint32_t engine_pass(const Engine& e) {
  uint32_t done = 0;
  for (uint32_t i = 0; i < e.nqps; ++i) {
    const ibgda::DevQp& q = e.qps[i];
    if (e.cmd != nullptr) {
      if (const uint32_t c = reinterpret_cast<volatile uint32_t*>(e.cmd)[i]; c != kCmdNone) {
        if (c == kCmdToErr) e.dead[i] = 1;
        if (c == kCmdReset) {  // nobody posts to it now: its DBR restarts at 0 with the ring
          *reinterpret_cast<volatile uint64_t*>(q.dbr) = 0;
          // The doorbell word too (a register on a ConnectX, memory here): the ring's first
          // doorbell may repeat the last one before the reset, and must still be heard.
          *reinterpret_cast<volatile uint64_t*>(q.bf) = 0;
          e.heads[i] = 0, e.executed_upto[i] = 0, e.dead[i] = 0, e.awake[i] = 0, e.rung[i] = 0;
        }
        __threadfence();
        reinterpret_cast<volatile uint32_t*>(e.cmd)[i] = kCmdNone;
      }
    }
    if (e.dead[i] && e.cmd == nullptr) continue;
    // A new word at the BlueFlame register is a doorbell (consecutive ones differ: each
    // carries a larger producer index); unless it is lost, it wakes the QP.
    if (const uint64_t bell = *reinterpret_cast<const volatile uint64_t*>(q.bf); bell != e.rung[i]) {
      e.rung[i] = bell;
      if (!lose_doorbell(e)) e.awake[i] = 1;
      __threadfence();  // the DBR the doorbell announces was written before it: read it after
    }
    if (!e.awake[i] && !e.dead[i]) continue;  // (a QP in ERR flushes what its DBR shows)
    const uint32_t snd = mlx5::bswap32(uint32_t(*reinterpret_cast<const volatile uint64_t*>(q.dbr) >> 32));
    uint64_t head = e.heads[i];
    const uint64_t prod = head + uint16_t(uint16_t(snd) - uint16_t(head));
    if (prod == head) {
      e.awake[i] = 0;  // drained: the next doorbell wakes it
      continue;
    }
    __threadfence();  // the DBR was written after the WQEs: read them after it
    if (e.dead[i]) {  // ERR: what was posted is flushed (the collapsed CQ keeps the last)
      write_cqe(q, uint16_t(prod - 1), uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
      e.heads[i] = prod;
      continue;
    }
    uint32_t n = 0;
    for (uint32_t nbb = 1; head < prod; head += nbb, ++n) {
      if (e.fail_after != nullptr && head >= e.fail_after[i]) {  // the injected error: the QP goes to ERR
        e.fail_after[i] = ~0ull;
        e.dead[i] = 1;
        write_cqe(q, uint16_t(prod - 1), uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
        head = prod;
        break;
      }
      uint8_t flags = 0;
      const mock_nic::WqeFault f = execute(e, q, head, &flags, &nbb);
      if (f.failed()) {
        write_cqe(q, uint16_t(head), uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(f.syndrome), f.vendor);
        atomicAdd(e.errors, 1ull);
        e.dead[i] = 1;
        break;
      }
      if (e.executed_upto != nullptr) e.executed_upto[i] = head + 1;
      if (flags & mlx5::kCtrlCqUpdate) write_cqe(q, uint16_t(head), uint8_t(mlx5::CqeOpcode::kReq), 0);
    }
    e.heads[i] = head;
    atomicAdd(e.executed, n);
    done += n;
  }
  return done;
}

}  // namespace doorbell::gpu_nic
