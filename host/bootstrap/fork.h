// Ranks forked on one host, for GPU programs that run as several processes (gpu/p2p_bench.cu):
// fork_ranks forks them before any CUDA call (a CUDA context does not survive fork), maps host
// memory they all share, and gives each a Bootstrap over socket pairs: the exchanges through a
// star around rank 0, messages on a pair of their own between every two ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap {

// Host memory every rank maps at the same address (MAP_SHARED, page-aligned: cudaHostRegister
// takes it); `data` is null when `bytes` is 0.
struct SharedMemory {
  void* data = nullptr;
  size_t bytes = 0;
};

// Maps `shared_bytes` of shared memory, lets `init` fill it (in this process, before the
// fork), forks `n` ranks that each run body(bootstrap, shared) and exit with what it returns,
// and waits for all. OK only if every rank returned 0; otherwise kInternal naming each rank
// that returned non-zero, threw or died (a rank waiting on one that is gone gets an error
// Status, not a hang). Call it before CUDA is initialised in this process; flushes stdout
// before forking and each rank's stdout before it exits.
Status fork_ranks(uint32_t n, size_t shared_bytes, const std::function<void(SharedMemory)>& init,
                  const std::function<int(Bootstrap&, SharedMemory)>& body);

}  // namespace doorbell::bootstrap
