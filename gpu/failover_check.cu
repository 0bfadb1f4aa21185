// IBGDA failover on a Hopper GPU (run through the device tool; CI only compiles it). Two PEs
// share the GPU, each with a main and a backup QP per peer on the GPU-resident NIC engine
// (hw/cuda/nic_engine.cuh). The NIC fails PE 0's main QP to PE 1 by itself after a number of WQEs (an
// injected QP error); the worker threads run core/ibgda's failover path (failover.h: health,
// backup QP, replay log, verdicts), and a recovery warp runs core/ibgda/recovery.h against
// the NIC's command mailbox — the same sources the CPU model's tests and scenarios run.
// Checks every put / get / fetch-add / add against the reference (nothing lost, no atomic
// applied twice), that the failure happened, traffic moved to the backup and the pair came
// back; then the same run without failover, which must see failed calls. Exits non-zero on
// a wrong result.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/ibgda/api.h"
#include "core/ibgda/recovery.h"
#include "gpu/cuda_check.h"
#include "gpu/engine_rig.h"
#include "hw/cuda/cuda_ctx.cuh"

using namespace doorbell;
using doorbell::cuda_exec::CudaCtx;
using namespace doorbell::gpu_rig;

namespace {

constexpr uint32_t kNpes = 2, kQps = 2 * kNpes;  // per PE: mains to PE 0, 1, then backups
constexpr uint64_t kHeap = 4ull << 20, kChunk = 1ull << 20;
constexpr uint32_t kLogDepth = 6, kIbufSlots = 8;
constexpr uint32_t kCtas = 2, kThreads = 64, kPuts = 6;
constexpr uint64_t kCtr = 0, kSrc = 4096, kDst = 64 << 10, kGetDst = 1 << 20;


__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Device words for recovery.h, seen by the other CTAs (system-scope orderings).
struct GpuMem {
  CudaCtx& ctx;
  __device__ uint64_t load(const uint64_t* p) { return ctx.load(exec::system_scope, exec::acquire, p); }
  __device__ void store(uint64_t* p, uint64_t v) {
    ctx.store(exec::system_scope, exec::release, p, v);
    ctx.fence(exec::system_scope);  // a later load (users after FAILED) is ordered after it
  }
  __device__ void fill(void* p, int byte, size_t n) {
    for (size_t i = 0; i < n; ++i) reinterpret_cast<volatile uint8_t*>(p)[i] = uint8_t(byte);
    ctx.fence(exec::system_scope);
  }
};

// The NIC control recovery.h needs, through the GPU NIC's command mailbox. Ids: PE * kQps + QP.
struct GpuNic {
  const cuda_nic::Engine& eng;
  __device__ cuda_nic::QpState& st(uint32_t id) const { return eng.st[id]; }
  __device__ void command(uint32_t id, uint32_t c) const {
    volatile uint32_t* m = &st(id).cmd;
    *m = c;
    const uint64_t t0 = global_ns();
    while (*m != cuda_nic::kCmdNone)
      if (global_ns() - t0 > 2'000'000'000ull) {
        printf("failover_check: NIC command %u on QP %u not taken\n", c, id);
        return;
      }
    __threadfence();
  }
  __device__ bool in_error(uint32_t id) const { return *reinterpret_cast<volatile uint32_t*>(&st(id).dead) != 0; }
  __device__ bool dead(uint32_t) const { return false; }
  __device__ void fail(uint32_t id) const {
    if (!in_error(id)) command(id, cuda_nic::kCmdToErr);
  }
  __device__ bool drained(uint32_t id) const {
    const cuda_nic::QpDesc& q = eng.qps[id];
    const uint16_t snd = mlx5::dbr_send(*reinterpret_cast<const volatile uint64_t*>(q.dbr));
    const uint64_t head = *reinterpret_cast<volatile uint64_t*>(&st(id).head);
    return in_error(id) && mlx5::widen16(head, snd) == head;
  }
  __device__ uint64_t applied(const ibgda::PairEnd& req, const ibgda::PairEnd&) const {
    return *reinterpret_cast<volatile uint64_t*>(&st(req.id).executed_upto);
  }
  __device__ void reset(uint32_t id, uint32_t) const { command(id, cuda_nic::kCmdReset); }
};

struct Run {
  cuda_nic::Engine engine;           // QP id = PE * kQps + QP; engine CTA p serves ids p, p + kNpes, ...
  const ibgda::DevState* states;
  ibgda::PairRecovery* pairs;
  uint32_t npairs;
  unsigned* done;                    // worker CTAs finished
  unsigned long long* failures;      // calls that failed
  unsigned long long* lost;          // fetch-adds applied whose result was lost
  unsigned long long* fetched;       // per PE, thread, op: old values (~0: none)
  unsigned long long* stats;         // [0] pairs failed, [1] reset, [2] ns from first failure to last reset
  unsigned long long* why;           // [op * 8 + OpResult]: how calls failed
};

__global__ void failover_kernel(Run r) {
  const unsigned workers = kNpes * kCtas;
  if (blockIdx.x < kNpes) {  // the NIC engine
    cuda_nic::engine_serve(r.engine, blockIdx.x, [&] { return atomicAdd(r.done, 0u) == workers; });
    return;
  }
  if (blockIdx.x == kNpes) {  // the recovery warp (the host's job, here on the GPU)
    if (threadIdx.x != 0) return;
    CudaCtx ctx;
    GpuMem m{ctx};
    GpuNic n{r.engine};
    uint64_t first = 0;
    while (atomicAdd(r.done, 0u) != workers) {
      for (uint32_t i = 0; i < r.npairs; ++i) {
        const ibgda::RecoveryStep s = ibgda::recovery_step(m, n, r.pairs[i]);
        if (s == ibgda::RecoveryStep::kFailed) {
          if (atomicAdd(&r.stats[0], 1ull) == 0) first = global_ns();
        } else if (s == ibgda::RecoveryStep::kReset) {
          atomicAdd(&r.stats[1], 1ull);
          r.stats[2] = global_ns() - first;
        }
      }
    }
    return;
  }
  const uint32_t w = blockIdx.x - kNpes - 1, pe = w / kCtas, cta = w % kCtas;
  const ibgda::DevState& st = r.states[pe];
  CudaCtx ctx;
  const uint32_t peer = 1 - pe, t = cta * blockDim.x + threadIdx.x;
  bool ok = true;
  auto note = [&](uint32_t op, OpResult res) {  // op: 0 put, 1 get, 2 fetch-add, 3 add, 4 quiet
    if (res == OpResult::kResultLost) atomicAdd(r.lost, 1ull);
    if (res != OpResult::kOk && res != OpResult::kResultLost) atomicAdd(&r.why[op * 8 + uint32_t(res)], 1ull), ok = false;
  };
  for (uint32_t i = 0; i < kPuts; ++i)
    note(0, ibgda::put_nbi(ctx, st, kDst + (uint64_t(t) * kPuts + i) * 64, kSrc + (t * 7 + i) % 1024 * 8, 64, peer));
  note(1, ibgda::get_nbi(ctx, st, kGetDst + uint64_t(t) * 256, kSrc + t % 256 * 8, 256, peer));
  for (uint32_t i = 0; i < 2; ++i) {
    uint64_t old = ~0ull;
    const OpResult res = ibgda::atomic_fetch_add(ctx, st, kCtr, 1, peer, &old);
    note(2, res);
    r.fetched[(size_t(pe) * kCtas * kThreads + t) * 2 + i] = res == OpResult::kOk ? old : ~0ull;
  }
  note(3, ibgda::atomic_add(ctx, st, kCtr + 8, 1, peer));
  note(4, quiet(ctx, st));
  if (!ok) atomicAdd(r.failures, 1ull);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(r.done, 1u);
  }
}

