// The GPU-resident NIC engine (hw/cuda/nic_engine.cuh) on a Hopper GPU (run through the
// device tool; CI only compiles it).
//
// 1. The malformed-WQE suite: every class of hw/mock_nic/devx/malformed_cases.h is posted by the
//    CPU model's driver (a good NOP, the bad WQE, a WRITE and a NOP behind it), the ring, DBR,
//    key table and registered bytes are mirrored into GPU memory, and the GPU engine runs them;
//    its four CQEs must equal the CPU model's for the same WQEs (opcode, syndrome, vendor code,
//    wqe_counter, QPN), the syndrome and code must be the class's, and no registered byte may
//    change.
// 2. Large RDMA WRITEs: one loopback QP per engine CTA, each WRITE moving `size` bytes, beside
//    cudaMemcpyAsync device-to-device of the same bytes in the same run; both as bytes read +
//    written per second. Data checked after the engine run.
//
// Usage: engine_check [engines (0: 2 per SM)] [threads per engine] [WRITEs per QP]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/engine_rig.h"
#include "hw/cuda/nic_engine.cuh"
#include "hw/mock_nic/devx/malformed_cases.h"

using namespace doorbell;

namespace {

__global__ void serve_once(const cuda_nic::Engine e) {
  cuda_nic::engine_serve(e, blockIdx.x, [] { return true; });  // until a pass finds nothing
}

__global__ void serve_until(const cuda_nic::Engine e, unsigned long long total) {
  cuda_nic::engine_serve(e, blockIdx.x, [&] { return *reinterpret_cast<volatile unsigned long long*>(e.executed) >= total; });
}

struct Cqe {
  uint8_t opcode, syndrome, vendor;
  uint16_t counter;
  uint32_t qpn;
};

Cqe fields(const mlx5::Cqe64& c) {
  const auto& e = reinterpret_cast<const mlx5::ErrCqe64&>(c);
  const bool err = c.opcode() == uint8_t(mlx5::CqeOpcode::kReqErr);
  return {c.opcode(), err ? e.syndrome : uint8_t(0), err ? e.vendor_err_synd : uint8_t(0), c.wqe_counter.get(),
          (err ? e.s_wqe_opcode_qpn.get() : c.sop_drop_qpn.get()) & 0xffffff};
}

bool same(const Cqe& a, const Cqe& b) {
  return a.opcode == b.opcode && a.syndrome == b.syndrome && a.vendor == b.vendor && a.counter == b.counter && a.qpn == b.qpn;
}

// One malformed class on the GPU engine and on the CPU model; true when both agree with it.
bool malformed_case(const testing::Case& c) {
  using namespace testing;
  Env e;
  const uint64_t ok = e.a.nop(kCtrlCqUpdate);
  const uint64_t bad = e.a.pi;
  c.post(e);
  const uint64_t after1 = e.a.write(e.key, e.reg_lo, 8, e.key, e.reg_lo + 4096, 0);
  const uint64_t after2 = e.a.nop(kCtrlCqUpdate);
  e.snapshot();

  // The GPU mirror: registered bytes, both QPs' rings / DBRs / BlueFlame words / CQs, keys.
  constexpr uint64_t kBuf = 1 << 16;
  std::byte* gbuf = dalloc<std::byte>(kBuf);
  CHECK(cudaMemcpy(gbuf, e.rig.mem.translate(e.buf, kBuf), kBuf, cudaMemcpyHostToDevice));
  std::vector<mock_nic::MemoryRegion> table = e.rig.nic().mrs().regions();
  for (mock_nic::MemoryRegion& m : table)
    if (m.valid) {
      if (m.start < e.buf || m.start + m.length > e.buf + kBuf) m.valid = false;  // not the test's bytes
      else m.host = gbuf + (m.start - e.buf);
    }
  std::vector<cuda_nic::QpDesc> qps;
  std::vector<std::byte*> cqs;
  for (SendQueue* q : {&e.a, &e.b}) {
    const mock_nic::Qp& mq = *e.rig.nic().qp(q->qpn);
    cuda_nic::QpDesc d;
    d.qpn = q->qpn, d.pd = mq.attr.pd;
    d.log_sq = q->log_sq;
    d.sq = dalloc<std::byte>(uint64_t(mlx5::kWqebb) << q->log_sq);
    CHECK(cudaMemcpy(d.sq, q->ring(), uint64_t(mlx5::kWqebb) << q->log_sq, cudaMemcpyHostToDevice));
    mlx5::QpDoorbellRecord dbr{};
    dbr.snd.set(q == &e.a ? uint32_t(q->pi & 0xffff) : 0);
    d.dbr = dcopy(std::vector<mlx5::QpDoorbellRecord>{dbr});
    d.bf = dcopy(std::vector<uint64_t>{q == &e.a ? q->last_doorbell : 0});
    cqs.push_back(dalloc<std::byte>(uint64_t(64) << q->log_cq, 0xff));
    d.cq = reinterpret_cast<mlx5::Cqe64*>(cqs.back());
    d.log_cq = q->log_cq;
    d.collapsed = false;
    d.peer = q == &e.a ? 1 : 0;
    d.remote_access = mq.remote_access;
    d.atomic_mode = mq.atomic_mode;
    qps.push_back(d);
  }
  const cuda_nic::Engine eng = gpu_rig::make_engine(qps, table, 1);
  serve_once<<<1, 128>>>(eng);
  CHECK(cudaDeviceSynchronize());
  std::vector<mlx5::Cqe64> gpu_cqes(64);
  CHECK(cudaMemcpy(gpu_cqes.data(), cqs[0], 64 * 64, cudaMemcpyDeviceToHost));
  std::vector<std::byte> gbytes(kBuf);
  CHECK(cudaMemcpy(gbytes.data(), gbuf, kBuf, cudaMemcpyDeviceToHost));

  e.a.ring_doorbell();  // the CPU model on the same WQEs
  if (!e.rig.run()) return std::printf("  %-34s CPU model did not go idle\n", c.name), false;
  std::vector<Cqe> cpu;
  while (const mlx5::Cqe64* q = e.a.poll()) cpu.push_back(fields(*q));

  const Cqe want[4] = {{uint8_t(mlx5::CqeOpcode::kReq), 0, 0, uint16_t(ok), e.a.qpn},
                       {uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(c.syndrome), c.vendor, uint16_t(bad), e.a.qpn},
                       {uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr), mock_nic::vendor::kFlushed,
                        uint16_t(after1), e.a.qpn},
                       {uint8_t(mlx5::CqeOpcode::kReqErr), uint8_t(mlx5::CqeSyndrome::kWrFlushErr), mock_nic::vendor::kFlushed,
                        uint16_t(after2), e.a.qpn}};
  bool good = cpu.size() == 4 && gpu_cqes[4].op_own == 0xff;  // exactly four CQEs on the GPU too
  for (int k = 0; k < 4; ++k) {
    const Cqe g = fields(gpu_cqes[k]);
    good &= same(g, want[k]) && k < int(cpu.size()) && same(cpu[k], g);
  }
  const bool untouched = std::equal(gbytes.begin(), gbytes.end(), e.before.begin());
  const Cqe g = fields(gpu_cqes[1]);
  std::printf("  %-34s GPU %s / vendor 0x%02x, CPU %s: %s%s\n", c.name, mlx5::syndrome_name(mlx5::CqeSyndrome(g.syndrome)), g.vendor,
              cpu.size() > 1 ? mlx5::syndrome_name(mlx5::CqeSyndrome(cpu[1].syndrome)) : "-", good && untouched ? "same" : "DIFFERENT",
              untouched ? "" : " (registered bytes changed)");
  return good && untouched;
}

