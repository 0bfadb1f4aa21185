#include "hw/cuda/cuda_dma.h"

#include <cstring>
#include <vector>

#include "base/steady_ns.h"

namespace doorbell::cuda {

namespace {

std::string driver_error(CUresult r) {
  const char* s = nullptr;
  cuGetErrorString(r, &s);
  return s != nullptr ? s : "CUDA error " + std::to_string(int(r));
}

// The Dma's context current on the calling thread for the scope (the NIC model's engine
// thread has none of its own).
struct Current {
  explicit Current(CUcontext c) { ok = cuCtxPushCurrent(c) == CUDA_SUCCESS; }
  ~Current() {
    CUcontext popped;
    if (ok) cuCtxPopCurrent(&popped);
  }
  bool ok;
};

}  // namespace

Result<std::unique_ptr<CudaDma>> CudaDma::create(bool legacy_stream) {
  CUcontext ctx = nullptr;
  if (CUresult r = cuCtxGetCurrent(&ctx); r != CUDA_SUCCESS || ctx == nullptr)
    return Status(Errc::kBadState, "cuda dma: no current CUDA context (" + (r != CUDA_SUCCESS ? driver_error(r) : std::string("none")) + ")");
  CUstream s = nullptr;  // CU_STREAM_LEGACY only where the hang is to be shown
  if (legacy_stream) s = CU_STREAM_LEGACY;
  else if (CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
    return Status(Errc::kNoResource, "cuda dma: cuStreamCreate: " + driver_error(r));
  void* stage = nullptr;
  if (CUresult r = cuMemHostAlloc(&stage, kStageBytes, CU_MEMHOSTALLOC_PORTABLE); r != CUDA_SUCCESS) {
    if (s != CU_STREAM_LEGACY) cuStreamDestroy(s);
    return Status(Errc::kNoResource, "cuda dma: cuMemHostAlloc: " + driver_error(r));
  }
  return std::unique_ptr<CudaDma>(new CudaDma(ctx, s, static_cast<std::byte*>(stage)));
}

CudaDma::~CudaDma() {
  Current cur(ctx_);
  for (void* p : pinned_) cuMemHostUnregister(p);
  if (stream_ != nullptr) cuStreamSynchronize(stream_);  // posted writes still read stage_
  cuMemFreeHost(stage_);
  if (stream_ != nullptr && stream_ != CU_STREAM_LEGACY) cuStreamDestroy(stream_);
}

bool CudaDma::pin(void* p, size_t len, std::string* why) {
  Current cur(ctx_);
  if (CUresult r = cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE); r != CUDA_SUCCESS)
    return *why = "cuMemHostRegister: " + driver_error(r), false;
  pinned_.push_back(p);
  return true;
}

bool CudaDma::ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  if (error_.empty()) error_ = std::string("cuda dma: ") + what + ": " + driver_error(r);
  return false;
}

bool CudaDma::device(const void* p) const {
  CUmemorytype t{};
  // Plain host memory the driver does not know gives an error: host.
  if (cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return false;
  return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_ARRAY;
}

bool CudaDma::move(void* dst, const void* src, size_t len) {
  ++copies_, bytes_ += len;
  const uint64_t t0 = steady_ns();
  const bool to = device(dst), from = device(src);
  Count& k = !to && !from ? host_ : to && from ? dev_dev_ : to ? to_dev_ : from_dev_;
  bool done = true;
  if (!to && !from) std::memmove(dst, src, len);  // host to host: no copy engine
  else
    done = ok(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len, stream_), "cuMemcpyAsync") &&
           ok(cuStreamSynchronize(stream_), "cuStreamSynchronize");
  if (to || from) staged_ = 0;  // waited for: every posted write before it is done too
  if (!in_atomic_) ++k.n, k.bytes += len, k.ns += steady_ns() - t0;
  return done;
}

void CudaDma::post(std::byte* dst, const std::byte* src, size_t len) {
  if (len == 0) return;
  Current cur(ctx_);
  if (len > kPostMax || !device(dst) || device(src)) return (void)move(dst, src, len);
  const uint64_t t0 = steady_ns();
  if (staged_ + len > kStageBytes) flush();  // the ring is full of writes in flight: let them land
  std::byte* s = stage_ + staged_;
  std::memcpy(s, src, len);
  staged_ += (len + 15) & ~size_t(15);
  ok(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(s), len, stream_), "cuMemcpyAsync");
  ++copies_, bytes_ += len;
  if (!in_atomic_) ++posted_.n, posted_.bytes += len, posted_.ns += steady_ns() - t0;
}

void CudaDma::flush() {
  if (staged_ == 0) return;
  Current cur(ctx_);
  ok(cuStreamSynchronize(stream_), "cuStreamSynchronize");
  staged_ = 0;
}

std::vector<mock_nic::Dma::Tally> CudaDma::tallies() const {
  const auto t = [](const char* what, const Count& c) { return Tally{what, c.n, c.bytes, c.ns}; };
  return {t("to device, waited for", to_dev_), t("to device, posted", posted_), t("from device", from_dev_),
          t("device to device", dev_dev_), t("host to host", host_), t("atomics", atomics_)};
}

void CudaDma::copy(std::byte* dst, const std::byte* src, size_t len) {
  if (len == 0) return;
  Current cur(ctx_);
  if (dst < src + len && src < dst + len && dst != src) {  // overlapping (loopback): through a staging buffer
    std::vector<std::byte> stage(len);
    move(stage.data(), src, len);
    move(dst, stage.data(), len);
    return;
  }
  move(dst, src, len);
}

template <class T, class Op>
T CudaDma::rmw(std::byte* t, Op op) {
  const uint64_t t0 = steady_ns();
  in_atomic_ = true;
  T old{};
  if (move(&old, t, sizeof old)) {  // unread: the word is left alone
    const T next = op(old);
    if (next != old) post(t, reinterpret_cast<const std::byte*>(&next), sizeof next);  // read first: it saw every earlier write
  }
  in_atomic_ = false;
  ++atomics_.n, atomics_.bytes += sizeof(T), atomics_.ns += steady_ns() - t0;
  return old;
}

uint64_t CudaDma::fetch_add64(std::byte* t, uint64_t v) {
  Current cur(ctx_);
  if (!device(t)) return __atomic_fetch_add(reinterpret_cast<uint64_t*>(t), v, __ATOMIC_ACQ_REL);
  return rmw<uint64_t>(t, [v](uint64_t x) { return x + v; });
}

template <class T>
T CudaDma::cas(std::byte* t, T cmp, T swap) {
  Current cur(ctx_);
  if (!device(t)) {
    __atomic_compare_exchange_n(reinterpret_cast<T*>(t), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
  }
  return rmw<T>(t, [cmp, swap](T x) { return x == cmp ? swap : x; });
}

uint64_t CudaDma::cas64(std::byte* t, uint64_t cmp, uint64_t swap) { return cas<uint64_t>(t, cmp, swap); }
uint32_t CudaDma::cas32(std::byte* t, uint32_t cmp, uint32_t swap) { return cas<uint32_t>(t, cmp, swap); }

}  // namespace doorbell::cuda
