// The NIC model's engine resident on the GPU: the same WQE checks (hw/mock_nic/wqe_check.h),
// execution (wqe_exec.h), key checks (mr_resolve.h) and CQE bytes (hw/mlx5/cqe.h) as the CPU
// model's engine, run by CTAs while the protocol runs in other CTAs of the same GPU. Rings,
// DBRs, BlueFlame words, CQs and registered memory are all GPU memory.
//
// An engine is a CTA; QP i is served by engine i % nengines, in order, as a ConnectX's send
// scheduler serves one QP at a time. Thread 0 is the engine's control: it watches each QP's
// BlueFlame word (a new word is a doorbell, which wakes the QP; a QP drained to its DBR sleeps
// until the next one, so a lost doorbell leaves posted WQEs unexecuted), reads the DBR,
// fetches, checks and executes WQEs and writes CQEs. Copies larger than kInlineCopy are left
// to the whole CTA, so large WRITEs and READs move at memory speed when many engines run.
//
// Against the CPU model: the engine executes in order at issue (no response delays, fences
// hold trivially), a request the responder would not answer fails at once with the syndrome
// the CPU model gives after its retry timers, receive queues are not modelled (WRITE_IMM gets
// RNR), and CQ overrun is not checked (every CQ behaves as if created with `oi`). Host
// commands per QP (to ERR; reset to a fresh RTS, what DEVX's 2ERR and RST2INIT..RTR2RTS do)
// and an injected QP error after a given WQE serve the failover check.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hw/mlx5/cqe.h"
#include "hw/mlx5/wqe.h"
#include "hw/mock_nic/mr_resolve.h"
#include "hw/mock_nic/wqe_check.h"
#include "hw/mock_nic/qp_step.h"
#include "hw/mock_nic/wqe_exec.h"