// WRITEs: `nqps` loopback QPs, each `writes` WRITEs of `size` bytes from its source slice to
// its destination slice (every `signal`-th one signaled), served by `nengines` CTAs of
// `threads`. Returns the seconds the engine took.
double run_writes(uint32_t nqps, uint32_t nengines, uint32_t threads, uint32_t writes, uint64_t size, uint32_t signal,
                  bool* data_ok) {
  uint32_t kLogSq = 6;
  while ((1u << kLogSq) < writes) ++kLogSq;
  std::byte* src = dalloc<std::byte>(nqps * size);
  std::byte* dst = dalloc<std::byte>(nqps * size);
  std::vector<uint32_t> pattern(nqps * size / 4);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint32_t(i * 2654435761u);
  CHECK(cudaMemcpy(src, pattern.data(), nqps * size, cudaMemcpyHostToDevice));
  std::vector<gpu_rig::Region> regions = {{reinterpret_cast<uint64_t>(src), nqps * size, gpu_rig::key_of(1)},
                                          {reinterpret_cast<uint64_t>(dst), nqps * size, gpu_rig::key_of(2)}};
  std::vector<cuda_nic::QpDesc> qps(nqps);
  std::byte* rings = dalloc<std::byte>(size_t(nqps) << (kLogSq + 6));
  auto* dbrs = dalloc<mlx5::QpDoorbellRecord>(nqps);
  auto* bfs = dalloc<uint64_t>(nqps);
  auto* cqs = dalloc<mlx5::Cqe64>(nqps, 0xff);
  std::vector<mlx5::QpDoorbellRecord> hdbr(nqps);
  std::vector<uint64_t> hbf(nqps);
  for (uint32_t q = 0; q < nqps; ++q) {
    cuda_nic::QpDesc& d = qps[q];
    d.qpn = 0x100 + q, d.pd = gpu_rig::kPd, d.log_sq = kLogSq;
    d.sq = rings + (size_t(q) << (kLogSq + 6));
    d.dbr = dbrs + q, d.bf = bfs + q, d.cq = cqs + q, d.log_cq = kLogSq, d.peer = int32_t(q);
    std::vector<std::byte> ring(size_t(1) << (kLogSq + 6));
    for (uint32_t i = 0; i < writes; ++i) {
      auto* w = ring.data() + size_t(i) * 64;
      mlx5::set_ctrl_seg(reinterpret_cast<mlx5::WqeCtrlSeg*>(w), uint16_t(i), mlx5::WqeOpcode::kRdmaWrite, 0, d.qpn,
                         (i + 1) % signal == 0 || i + 1 == writes ? mlx5::kCtrlCqUpdate : 0, 3);
      mlx5::set_raddr_seg(reinterpret_cast<mlx5::WqeRaddrSeg*>(w + 16), reinterpret_cast<uint64_t>(dst) + q * size, regions[1].key);
      mlx5::set_data_seg(reinterpret_cast<mlx5::WqeDataSeg*>(w + 32), uint32_t(size), regions[0].key,
                         reinterpret_cast<uint64_t>(src) + q * size);
    }
    CHECK(cudaMemcpy(d.sq, ring.data(), ring.size(), cudaMemcpyHostToDevice));
    hdbr[q].snd.set(writes & 0xffff);
    hbf[q] = mlx5::doorbell_word(*reinterpret_cast<const mlx5::WqeCtrlSeg*>(ring.data() + size_t(writes - 1) * 64));
  }
  const cuda_nic::Engine eng = gpu_rig::make_engine(qps, regions, nengines);
  CHECK(cudaMemcpy(dbrs, hdbr.data(), nqps * sizeof hdbr[0], cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(bfs, hbf.data(), nqps * 8, cudaMemcpyHostToDevice));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a));
  serve_until<<<nengines, threads>>>(eng, uint64_t(nqps) * writes);
  CHECK(cudaEventRecord(b));
  CHECK(cudaDeviceSynchronize());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  unsigned long long errors = 0;
  CHECK(cudaMemcpy(&errors, eng.errors, 8, cudaMemcpyDeviceToHost));
  std::vector<uint32_t> got(pattern.size());
  CHECK(cudaMemcpy(got.data(), dst, nqps * size, cudaMemcpyDeviceToHost));
  *data_ok = errors == 0 && got == pattern;
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  CHECK(cudaFree(rings));
  return ms * 1e-3;
}

