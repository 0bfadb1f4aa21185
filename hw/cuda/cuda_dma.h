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
#include <vector>

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
  // Small writes into device memory are staged in a page-locked ring and not waited for; any
  // copy that is waited for (stream order) or flush() completes them and frees the ring.
  void post(std::byte* dst, const std::byte* src, size_t len) override;
  void flush() override;
  uint64_t fetch_add64(std::byte* t, uint64_t v) override;
  uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) override;
  uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) override;
  const char* name() const override { return "cuda"; }

  std::string error() const override { return error_; }
  std::vector<Tally> tallies() const override;
  bool pin(void* p, size_t len, std::string* why) override;  // cuMemHostRegister, undone when the Dma goes
  uint64_t copies() const { return copies_; }
  uint64_t bytes() const { return bytes_; }

 private:
  CudaDma(CUcontext ctx, CUstream s, std::byte* stage) : ctx_(ctx), stream_(s), stage_(stage) {}
  bool device(const void* p) const;  // device (or managed) memory, as the driver sees it
  bool ok(CUresult r, const char* what);
  bool move(void* dst, const void* src, size_t len);  // one copy, waited for; false if it failed
  template <class T, class Op>
  T rmw(std::byte* t, Op op);  // *t = op(*t), returning the old value
  template <class T>
  T cas(std::byte* t, T cmp, T swap);

  static constexpr size_t kStageBytes = 1 << 20;  // the posted writes' ring
  static constexpr size_t kPostMax = 16 << 10;     // larger writes are waited for
  CUcontext ctx_;
  CUstream stream_;
  std::byte* stage_;
  size_t staged_ = 0;  // bytes of stage_ in use by posted writes not known complete
  std::string error_;
  uint64_t copies_ = 0, bytes_ = 0;
  // Wall time by kind, for profile(): an atomic's own copies count as the atomic's.
  struct Count {
    uint64_t n = 0, bytes = 0, ns = 0;
  };
  Count to_dev_, from_dev_, dev_dev_, host_, atomics_, posted_;
  bool in_atomic_ = false;
  std::vector<void*> pinned_;
};

}  // namespace doorbell::cuda
