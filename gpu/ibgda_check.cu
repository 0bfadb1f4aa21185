// IBGDA on a Hopper GPU (run through the device tool; CI only compiles it). The protocol of
// core/ibgda — the same source the CPU-model tests run — executes as device code with
// CudaCtx against the GPU-resident NIC engine (hw/cuda/nic_engine.cuh, the NIC model's engine
// on the GPU, one CTA per PE); WQ rings, DBRs, collapsed CQs, management words, ibufs and the
// PEs' symmetric heaps all live in GPU memory. Two PEs share the GPU. Checks put / get
// (crossing heap chunks) / fetch-add results, every AMO family against a reference, and
// put-with-signal waited for with signal_wait_until (its data there when the signal shows);
// measures 8-byte put_nbi throughput; plants a lost doorbell (the NIC must not run the put it
// announced, so its quiet times out). Exits non-zero on a wrong result.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "core/ibgda/api.h"
#include "gpu/cuda_check.h"
#include "gpu/engine_rig.h"
#include "hw/cuda/cuda_ctx.cuh"

using namespace doorbell;
using doorbell::cuda_exec::CudaCtx;
using namespace doorbell::gpu_rig;


namespace {

constexpr uint32_t kNpes = 2;
constexpr uint64_t kHeap = 4ull << 20, kChunk = 1ull << 20;
constexpr uint32_t kLogDepth = 8, kIbufSlots = 8;


struct GpuWorld {
  uint8_t* heap[kNpes];
  ibgda::DevState* states;        // device array, one per PE
  cuda_nic::Engine engine;        // every PE's QPs, engine CTA p serves QPs p, p + kNpes, ...
  ibgda::Mvars* mvars[kNpes];
  unsigned long long *executed, *errors;
  uint64_t* error_words;
};

GpuWorld build(uint32_t batch) {
  GpuWorld g{};
  std::vector<Region> regions;
  std::vector<uint64_t> bases;
  for (uint32_t p = 0; p < kNpes; ++p) {
    g.heap[p] = dalloc<uint8_t>(kHeap);
    bases.push_back(reinterpret_cast<uint64_t>(g.heap[p]));
  }
  std::vector<ibgda::DevState> states(kNpes);
  std::vector<cuda_nic::QpDesc> eqps;  // PE p's QP to q at p * kNpes + q, connected to q's QP to p
  g.error_words = dalloc<uint64_t>(kNpes);
  uint64_t* dbases = dcopy(bases);
  for (uint32_t p = 0; p < kNpes; ++p) {
    PeQueues pq = pe_queues(p, kNpes, false, false, bases, kHeap, kChunk, kLogDepth, kIbufSlots, regions);
    for (uint32_t q = 0; q < kNpes; ++q) eqps.push_back(engine_qp(pq.qps[q], int32_t(q * kNpes + p)));
    g.mvars[p] = pq.mvars;
    ibgda::DevState& s = states[p] = pq.state;
    s.opt.num_requests_in_batch = batch;
    s.heap_bases = dbases;
    s.error = g.error_words + p;
  }
  g.engine = make_engine(eqps, regions, kNpes);
  g.executed = g.engine.executed, g.errors = g.engine.errors;
  g.states = dcopy(states);
  return g;
}

struct Work {
  int kind;               // 0: correctness mix, 1: put_nbi storm, 2: warp-collective storm, 3: one put and quiet
  uint32_t ctas_per_pe;
  uint32_t per_thread;
  unsigned long long* fetched;  // kind 0: old values
  unsigned int* done_ctas;
  unsigned long long* failures;
  unsigned long long* amo_old = nullptr;  // kind 0: each thread's kAmos fetched values
  unsigned long long* sig_bad = nullptr;  // kind 0: signals seen before their data
};

constexpr uint64_t kCtrOff = 0, kSlots = 4096, kDstSlots = 128 << 10, kBigSrc = 512 << 10, kBig = 1536 << 10, kBigDst = 2 << 20,
                   kGetOff = 3584 << 10, kAmoOff = 3840 << 10, kSigOff = 3900 << 10, kSigData = 3904 << 10;
constexpr uint32_t kAmos = 9;  // AMO words per thread (kAmoOff + t * 128 on the peer)

// Word k of thread t's AMO block before the kernel, and the operand thread t applies to it.
__host__ __device__ uint64_t amo_init(uint32_t t, uint32_t k) { return 0x0123456789abcdefull * (k + 1) ^ (uint64_t(t) << 20); }
__host__ __device__ uint64_t amo_arg(uint32_t t, uint32_t k) { return 0xf0e1d2c3b4a59687ull * (k + 3) ^ t; }

// What each AMO leaves (the block's reference): 8-byte swap, compare-swap (matching), fetch-and,
// 4-byte fetch-xor, 4-byte non-fetch add, 8-byte non-fetch set, 8-byte non-fetch xor, 4-byte
// fetch-add. A 4-byte AMO works on the low half of its (little-endian) word.
__host__ __device__ uint64_t amo_after(uint32_t t, uint32_t k) {
  const uint64_t w = amo_init(t, k), a = amo_arg(t, k), hi = w & ~0xffffffffull;
  const uint32_t lo = uint32_t(w);
  switch (k) {
    case 0: case 1: case 5: return a;
    case 2: return w & a;
    case 3: return hi | uint32_t(lo ^ uint32_t(a));
    case 4: case 7: return hi | uint32_t(lo + uint32_t(a));
    case 6: return w ^ a;
    default: return w + a;
  }
}

__global__ void ibgda_kernel(const cuda_nic::Engine engine, const ibgda::DevState* states, Work w) {
  if (blockIdx.x < kNpes) {  // the NIC engine: CTA p serves QPs p, p + kNpes, ...
    const unsigned total = kNpes * w.ctas_per_pe;
    cuda_nic::engine_serve(engine, blockIdx.x, [&] { return atomicAdd(w.done_ctas, 0u) == total; });
    return;
  }
  const uint32_t pe = (blockIdx.x - kNpes) / w.ctas_per_pe, cta = (blockIdx.x - kNpes) % w.ctas_per_pe;
  const ibgda::DevState& st = states[pe];
  CudaCtx ctx;
  const uint32_t peer = (pe + 1) % kNpes;
  const uint32_t t = cta * blockDim.x + threadIdx.x;
  auto* heap = reinterpret_cast<uint8_t*>(st.heap_bases[pe]);
  bool ok = true;
  if (w.kind == 0) {
    // 8-byte puts into per-thread slots, one big put crossing chunks, a get, a fetch-add.
    for (uint32_t i = 0; i < w.per_thread; ++i) {
      auto* slot = reinterpret_cast<uint64_t*>(heap + kSlots) + t * w.per_thread + i;
      auto* dst = reinterpret_cast<uint64_t*>(heap + kDstSlots) + t * w.per_thread + i;
      *slot = (uint64_t(pe) << 48) | (uint64_t(t) << 16) | i;
      ok &= put_nbi(ctx, st, dst, slot, 1, int(peer)) == OpResult::kOk;
    }
    if (t == 0) ok &= ibgda::put_nbi(ctx, st, kBigDst, kBigSrc, kBig, peer) == OpResult::kOk;
    ok &= ibgda::get_nbi(ctx, st, kGetOff + t * 64, kBigSrc + t * 64, 64, peer) == OpResult::kOk;
    uint64_t old = 0;
    ok &= ibgda::atomic_fetch_add(ctx, st, kCtrOff, 1, peer, &old) == OpResult::kOk;
    w.fetched[pe * 65536 + t] = old;
    // Every AMO family on the peer's block for this thread (issue 38's forms: masked
    // compare-swap / fetch-add, 2-WQEBB 8-byte masked forms, 4-byte results byte-swapped).
    const uint64_t amo = kAmoOff + uint64_t(t) * 128;
    unsigned long long* olds = w.amo_old + (uint64_t(pe) * 65536 + t) * kAmos;
    uint64_t o64 = 0;
    uint32_t o32 = 0;
    ok &= ibgda::atomic_swap<uint64_t>(ctx, st, amo, amo_arg(t, 0), peer, &o64) == OpResult::kOk, olds[0] = o64;
    ok &= ibgda::atomic_compare_swap<uint64_t>(ctx, st, amo + 8, amo_init(t, 1), amo_arg(t, 1), peer, &o64) == OpResult::kOk, olds[1] = o64;
    ok &= ibgda::atomic_fetch_and<uint64_t>(ctx, st, amo + 16, amo_arg(t, 2), peer, &o64) == OpResult::kOk, olds[2] = o64;
    ok &= ibgda::atomic_fetch_xor<uint32_t>(ctx, st, amo + 24, uint32_t(amo_arg(t, 3)), peer, &o32) == OpResult::kOk, olds[3] = o32;
    ok &= ibgda::atomic_add<uint32_t>(ctx, st, amo + 32, uint32_t(amo_arg(t, 4)), peer) == OpResult::kOk;
    ok &= ibgda::atomic_set<uint64_t>(ctx, st, amo + 40, amo_arg(t, 5), peer) == OpResult::kOk;
    ok &= ibgda::atomic_xor<uint64_t>(ctx, st, amo + 48, amo_arg(t, 6), peer) == OpResult::kOk;
    ok &= ibgda::atomic_fetch_add<uint32_t>(ctx, st, amo + 56, uint32_t(amo_arg(t, 7)), peer, &o32) == OpResult::kOk, olds[7] = o32;
    ok &= ibgda::atomic_add<uint64_t>(ctx, st, amo + 64, amo_arg(t, 8), peer) == OpResult::kOk;
    // put-with-signal to the peer (set for even threads, add for odd; either leaves t + 1),
    // then wait for the peer's own to this thread: the 64 bytes must be there when it shows.
    ok &= ibgda::put_signal_nbi(ctx, st, kSigData + t * 64, kBigSrc + t * 64, 64, kSigOff + t * 8, t + 1,
                                t % 2 == 0 ? ibgda::SignalOp::kSet : ibgda::SignalOp::kAdd, peer) == OpResult::kOk;
    ok &= quiet(ctx, st) == OpResult::kOk;
    uint64_t seen = 0;
    ok &= ibgda::signal_wait_until(ctx, st, kSigOff + t * 8, ibgda::Cmp::kEq, t + 1, &seen) == OpResult::kOk;
    const uint32_t from = (pe + kNpes - 1) % kNpes;
    for (uint32_t i = 0; i < 64; ++i)
      if (heap[kSigData + t * 64 + i] != uint8_t((t * 64 + i) * 13 + from)) {
        atomicAdd(w.sig_bad, 1ull);
        break;
      }
  } else if (w.kind == 3) {  // one thread, one put: its doorbell is the only one
    if (pe == 0 && t == 0) {
      ok &= ibgda::put_nbi(ctx, st, kDstSlots, kSlots, 8, 1) == OpResult::kOk;
      ok &= quiet(ctx, st) == OpResult::kOk;
    }
  } else if (pe == 0) {
    auto* buf = reinterpret_cast<uint64_t*>(heap + kSlots);
    for (uint32_t i = 0; i < w.per_thread && ok; ++i) {
      uint64_t* p = buf + (t * w.per_thread + i) % 65536;
      ok &= (w.kind == 1 ? put_nbi(ctx, st, p, p, 1, 1) : put_nbi_warp(ctx, st, p, p, 1, 1)) == OpResult::kOk;
    }
    ok &= quiet(ctx, st) == OpResult::kOk;
  }
  if (!ok) atomicAdd(w.failures, 1ull);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(w.done_ctas, 1u);
  }
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  int failed = 0, passed = 0;

