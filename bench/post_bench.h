// The GPU post-path benchmark's shared terms: the grid shapes measured and the NVSHMEM 3.4.5
// peer's entry (bench/nvshmem_post.cu, built only where NVSHMEM's headers are found). The
// rings one instant fake NIC serves are gpu/post_rig.h's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/post_rig.h"

namespace doorbell::postbench {

using namespace post_rig;
inline constexpr uint32_t kPutBytes = 8;
static_assert(kMaxQps >= 512, "the lane-0 rows give each of 128 x 4 warps its own QP");

// Who posts in a warp: kInTurn, every lane its own 8-byte put, lanes diverged (one at a time;
// QP = CTA id % nqps); kWarp, the 32 lanes together, one reservation of 32 WQEs (QP = warp id
// % nqps); kLane0, lane 0 alone, one put per call (QP = warp id % nqps: the other warps'
// posters share it).
enum class Posting : uint8_t { kInTurn, kWarp, kLane0 };
struct Shape {
  const char* name;
  uint32_t ctas, warps, nqps;
  Posting posting;
  uint32_t iters;  // puts per posting thread
  bool by_warp() const { return posting != Posting::kInTurn; }
  uint32_t posters() const { return ctas * warps * (posting == Posting::kLane0 ? 1 : 32); }
};

// NVSHMEM peer: set its device state up over `r` for `s` (before the fake NIC starts: its
// allocations may synchronise the device), post `s` through NVSHMEM's own device code and
// launch its kernel, free the state (after the fake NIC stopped).
void nvshmem_prepare(const Rings& r, const Shape& s);
void nvshmem_launch(const Shape& s, cudaStream_t stream);
void nvshmem_release();
// Phases of one thread's put (cycles summed over `iters` puts into out[0..3]: QP and key
// lookup, reservation, WQE write, submission with its doorbell), NVSHMEM's code.
void nvshmem_phases(uint32_t iters, unsigned long long* out, cudaStream_t stream);
inline constexpr int kPhases = 4;
const char* nvshmem_missing();  // why the peer is absent (built without it), or nullptr

}  // namespace doorbell::postbench
