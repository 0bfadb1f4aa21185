// The rings both post paths write into, doorbell's and NVSHMEM 3.4.5's alike, for the GPU
// post-path benchmark (bench/ibgda_post_bench.cu) and the WQE comparison (wqe_compare.cu):
// PE 0 posts to PE 1 over up to kMaxQps RC QPs whose queues live in GPU memory. Plain
// types only: host translation units that build NVSHMEM's side include it too.
#pragma once

#include <cstdint>

namespace doorbell::post_rig {

inline constexpr uint32_t kDepth = 1024, kBatch = 32;
inline constexpr uint64_t kHeapBytes = 2ull << 20;  // one key chunk per PE

// Keys both sides use: PE p's heap chunk, and QP q's ibuf.
inline constexpr uint32_t heap_key(uint32_t pe) { return 0x1000u + pe * 16; }
inline constexpr uint32_t ibuf_key(uint32_t q) { return 0x9000u + q; }
// DC: PE p's DCT number and LID (its key is NVSHMEM's, ibgda::kDcKey).
inline constexpr uint32_t dctn(uint32_t pe) { return 0x300u + pe; }
inline constexpr uint16_t lid(uint32_t pe) { return uint16_t(1 + pe); }
// Per QP: slot 0 (non-fetching AMOs' results) and kIbufSlots fetch slots of 256 B, enough
// for a warp's 32 coalesced fetches.
inline constexpr uint32_t kIbufSlots = 32, kIbufBytes = (kIbufSlots + 1) * 256;

// WQ rings, 64-byte-strided DBRs (send counter, big-endian, at byte 4), collapsed CQEs.
inline constexpr uint32_t kMaxQps = 512;
struct Rings {
  uint8_t* wq = nullptr;      // kMaxQps * kDepth * 64
  uint64_t* dbr = nullptr;    // kMaxQps * 8 words
  uint8_t* cqe = nullptr;     // kMaxQps * 64
  uint64_t* bf = nullptr;     // one BlueFlame word per QP (8-word stride)
  uint8_t* heap[2] = {};      // PE 0 (local) and PE 1 (remote), kHeapBytes each
  uint8_t* ibuf = nullptr;    // kMaxQps * kIbufBytes
};

}  // namespace doorbell::post_rig
