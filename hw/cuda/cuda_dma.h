// The NIC model's Dma (hw/mock_nic/dma.h) behind a real GPU: registered device memory is
// moved with cuMemcpyAsync on a stream of its own created non-blocking, then waited for. A
// copy on the legacy default stream would wait for every kernel there, so one spinning on a
// flag that this copy is to write would never finish: the real "default-stream hang".
// Atomics on device memory are read-modify-writes through the same stream, serialized by
// the engine (atomic among the NIC's own, as a NIC's atomics are); on host memory, CPU atomics.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "hw/mock_nic/dma.h"

namespace doorbell::cuda {

class CudaDma : public mock_nic::Dma {
 public:
  // On the calling thread's current context (the runtime's primary one, once it has run).
  // `legacy_stream`: copy on the legacy default stream instead (to show the hang; never else).
  static Result<std::unique_ptr<CudaDma>> create(bool legacy_stream = false);
  ~CudaDma() override;

  void copy(std::byte* dst, const std::byte* src, size_t len) override;
  uint64_t fetch_add64(std::byte* t, uint64_t v) override;
  uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) override;
  uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) override;
  const char* name() const override { return "cuda"; }

  std::string error() const override { return error_; }
  uint64_t copies() const { return copies_; }
  uint64_t bytes() const { return bytes_; }

 private:
  CudaDma(CUcontext ctx, CUstream s) : ctx_(ctx), stream_(s) {}
  bool device(const void* p) const;  // device (or managed) memory, as the driver sees it
  bool ok(CUresult r, const char* what);
  bool move(void* dst, const void* src, size_t len);  // one copy, waited for; false if it failed
  template <class T, class Op>
  T rmw(std::byte* t, Op op);  // *t = op(*t), returning the old value
  template <class T>
  T cas(std::byte* t, T cmp, T swap);

  CUcontext ctx_;
  CUstream stream_;
  std::string error_;
  uint64_t copies_ = 0, bytes_ = 0;
};

}  // namespace doorbell::cuda