namespace doorbell::cuda_nic {

// One RC QP as the engine finds it (filled on the host, read-only on the device).
struct QpDesc {
  uint32_t qpn = 0, pd = 0;
  uint32_t log_sq = 0;                  // WQEBBs in the send ring: 2^log_sq
  std::byte* sq = nullptr;
  mlx5::QpDoorbellRecord* dbr = nullptr;
  uint64_t* bf = nullptr;               // BlueFlame register: a new word here is a doorbell
  mlx5::Cqe64* cq = nullptr;            // send CQ
  uint32_t log_cq = 0;
  bool collapsed = true;                // every CQE in slot 0 (IBGDA's send CQs)
  int32_t peer = -1;                    // the connected QP's index in Engine::qps (itself: loopback)
  uint32_t remote_access = mock_nic::kRemoteWrite | mock_nic::kRemoteRead | mock_nic::kRemoteAtomic;  // as responder
  uint8_t atomic_mode = 3;
};

enum : uint32_t { kCmdNone = 0, kCmdToErr = 1, kCmdReset = 2 };

// The engine's state of one QP (device memory, copied from host-built defaults).
struct QpState {
  uint64_t head = 0;           // next WQEBB to execute
  uint64_t rung = 0;           // the last doorbell word seen at the BlueFlame register
  uint64_t cq_pi = 0;          // CQEs written
  uint64_t executed_upto = 0;  // WQE index after the last request the responder executed
  uint64_t fail_after = ~0ull; // injected: the QP goes to ERR when head reaches this
  uint32_t awake = 0;          // a doorbell came since the QP last drained to its DBR
  uint32_t dead = 0;           // in ERR: what is posted is flushed
  uint32_t cmd = kCmdNone;     // host command, cleared once done
  uint32_t pad = 0;
};

struct Engine {
  const QpDesc* qps = nullptr;
  QpState* st = nullptr;
  uint32_t nqps = 0;
  uint32_t nengines = 1;                        // QP i is served by engine i % nengines
  const mock_nic::MemoryRegion* mrs = nullptr;  // one key table, indexed by key >> 8
  uint32_t nmrs = 0;
  unsigned long long* executed = nullptr;       // WQEs executed (not flushed)
  unsigned long long* errors = nullptr;         // error CQEs written (not flushes)
  unsigned long long* lost_doorbells = nullptr; // planted: the next N doorbells are lost (null: none)
};

inline constexpr uint64_t kInlineCopy = 512;  // bytes thread 0 copies itself
inline constexpr uint32_t kMaxCopies = mlx5::kMaxDs;
inline constexpr uint32_t kWqesPerTurn = 256;   // a QP's turn, before the engine looks at its next QP

namespace detail {

struct Copy {
  std::byte* dst;
  const std::byte* src;
  uint64_t len;
};

// A WQE whose copies the CTA makes before its completion is written.
struct Pending {
  uint64_t idx;
  uint32_t nbb, byte_cnt;
  uint8_t opcode;
  bool signaled, valid;
};

struct Shared {
  Copy copies[kMaxCopies];
  uint32_t ncopies;
  bool more;  // a WQE waits for its completion after the CTA's copies
  Pending pending;
  uint32_t done;
};

__device__ inline void copy_small(std::byte* dst, const std::byte* src, uint64_t n) {
  if (((reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) | n) & 7) == 0) {
    for (uint64_t i = 0; i < n; i += 8)  // loads from L2: the bytes may come from another SM
      *reinterpret_cast<uint64_t*>(dst + i) = __ldcg(reinterpret_cast<const unsigned long long*>(src + i));
  } else {
    for (uint64_t i = 0; i < n; ++i) reinterpret_cast<volatile uint8_t*>(dst)[i] = reinterpret_cast<const volatile uint8_t*>(src)[i];
  }
}

// Every thread of the CTA copies its share; 16-byte loads that skip L1 when both ends allow.
__device__ inline void cta_copy(const Copy& c) {
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  uint64_t head = 0;
  if (((reinterpret_cast<uint64_t>(c.dst) ^ reinterpret_cast<uint64_t>(c.src)) & 15) == 0) {
    head = (16 - (reinterpret_cast<uint64_t>(c.dst) & 15)) & 15;
    if (head > c.len) head = c.len;
    const uint64_t nvec = (c.len - head) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(c.src + head);
    uint4* d = reinterpret_cast<uint4*>(c.dst + head);
    uint64_t i = t;
    for (; i + 3 * nt < nvec; i += 4 * nt) {  // four loads in flight per thread
      const uint4 a = __ldcg(s + i), b = __ldcg(s + i + nt), e = __ldcg(s + i + 2 * nt), f = __ldcg(s + i + 3 * nt);
      d[i] = a, d[i + nt] = b, d[i + 2 * nt] = e, d[i + 3 * nt] = f;
    }
    for (; i < nvec; i += nt) d[i] = __ldcg(s + i);
    for (uint64_t k = head + nvec * 16 + t; k < c.len; k += nt) c.dst[k] = c.src[k];
    for (uint64_t k = t; k < head; k += nt) c.dst[k] = c.src[k];
    return;
  }
  for (uint64_t k = t; k < c.len; k += nt) c.dst[k] = c.src[k];
}

// wqe_exec.h's Port on the GPU: one key table, the peer QP by index, data moved by thread 0
// (small) or queued for the CTA (large).
struct Port {
  const Engine& e;
  uint32_t self;
  uint64_t idx;      // the WQE's index
  Shared& sh;
  bool peer_up;      // the responder's QP was not in ERR when this QP's turn began
  const QpDesc* rq = nullptr;
  uint32_t nscat = 0;
  std::byte* scat[mlx5::kMaxDs];  // left uninitialised: filled up to nscat
  uint32_t scat_len[mlx5::kMaxDs];

  __device__ Port(const Engine& en, uint32_t i, uint64_t x, Shared& s, bool up) : e(en), self(i), idx(x), sh(s), peer_up(up) {}