double memcpy_bandwidth(uint64_t bytes, uint32_t reps) {
  std::byte* s = dalloc<std::byte>(bytes);
  std::byte* d = dalloc<std::byte>(bytes);
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, st));  // warm
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, st));
  for (uint32_t i = 0; i < reps; ++i) CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, st));
  CHECK(cudaEventRecord(b, st));
  CHECK(cudaStreamSynchronize(st));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaFree(s));
  CHECK(cudaFree(d));
  return 2.0 * double(bytes) * reps / (ms * 1e-3);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const uint32_t engines = argc > 1 && std::atoi(argv[1]) > 0 ? uint32_t(std::atoi(argv[1])) : 2 * uint32_t(prop.multiProcessorCount);
  const uint32_t threads = argc > 2 ? uint32_t(std::atoi(argv[2])) : 512;
  const uint32_t writes = argc > 3 ? uint32_t(std::atoi(argv[3])) : 8;
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  int failed = 0, passed = 0;

  std::printf("malformed WQEs on the GPU engine, beside the CPU model:\n");
  int same = 0;
  for (const testing::Case& c : testing::cases()) same += malformed_case(c);
  const int total = int(testing::cases().size());
  std::printf("malformed-WQE suite: %d of %d classes give the CPU model's CQEs on the GPU engine: %s\n", same, total,
              same == total ? "OK" : "FAIL");
  same == total ? ++passed : ++failed;

  std::printf("large RDMA WRITEs: %u engine CTAs x %u threads, one loopback QP each, %u WRITEs per QP; bytes read + written "
              "per second, medians of 3\n", engines, threads, writes);
  for (uint64_t size : {1ull << 20, 4ull << 20}) {
    std::vector<double> eng, cp;
    bool ok = true;
    for (int r = 0; r < 3; ++r) {
      bool d = false;
      eng.push_back(2.0 * engines * writes * double(size) / run_writes(engines, engines, threads, writes, size, writes, &d));
      ok &= d;
      cp.push_back(memcpy_bandwidth(uint64_t(engines) * size, writes));
    }
    const double e = median(eng), c = median(cp);
    const bool good = ok && e >= 0.5 * c;
    std::printf("  WRITE %4llu KiB: engine %7.1f GB/s, cudaMemcpy D2D %7.1f GB/s, %.2fx, data %s: %s\n",
                (unsigned long long)(size >> 10), e / 1e9, c / 1e9, e / c, ok ? "equal" : "WRONG", good ? "OK" : "FAIL");
    good ? ++passed : ++failed;
  }
  // Small WRITEs (no target: the engine's message rate, for the record).
  for (uint32_t n : {1u, engines}) {
    std::vector<double> rate;
    bool ok = true;
    const uint32_t per = 16384;
    for (int r = 0; r < 3; ++r) {
      bool d = false;
      rate.push_back(double(n) * per / run_writes(n, n, threads, per, 8, 32, &d));
      ok &= d;
    }
    std::printf("  WRITE 8 B, %3u engine(s), one QP each, a CQE per 32: %7.2f M WQE/s, data %s\n", n, median(rate) / 1e6,
                ok ? "equal" : "WRONG");
    ok ? ++passed : ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
