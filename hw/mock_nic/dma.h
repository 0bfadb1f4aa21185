// How the NIC model touches the memory a WQE moves, when that memory is not plain host memory
// the engine may load and store: behind a real GPU the heap is device memory, reached only by
// copies through the CUDA driver (hw/cuda/cuda_dma.h). Without a Dma the engine moves bytes
// itself. Either side of a copy may be such memory; an atomic is a read-modify-write the
// engine serializes (the NIC's atomics are atomic among themselves, as PCIe atomics are not
// with the GPU's own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace doorbell::mock_nic {

class Dma {
 public:
  virtual ~Dma() = default;
  virtual void copy(std::byte* dst, const std::byte* src, size_t len) = 0;  // ranges may overlap
  // A write the NIC need not wait for, as its PCIe writes are posted: it lands in order with
  // the Dma's other copies and atomics, before any later one reads the memory, and before
  // flush() returns; `src` may be reused at once. The engine flushes before it writes a CQE.
  virtual void post(std::byte* dst, const std::byte* src, size_t len) { copy(dst, src, len); }
  virtual void flush() {}
  virtual uint64_t fetch_add64(std::byte* t, uint64_t v) = 0;
  virtual uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) = 0;  // returns the old value
  virtual uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) = 0;
  virtual const char* name() const = 0;
  // The first failure met (a copy that failed moved nothing; an atomic that could not read its
  // word left it alone), or empty.
  virtual std::string error() const { return {}; }
  // Host memory the copies will often touch (the links' rings) made quick for them: page-locked
  // for the device's copy engines. False (and *why) if it cannot be; copies still work.
  virtual bool pin(void*, size_t, std::string*) { return true; }
  // What the copies cost so far, by kind, for a profile (none where not kept).
  struct Tally {
    const char* what;
    uint64_t n, bytes, ns;  // copies, bytes, wall time
  };
  virtual std::vector<Tally> tallies() const { return {}; }
};

}  // namespace doorbell::mock_nic