  __device__ const QpDesc& q() const { return e.qps[self]; }
  __device__ void move(std::byte* dst, const std::byte* src, uint64_t len) {
    if (len <= kInlineCopy || sh.ncopies == kMaxCopies) copy_small(dst, src, len);
    else sh.copies[sh.ncopies++] = {dst, src, len};
  }
  __device__ std::byte* local(const mock_nic::WqePiece& p, uint32_t need, mock_nic::KeyFault* f, bool* ph) {
    return mock_nic::resolve_key(e.mrs, e.nmrs, p.lkey, q().pd, p.addr, p.len, need, f, ph);
  }
  __device__ bool answer() {
    const int32_t peer = q().peer;
    if (peer < 0) return false;
    rq = &e.qps[peer];
    return rq->peer == int32_t(self) && peer_up;
  }
  __device__ uint32_t responder_access() const { return rq->remote_access; }
  __device__ uint8_t responder_atomic_mode() const { return rq->atomic_mode; }
  __device__ std::byte* remote(uint32_t rkey, uint64_t addr, uint64_t len, uint32_t need, mock_nic::KeyFault* f, bool* ph) {
    return mock_nic::resolve_key(e.mrs, e.nmrs, rkey, rq->pd, addr, len, need, f, ph);
  }
  __device__ void responder_error(mock_nic::AsyncEvent::Kind, mock_nic::WqeFault) { atomicExch(&e.st[q().peer].dead, 1u); }
  __device__ bool has_receive() const { return false; }  // receive queues are not modelled here
  __device__ void deliver_imm(uint32_t, uint64_t) {}
  __device__ void write(std::byte* dst, uint64_t, const std::byte* src, const mock_nic::WqePiece& p, bool) { move(dst, src, p.len); }
  __device__ void scatter(const mock_nic::WqePiece& p, std::byte* at) { scat[nscat] = at, scat_len[nscat++] = p.len; }
  __device__ void read_response(const std::byte* src, uint64_t, uint64_t, bool) {
    for (uint32_t k = 0; k < nscat; src += scat_len[k], ++k) move(scat[k], src, scat_len[k]);
  }
  __device__ uint64_t fetch_add64(std::byte* t, uint64_t v) { return atomicAdd_system(reinterpret_cast<unsigned long long*>(t), v); }
  __device__ uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) {
    return atomicCAS_system(reinterpret_cast<unsigned long long*>(t), cmp, swap);
  }
  __device__ uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) {
    return atomicCAS_system(reinterpret_cast<unsigned*>(t), cmp, swap);
  }
  __device__ void atomic_result(const std::byte* bytes, uint32_t size) {
    for (uint32_t i = 0; i < size; ++i) reinterpret_cast<volatile std::byte*>(scat[0])[i] = bytes[i];
  }
  __device__ void applied() { e.st[self].executed_upto = idx + 1; }
  // The responder is on this GPU: its half runs here and now.
  __device__ mock_nic::ExecOutcome respond(const mock_nic::RemoteRequest& q) { return mock_nic::respond(*this, q); }
};

// The completion's 64 bytes, the word holding op_own last, after a fence: a poller that sees
// the owner / wqe_counter sees the rest, and the data before it.
__device__ inline void write_cqe(const QpDesc& q, QpState& s, const mlx5::Completion& c) {
  const mlx5::CqeWords w = mlx5::cqe_words(c, s.cq_pi, q.log_cq);
  mlx5::Cqe64* slot = mlx5::cqe_slot(q.cq, s.cq_pi, q.log_cq, q.collapsed);
  auto* d = reinterpret_cast<volatile uint64_t*>(slot);
  for (int k = 0; k < 4; ++k) d[k] = 0;
  d[4] = w.w4, d[5] = w.w5, d[6] = w.w6;
  __threadfence();
  d[7] = w.w7;
  ++s.cq_pi;
}

__device__ inline void complete(const Engine& e, uint32_t i, uint64_t idx, uint8_t op, uint32_t bytes, uint8_t synd, uint8_t vend) {
  write_cqe(e.qps[i], e.st[i], mlx5::requester_completion(e.qps[i].qpn, idx, op, bytes, synd, vend));
}

// The planted fault: true while lost_doorbells still counts (engines share the counter).
__device__ inline bool lose_doorbell(const Engine& e) {
  if (e.lost_doorbells == nullptr) return false;
  for (unsigned long long n = *reinterpret_cast<volatile unsigned long long*>(e.lost_doorbells); n != 0;) {
    const unsigned long long was = atomicCAS(e.lost_doorbells, n, n - 1);
    if (was == n) return true;
    n = was;
  }
  return false;
}

