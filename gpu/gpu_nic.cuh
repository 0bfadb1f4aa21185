// A GPU-resident software NIC for the Hopper checks: one warp per PE polls the send DBRs of
// its QPs (WQ, DBR and CQ all in GPU memory), consumes WQEs in order, executes RDMA WRITE,
// READ, ATOMIC_FA / ATOMIC_CS and DUMP against an MR table (keys checked: an unknown key or a
// range outside its region gets an error CQE, nothing is written), and writes collapsed CQEs
// (slot 0) for CQ_UPDATE WQEs, the CQE's last 8 bytes in one store after the data.
// It is the device twin of hw/mock_nic's engine, reduced to what IBGDA posts. For the failover
// check it also takes commands per QP (to ERR; reset to a fresh RTS — what DEVX's 2ERR and
// RST2INIT..RTR2RTS do on a ConnectX), flushes a QP in ERR, records how far each QP's
// requests executed (the responder's next_rcv_psn), and can fail a QP by itself after a
// given number of WQEs (an injected error).
#pragma once

#include <cstdint>

#include "core/ibgda/state.h"
#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"

namespace doorbell::gpu_nic {

struct Region {
  uint64_t base, len;
  uint32_t key;
};

struct Engine {
  ibgda::DevQp* qps = nullptr;   // this PE's QPs (device memory)
  uint32_t nqps = 0;
  uint64_t* heads = nullptr;     // per QP: next WQE to execute
  uint32_t* dead = nullptr;      // per QP: in error
  const Region* mrs = nullptr;
  uint32_t nmrs = 0;
  unsigned long long* executed = nullptr;
  unsigned long long* errors = nullptr;
  // Failover (null: unused), per QP: a command the engine clears once done, the WQE index
  // after the last request it executed, and an injected error after that many WQEs.
  uint32_t* cmd = nullptr;
  uint64_t* executed_upto = nullptr;
  uint64_t* fail_after = nullptr;
};

enum : uint32_t { kCmdNone = 0, kCmdToErr = 1, kCmdReset = 2 };

__device__ inline const Region* find_region(const Engine& e, uint32_t key, uint64_t addr, uint64_t len) {
  for (uint32_t i = 0; i < e.nmrs; ++i)
    if (e.mrs[i].key == key) {
      const Region& r = e.mrs[i];
      return addr >= r.base && len <= r.len && addr - r.base <= r.len - len ? &r : nullptr;
    }
  return nullptr;
}

__device__ inline void write_cqe(const ibgda::DevQp& q, uint16_t wqe_counter, uint8_t opcode, uint8_t syndrome) {
  auto* c = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(q.cqe));
  if (syndrome != 0) c[55] = syndrome;
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

// Execute one WQE; returns the CQE syndrome (0: success).
__device__ inline uint8_t execute(const Engine& e, const ibgda::DevQp& q, const uint8_t* w, uint64_t idx, uint8_t* fm_ce_se) {
  mlx5::WqeCtrlSeg ctrl;
  auto* cw = reinterpret_cast<uint64_t*>(&ctrl);
  cw[0] = reinterpret_cast<const volatile uint64_t*>(w)[0];
  cw[1] = reinterpret_cast<const volatile uint64_t*>(w)[1];
  *fm_ce_se = ctrl.fm_ce_se;
  if (ctrl.qpn() != q.qpn || ctrl.wqe_index() != uint16_t(idx)) return uint8_t(mlx5::CqeSyndrome::kLocalQpOpErr);
  const auto op = mlx5::WqeOpcode(ctrl.opcode());
  if (op == mlx5::WqeOpcode::kNop) return 0;
  const auto* ra = reinterpret_cast<const mlx5::WqeRaddrSeg*>(w + 16);
  if (op == mlx5::WqeOpcode::kDump) {  // in-order engine: earlier READs have landed already
    const auto* d = reinterpret_cast<const mlx5::WqeDataSeg*>(w + 16);
    return find_region(e, d->lkey.get(), d->addr.get(), d->byte_count.get()) ? 0 : uint8_t(mlx5::CqeSyndrome::kLocalProtErr);
  }
  if (op == mlx5::WqeOpcode::kRdmaWrite || op == mlx5::WqeOpcode::kRdmaRead) {
    const auto* d = reinterpret_cast<const mlx5::WqeDataSeg*>(w + 32);
    const uint64_t len = d->byte_count.get(), laddr = d->addr.get(), raddr = ra->raddr.get();
    if (!find_region(e, d->lkey.get(), laddr, len)) return uint8_t(mlx5::CqeSyndrome::kLocalProtErr);
    if (!find_region(e, ra->rkey.get(), raddr, len)) return uint8_t(mlx5::CqeSyndrome::kRemoteAccessErr);
    if (op == mlx5::WqeOpcode::kRdmaWrite)
      copy_bytes(reinterpret_cast<uint8_t*>(raddr), reinterpret_cast<const uint8_t*>(laddr), len);
    else
      copy_bytes(reinterpret_cast<uint8_t*>(laddr), reinterpret_cast<const uint8_t*>(raddr), len);
    return 0;
  }
  if (op == mlx5::WqeOpcode::kAtomicFa || op == mlx5::WqeOpcode::kAtomicCs) {
    const auto* a = reinterpret_cast<const mlx5::WqeAtomicSeg*>(w + 32);
    const auto* d = reinterpret_cast<const mlx5::WqeDataSeg*>(w + 48);
    const uint64_t raddr = ra->raddr.get();
    if (!find_region(e, d->lkey.get(), d->addr.get(), 8)) return uint8_t(mlx5::CqeSyndrome::kLocalProtErr);
    if (raddr % 8 != 0) return uint8_t(mlx5::CqeSyndrome::kRemoteInvalReqErr);
    if (!find_region(e, ra->rkey.get(), raddr, 8)) return uint8_t(mlx5::CqeSyndrome::kRemoteAccessErr);
    auto* t = reinterpret_cast<unsigned long long*>(raddr);
    const unsigned long long old = op == mlx5::WqeOpcode::kAtomicFa ? atomicAdd_system(t, a->swap_add.get())
                                                                     : atomicCAS_system(t, a->compare.get(), a->swap_add.get());
    *reinterpret_cast<volatile uint64_t*>(d->addr.get()) = old;
    return 0;
  }
  return uint8_t(mlx5::CqeSyndrome::kLocalQpOpErr);
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
          e.heads[i] = 0, e.executed_upto[i] = 0, e.dead[i] = 0;
        }
        __threadfence();
        reinterpret_cast<volatile uint32_t*>(e.cmd)[i] = kCmdNone;
      }
    }
    if (e.dead[i] && e.cmd == nullptr) continue;
    const uint32_t snd = mlx5::bswap32(uint32_t(*reinterpret_cast<const volatile uint64_t*>(q.dbr) >> 32));
    uint64_t head = e.heads[i];
    const uint64_t prod = head + uint16_t(uint16_t(snd) - uint16_t(head));
    if (prod == head) continue;
    __threadfence();  // the DBR was written after the WQEs: read them after it
    if (e.dead[i]) {  // ERR: what was posted is flushed (the collapsed CQ keeps the last)
      write_cqe(q, uint16_t(prod - 1), uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
      e.heads[i] = prod;
      continue;
    }
    uint32_t n = 0;
    for (; head < prod; ++head, ++n) {
      if (e.fail_after != nullptr && head >= e.fail_after[i]) {  // the injected error: the QP goes to ERR
        e.fail_after[i] = ~0ull;
        e.dead[i] = 1;
        write_cqe(q, uint16_t(prod - 1), uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr));
        head = prod;
        break;
      }
      uint8_t flags = 0;
      const uint8_t synd = execute(e, q, q.wq + (head & (q.nwqes - 1)) * mlx5::kWqebb, head, &flags);
      if (synd != 0) {
        write_cqe(q, uint16_t(head), uint8_t(mlx5::CqeOpcode::kReqErr), synd);
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