struct Outcome {
  unsigned long long failures = 0, lost = 0, stats[3] = {}, why[40] = {};
  std::string bad;  // which reference check failed
  uint64_t backup_wqes = 0, epoch = 0;
  bool data_ok = true;
};

Outcome run(bool failover, uint64_t fail_after) {
  std::vector<uint8_t*> heap(kNpes);
  std::vector<Region> regions;
  std::vector<uint64_t> bases;
  for (uint32_t p = 0; p < kNpes; ++p) {
    heap[p] = dalloc<uint8_t>(kHeap);
    bases.push_back(reinterpret_cast<uint64_t>(heap[p]));
    std::vector<uint8_t> src(8192);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + p * 3 + 1);
    CHECK(cudaMemcpy(heap[p] + kSrc, src.data(), src.size(), cudaMemcpyHostToDevice));
  }
  uint64_t* dbases = dcopy(bases);
  std::vector<ibgda::DevState> states(kNpes);
  std::vector<cuda_nic::QpDesc> eqps;
  std::vector<cuda_nic::QpState> est(kNpes * kQps);
  std::vector<PeQueues> pes;
  // The device QP q of PE p (mains, then backups, as the engine's QPs are numbered).
  auto dqp = [&pes](uint32_t p, uint32_t q) { return q < kNpes ? pes[p].state.qps + q : pes[p].state.backups + (q - kNpes); };
  for (uint32_t p = 0; p < kNpes; ++p) {
    const PeQueues& pq = pes.emplace_back(pe_queues(p, kNpes, true, failover, bases, kHeap, kChunk, kLogDepth, kIbufSlots, regions));
    ibgda::DevState& s = states[p] = pq.state;
    if (!failover) s.backups = nullptr;  // the engine's QPs all exist; the protocol sees no backups
    s.opt.num_requests_in_batch = 4;
    s.heap_bases = dbases;
    s.error = dalloc<uint64_t>(1);
    if (failover) {
      s.logs = dalloc<ibgda::ReplayLog>(kCtas * kThreads);
      s.log_threads = kCtas * kThreads;
    }
    // QP q of PE p talks to QP (q - q % kNpes + p) of PE q % kNpes.
    for (uint32_t q = 0; q < kQps; ++q) eqps.push_back(engine_qp(pq.qps[q], int32_t((q % kNpes) * kQps + q - q % kNpes + p)));
  }
  est[1].fail_after = fail_after;  // PE 0's main QP to PE 1
  const cuda_nic::Engine engine = make_engine(eqps, regions, kNpes, est);
  // Pairs: QP q of PE p talks to QP (q - q % kNpes + p) of PE q % kNpes.
  std::vector<ibgda::PairRecovery> pairs;
  for (uint32_t p = 0; p < kNpes; ++p)
    for (uint32_t q = 0; q < kQps; ++q) {
      const uint32_t peer = q % kNpes, pq = q - q % kNpes + p;
      const uint32_t id = p * kQps + q, pid = peer * kQps + pq;
      if (pid < id) continue;
      ibgda::PairRecovery pr;
      pr.a = {dqp(p, q), id};
      pr.b = {dqp(peer, pq), pid};
      pr.self = pid == id;
      pairs.push_back(pr);
    }
  Run r{};
  r.engine = engine;
  r.states = dcopy(states);
  r.pairs = dcopy(pairs);
  r.npairs = uint32_t(pairs.size());
  r.done = dalloc<unsigned>(1);
  r.failures = dalloc<unsigned long long>(1);
  r.lost = dalloc<unsigned long long>(1);
  const size_t nfetch = size_t(kNpes) * kCtas * kThreads * 2;
  r.fetched = dalloc<unsigned long long>(nfetch);
  r.stats = dalloc<unsigned long long>(3);
  r.why = dalloc<unsigned long long>(5 * 8);
  if (!failover) r.npairs = 0;  // no health words: nothing to recover
  failover_kernel<<<kNpes + 1 + kNpes * kCtas, kThreads>>>(r);
  CHECK(cudaDeviceSynchronize());

  Outcome o;
  CHECK(cudaMemcpy(&o.failures, r.failures, 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&o.lost, r.lost, 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(o.stats, r.stats, 24, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(o.why, r.why, sizeof o.why, cudaMemcpyDeviceToHost));
  cuda_nic::QpState backup;
  CHECK(cudaMemcpy(&backup, engine.st + kNpes + 1, sizeof backup, cudaMemcpyDeviceToHost));
  o.backup_wqes = backup.head;  // PE 0's backup QP to PE 1 (since its last reset, if any)
  if (failover) {
    ibgda::QpHealth hp;
    CHECK(cudaMemcpy(&hp, pes[0].health + 1, sizeof hp, cudaMemcpyDeviceToHost));
    o.epoch = hp.epoch;
  }
  // The reference: every put and get landed, each counter got every add exactly once, and
  // every fetched value is distinct.
  const uint32_t nthreads = kCtas * kThreads;
  std::vector<unsigned long long> fetched(nfetch);
  CHECK(cudaMemcpy(fetched.data(), r.fetched, nfetch * 8, cudaMemcpyDeviceToHost));
  for (uint32_t p = 0; p < kNpes; ++p) {
    const uint32_t from = 1 - p;
    std::vector<uint8_t> dst(size_t(nthreads) * kPuts * 64), got(size_t(nthreads) * 256), src(8192);
    CHECK(cudaMemcpy(dst.data(), heap[p] + kDst, dst.size(), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got.data(), heap[p] + kGetDst, got.size(), cudaMemcpyDeviceToHost));
    auto expect = [&](bool c, const std::string& what) {
      if (!c && o.bad.empty()) o.bad = what + " on PE " + std::to_string(p);
      o.data_ok &= c;
    };
    for (uint32_t t = 0; t < nthreads; ++t) {
      for (uint32_t i = 0; i < kPuts; ++i)
        for (uint32_t b = 0; b < 64; ++b) {
          const uint64_t off = (t * 7 + i) % 1024 * 8 + b;
          expect(dst[(size_t(t) * kPuts + i) * 64 + b] == uint8_t(off * 7 + from * 3 + 1), "put data");
        }
      for (uint32_t b = 0; b < 256; ++b) expect(got[size_t(t) * 256 + b] == uint8_t((t % 256 * 8 + b) * 7 + from * 3 + 1), "get data");
    }
    uint64_t ctr[2];
    CHECK(cudaMemcpy(ctr, heap[p] + kCtr, 16, cudaMemcpyDeviceToHost));
    expect(ctr[0] == 2ull * nthreads, "fetch-add counter " + std::to_string(ctr[0]));
    expect(ctr[1] == nthreads, "add counter " + std::to_string(ctr[1]));
    std::set<unsigned long long> seen;
    for (size_t i = size_t(from) * nthreads * 2; i < size_t(from + 1) * nthreads * 2; ++i)
      if (fetched[i] != ~0ull) expect(seen.insert(fetched[i]).second && fetched[i] < 2ull * nthreads, "distinct fetched values");
  }
  return o;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  const uint32_t nthreads = kCtas * kThreads;
  int failed = 0;
  for (uint64_t fail_after : {40ull, 300ull, 900ull}) {
    const Outcome f = run(true, fail_after);
    const bool ok = f.failures == 0 && f.data_ok && f.stats[0] >= 1 && f.stats[1] >= 1 && f.epoch >= 1;
    std::printf("failover, PE 0's QP to PE 1 fails after %llu WQEs: %u threads x 10 ops per PE; failed calls %llu, "
                "results lost %llu, data %s; pairs failed %llu, recovered %llu (last %.1f us after the first failure), "
                "main QP epoch %llu, backup QP carried %llu WQEs: %s\n",
                (unsigned long long)fail_after, nthreads, f.failures, f.lost, f.data_ok ? "equal to the reference" : "WRONG",
                f.stats[0], f.stats[1], double(f.stats[2]) / 1000, (unsigned long long)f.epoch,
                (unsigned long long)f.backup_wqes, ok ? "OK" : "FAIL");
    failed += !ok;
    if (!ok) {
      if (!f.bad.empty()) std::printf("  first wrong: %s\n", f.bad.c_str());
      static const char* kOps[] = {"put", "get", "fetch-add", "add", "quiet"};
      static const char* kRes[] = {"ok", "timeout", "cq-error", "qp-failed", "result-lost", "maybe-posted"};
      for (int op = 0; op < 5; ++op)
        for (int res = 0; res < 6; ++res)
          if (f.why[op * 8 + res] != 0) std::printf("  %s returned %s %llu times\n", kOps[op], kRes[res], f.why[op * 8 + res]);
    }
  }
  const Outcome n = run(false, 300);
  const bool teeth = n.failures > 0;
  std::printf("without failover, the same error after 300 WQEs: failed calls %llu (must be > 0): %s\n", n.failures,
              teeth ? "OK" : "FAIL");
  failed += !teeth;
  std::printf("%d failed\n", failed);
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return failed == 0 ? 0 : 1;
}