// This engine's side of qp_step's Ring (hw/mock_nic/qp_step.h): the WQE into registers /
// local memory, its first WQEBB in four 16-byte loads, the rest (wrapping at the ring's end)
// once its DS is known; the harness's injected error (fail_after); execution through Port.
struct SqRing {
  const Engine& e;
  uint32_t i;
  QpState& s;
  Shared& sh;
  bool peer_up;
  uint64_t ring, idx = 0, off = 0;
  alignas(16) std::byte w[mlx5::kMaxDs * mlx5::kDsBytes];

  __device__ const std::byte* first(uint64_t x) {
    idx = x, off = (x * mlx5::kWqebb) & (ring - 1);
    auto* w16 = reinterpret_cast<uint4*>(w);
    for (int k = 0; k < 4; ++k) w16[k] = __ldcg(reinterpret_cast<const uint4*>(e.qps[i].sq + off) + k);
    return w;
  }
  __device__ const std::byte* whole(uint64_t, uint32_t ds) {
    auto* w16 = reinterpret_cast<uint4*>(w);
    for (uint32_t k = 4; k < ds; ++k) w16[k] = __ldcg(reinterpret_cast<const uint4*>(e.qps[i].sq + ((off + 16 * k) & (ring - 1))));
    return w;
  }
  __device__ uint32_t qpn() const { return e.qps[i].qpn; }
  __device__ static uint32_t max_ds() { return mlx5::kMaxDs; }
  __device__ static bool check_index() { return true; }
  __device__ static bool fenced(const mlx5::WqeCtrlSeg&) { return false; }  // nothing is in flight across steps
  __device__ bool injected_error(uint64_t x) {
    if (x < s.fail_after) return false;
    s.fail_after = ~0ull;
    atomicExch(&s.dead, 1u);
    return true;
  }
  __device__ static mock_nic::WqeFault refused(mlx5::WqeOpcode) { return {}; }
  __device__ mock_nic::ExecOutcome execute(const mock_nic::WqeView& v, uint32_t imm) {
    Port port(e, i, idx, sh, peer_up);
    return mock_nic::execute_wqe(port, v, imm);
  }
};