  {  // correctness
    GpuWorld g = build(32);
    for (uint32_t p = 0; p < kNpes; ++p) {
      std::vector<uint8_t> pattern(kBig);
      for (size_t i = 0; i < kBig; ++i) pattern[i] = uint8_t(i * 13 + p);
      CHECK(cudaMemcpy(g.heap[p] + kBigSrc, pattern.data(), kBig, cudaMemcpyHostToDevice));
    }
    const uint32_t ctas = 2, threads = 128, per = 16;
    for (uint32_t p = 0; p < kNpes; ++p) {
      std::vector<uint64_t> init(ctas * threads * 16);
      for (uint32_t t = 0; t < ctas * threads; ++t)
        for (uint32_t k = 0; k < kAmos; ++k) init[t * 16 + k] = amo_init(t, k);
      CHECK(cudaMemcpy(g.heap[p] + kAmoOff, init.data(), init.size() * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMemset(g.heap[p] + kSigOff, 0, ctas * threads * 8));
    }
    Work w{0, ctas, per, dalloc<unsigned long long>(kNpes * 65536), dalloc<unsigned>(1), dalloc<unsigned long long>(1),
           dalloc<unsigned long long>(kNpes * 65536 * kAmos), dalloc<unsigned long long>(1)};
    ibgda_kernel<<<kNpes + kNpes * ctas, threads>>>(g.engine, g.states, w);
    CHECK(cudaDeviceSynchronize());
    unsigned long long fails = 0, errors = 0, executed = 0;
    CHECK(cudaMemcpy(&fails, w.failures, 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&errors, g.errors, 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&executed, g.executed, 8, cudaMemcpyDeviceToHost));
    bool ok = fails == 0 && errors == 0;
    const uint32_t nthreads = ctas * threads;
    auto expect = [&](bool cond, const char* what, uint32_t p) {
      if (!cond) std::printf("ibgda correctness: %s wrong on PE %u\n", what, p);
      ok &= cond;
    };
    for (uint32_t p = 0; p < kNpes; ++p) {
      const uint32_t src = (p + kNpes - 1) % kNpes;  // who put into p
      std::vector<uint64_t> slots(nthreads * per);
      CHECK(cudaMemcpy(slots.data(), g.heap[p] + kDstSlots, slots.size() * 8, cudaMemcpyDeviceToHost));
      bool slots_ok = true;
      for (uint32_t t = 0; t < nthreads; ++t)
        for (uint32_t i = 0; i < per; ++i) slots_ok &= slots[t * per + i] == ((uint64_t(src) << 48) | (uint64_t(t) << 16) | i);
      expect(slots_ok, "8-byte put slots", p);
      std::vector<uint8_t> big(kBig), want(kBig), got(nthreads * 64);
      CHECK(cudaMemcpy(big.data(), g.heap[p] + kBigDst, kBig, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(got.data(), g.heap[p] + kGetOff, got.size(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < kBig; ++i) want[i] = uint8_t(i * 13 + src);
      expect(big == want, "chunk-crossing put", p);  // src's pattern, across the chunk boundaries
      const uint32_t from = (p + 1) % kNpes;      // p got from its peer's source region
      bool got_ok = true;
      for (size_t i = 0; i < got.size(); ++i) got_ok &= got[i] == uint8_t(i * 13 + from);
      expect(got_ok, "get data", p);
      uint64_t ctr = 0;
      CHECK(cudaMemcpy(&ctr, g.heap[p] + kCtrOff, 8, cudaMemcpyDeviceToHost));
      expect(ctr == nthreads, "fetch-add total", p);
      std::vector<unsigned long long> olds(nthreads);
      CHECK(cudaMemcpy(olds.data(), w.fetched + size_t(src) * 65536, nthreads * 8, cudaMemcpyDeviceToHost));
      expect(std::set<unsigned long long>(olds.begin(), olds.end()).size() == nthreads, "distinct fetched values", p);
      std::vector<uint64_t> words(nthreads * 16);
      std::vector<unsigned long long> amo_olds(nthreads * kAmos);
      CHECK(cudaMemcpy(words.data(), g.heap[p] + kAmoOff, words.size() * 8, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(amo_olds.data(), w.amo_old + size_t(src) * 65536 * kAmos, amo_olds.size() * 8, cudaMemcpyDeviceToHost));
      bool words_ok = true, olds_ok = true;
      for (uint32_t t = 0; t < nthreads; ++t) {
        for (uint32_t k = 0; k < kAmos; ++k) words_ok &= words[t * 16 + k] == amo_after(t, k);
        for (uint32_t k : {0u, 1u, 2u}) olds_ok &= amo_olds[t * kAmos + k] == amo_init(t, k);
        for (uint32_t k : {3u, 7u}) olds_ok &= amo_olds[t * kAmos + k] == uint32_t(amo_init(t, k));
      }
      expect(words_ok, "AMO words (swap, compare-swap, fetch-and, 4-byte fetch-xor / add / fetch-add, set, xor, add)", p);
      expect(olds_ok, "AMO fetched values", p);
      std::vector<uint64_t> sigs(nthreads);
      CHECK(cudaMemcpy(sigs.data(), g.heap[p] + kSigOff, nthreads * 8, cudaMemcpyDeviceToHost));
      bool sigs_ok = true;
      for (uint32_t t = 0; t < nthreads; ++t) sigs_ok &= sigs[t] == t + 1;
      expect(sigs_ok, "signal words", p);
    }
    unsigned long long sig_bad = 0;
    CHECK(cudaMemcpy(&sig_bad, w.sig_bad, 8, cudaMemcpyDeviceToHost));
    expect(sig_bad == 0, "put-with-signal data seen with its signal", 0);
    std::printf("ibgda correctness: 2 PEs x %u threads: %u 8-byte puts each, a %llu KiB put across 1 MiB heap chunks, "
                "a get, a fetch-add, 9 AMOs of every family, a put-with-signal waited for; NIC executed %llu WQEs, errors %llu, "
                "failed calls %llu: %s\n",
                nthreads, per, (unsigned long long)(kBig >> 10), executed, errors, fails, ok ? "OK" : "FAIL");
    ok ? ++passed : ++failed;
  }

  for (int kind : {1, 2})
    for (uint32_t batch : {1u, 32u}) {
      GpuWorld g = build(batch);
      const uint32_t ctas = 4, threads = 128, per = kind == 1 ? 256 : 2048;
      Work w{kind, ctas, per, nullptr, dalloc<unsigned>(1), dalloc<unsigned long long>(1)};
      cudaEvent_t a, b;
      CHECK(cudaEventCreate(&a));
      CHECK(cudaEventCreate(&b));
      CHECK(cudaEventRecord(a));
      ibgda_kernel<<<kNpes + kNpes * ctas, threads>>>(g.engine, g.states, w);
      CHECK(cudaEventRecord(b));
      CHECK(cudaDeviceSynchronize());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      unsigned long long fails = 0, errors = 0, executed = 0;
      CHECK(cudaMemcpy(&fails, w.failures, 8, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(&errors, g.errors, 8, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(&executed, g.executed, 8, cudaMemcpyDeviceToHost));
      ibgda::Mvars mv;
      CHECK(cudaMemcpy(&mv, g.mvars[0] + 1, sizeof mv, cudaMemcpyDeviceToHost));
      const uint64_t ops = kind == 1 ? uint64_t(ctas) * threads * per : uint64_t(ctas) * (threads / 32) * per;
      const bool ok = fails == 0 && errors == 0 && mv.cons_idx == ops && executed == ops;
      std::printf("put_nbi %s 8 B, batch %u: %llu puts PE0->PE1 in %.2f ms = %.2f M puts/s (resv %llu ready %llu prod %llu "
                  "cons %llu): %s\n",
                  kind == 1 ? "thread-scope" : "warp-scope ", batch, (unsigned long long)ops, ms, double(ops) / ms / 1e3,
                  (unsigned long long)mv.resv_head, (unsigned long long)mv.ready_head, (unsigned long long)mv.prod_idx,
                  (unsigned long long)mv.cons_idx, ok ? "OK" : "FAIL");
      ok ? ++passed : ++failed;
    }
  {  // planted: the NIC loses the put's doorbell. It must not run the WQE (it hears no doorbell),
     // so the put's quiet times out: the check sees the hang a lost doorbell causes.
    GpuWorld g = build(32);
    unsigned long long* lost = dalloc<unsigned long long>(1);
    const unsigned long long one = 1;
    CHECK(cudaMemcpy(lost, &one, 8, cudaMemcpyHostToDevice));
    g.engine.lost_doorbells = lost;
    Work w{3, 1, 1, nullptr, dalloc<unsigned>(1), dalloc<unsigned long long>(1)};
    ibgda_kernel<<<kNpes + kNpes, 32>>>(g.engine, g.states, w);
    CHECK(cudaDeviceSynchronize());
    unsigned long long fails = 0, executed = 0, left = 0;
    CHECK(cudaMemcpy(&fails, w.failures, 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&executed, g.executed, 8, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&left, lost, 8, cudaMemcpyDeviceToHost));
    const bool caught = fails == 1 && executed == 0 && left == 0;
    std::printf("planted lost doorbell: the put's quiet %s, NIC executed %llu WQEs: %s\n", fails == 1 ? "timed out" : "returned",
                executed, caught ? "caught" : "NOT CAUGHT");
    caught ? ++passed : ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  doorbell::cuda_exec::report_timeouts();  // waits that gave up, logged on the device
  return failed == 0 ? 0 : 1;
}