// The control's step on QP i (thread 0): finish the WQE whose copies the CTA just made, act on
// a host command and a doorbell, then execute or flush posted WQEs until one leaves copies to
// the CTA (sh.ncopies, sh.more), the QP's turn ends or nothing is posted.
__device__ inline void control_step(const Engine& e, uint32_t i, Shared& sh) {
  const QpDesc& q = e.qps[i];
  QpState& s = e.st[i];
  sh.ncopies = 0, sh.more = false;
  uint32_t n = 0;
  if (sh.pending.valid) {
    const Pending& p = sh.pending;
    if (p.signaled) complete(e, i, p.idx, p.opcode, p.byte_cnt, 0, 0);
    s.head = p.idx + p.nbb;
    sh.pending.valid = false;
    ++n;
  }
  auto* cmd = reinterpret_cast<volatile uint32_t*>(&s.cmd);
  if (const uint32_t c = *cmd; c != kCmdNone) {
    if (c == kCmdToErr) atomicExch(&s.dead, 1u);
    if (c == kCmdReset) {  // nobody posts to it now: its DBR restarts at 0 with the ring
      *reinterpret_cast<volatile uint64_t*>(q.dbr) = 0;
      // The doorbell word too (a register on a ConnectX, memory here): the ring's first
      // doorbell may repeat the last one before the reset, and must still be heard.
      *reinterpret_cast<volatile uint64_t*>(q.bf) = 0;
      s.head = 0, s.executed_upto = 0, s.awake = 0, s.rung = 0;
      atomicExch(&s.dead, 0u);
    }
    __threadfence();
    *cmd = kCmdNone;
  }
  const bool dead = *reinterpret_cast<volatile uint32_t*>(&s.dead) != 0;
  if (const uint64_t bell = *reinterpret_cast<volatile uint64_t*>(q.bf); bell != s.rung) {
    s.rung = bell;
    if (!lose_doorbell(e)) s.awake = 1;
    __threadfence();  // the DBR the doorbell announces was written before it: read it after
  }
  if (s.awake || dead) {  // a QP in ERR flushes what its DBR shows
    const uint64_t prod = mlx5::widen16(s.head, mlx5::dbr_send(*reinterpret_cast<volatile const uint64_t*>(q.dbr)));
    if (prod == s.head) {
      s.awake = 0;  // drained: the next doorbell wakes it
    } else {
      __threadfence();  // the DBR was written after the WQEs: read them after it
      // Read once per turn: an error met by another engine (a responder's) or a command
      // takes effect at the next turn, as an asynchronous event does.
      bool in_err = dead;
      const bool peer_up = q.peer >= 0 && *reinterpret_cast<volatile const uint32_t*>(&e.st[q.peer].dead) == 0;
      SqRing ring{e, i, s, sh, peer_up, uint64_t(mlx5::kWqebb) << q.log_sq};
      for (uint32_t turn = 0; s.head != prod; ++turn) {
        if (turn == kWqesPerTurn) break;  // the QP stays awake: its next turn comes in the next pass
        const uint64_t idx = s.head;
        const mock_nic::Step st = mock_nic::qp_step(ring, idx, prod, in_err);
        const uint32_t nbb = st.nbb;
        const uint8_t op = st.opcode;
        if (st.kind == mock_nic::StepKind::kPartial) break;  // the doorbell ends inside this WQE: wait for the rest
        if (st.kind == mock_nic::StepKind::kFlushed) {  // in ERR, or the injected error here
          in_err = true;
          complete(e, i, idx, op, 0, uint8_t(mlx5::CqeSyndrome::kWrFlushErr), mock_nic::vendor::kFlushed);
          s.head = idx + nbb;
          continue;
        }
        mock_nic::ExecOutcome o = st.o;
        if (o.not_answered())  // no retry timers here: the error the CPU model gives once they run out
          o.fault.vendor = o.fault.syndrome == mlx5::CqeSyndrome::kRnrRetryExcErr ? mock_nic::vendor::kRnrTimeout
                                                                                   : mock_nic::vendor::kRetryTimeout;
        if (o.fault.failed()) {
          complete(e, i, idx, op, 0, uint8_t(o.fault.syndrome), o.fault.vendor);
          atomicAdd(e.errors, 1ull);
          atomicExch(&s.dead, 1u);
          in_err = true;
          s.head = idx + nbb;
          continue;  // what follows is flushed
        }
        if (sh.ncopies != 0) {  // the CTA copies; the completion follows in the next step
          sh.pending = {idx, nbb, o.byte_cnt, op, st.signaled, true};
          sh.more = true;
          break;
        }
        if (st.signaled) complete(e, i, idx, op, o.byte_cnt, 0, 0);
        s.head = idx + nbb;
        ++n;
      }
    }
  }
  if (n != 0) atomicAdd(e.executed, n);
  sh.done += n;
}

}  // namespace detail

// One pass of engine `id` over its QPs; every thread of the CTA calls it. Returns the WQEs
// executed (the same value in every thread).
__device__ inline uint32_t engine_pass(const Engine& e, uint32_t id) {
  __shared__ detail::Shared sh;
  if (threadIdx.x == 0) sh.done = 0, sh.pending.valid = false;
  __syncthreads();
  for (uint32_t i = id; i < e.nqps; i += e.nengines) {
    for (;;) {
      if (threadIdx.x == 0) detail::control_step(e, i, sh);
      __syncthreads();
      const uint32_t nc = sh.ncopies;
      const bool more = sh.more;
      for (uint32_t k = 0; k < nc; ++k) detail::cta_copy(sh.copies[k]);
      if (nc != 0) __threadfence();  // the data before the completion thread 0 writes next
      __syncthreads();
      if (!more) break;
    }
  }
  const uint32_t done = sh.done;
  __syncthreads();
  return done;
}

// Serve until `stop()` (asked by thread 0) holds and a pass finds nothing more to do.
template <class Stop>
__device__ inline void engine_serve(const Engine& e, uint32_t id, Stop stop) {
  __shared__ int quit;
  for (;;) {
    if (engine_pass(e, id) != 0) continue;
    if (threadIdx.x == 0) quit = stop();
    __syncthreads();
    const bool q = quit != 0;
    if (q && engine_pass(e, id) == 0) return;
  }
}

}  // namespace doorbell::cuda_nic
