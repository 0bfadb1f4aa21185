// NVLS multicast emulated over peer pointers, for GPUs where multicast objects must not be
// created (the lent machines): every member's copy of a region is reachable through peer
// access; multimem.ld_reduce = a load of every member's copy, combined in member order;
// multimem.st = a store to every member; the min-poll = the min of acquire loads of every
// member's flag. Data loads bypass L1 (ld.cv): another GPU rewrites the slots.
//
// Where a copy lives is the emulation's choice; the semantics do not depend on it. On a switch
// each member's copy is in its own GPU. Without one, NVLink moves stores better than loads, so
// the emulation may place the copies a head reads with ld_reduce and min-polls (the reduce
// FIFO, red_tail and bc_head: `at_head`) in the head's GPU: members then push their slots and
// flags with remote stores, and every read the head makes is local.
#pragma once

#include <cuda/atomic>
#include <cstdint>

#include "core/nvls/collective.h"
#include "base/nvls/pack.h"
#include "base/nvls/reduce.h"

namespace doorbell::cuda_exec {

struct EmuMc {
  static constexpr uint32_t kMaxMembers = 8;
  uint8_t* members[kMaxMembers];              // each member's copy, in its own GPU
  uint8_t* at_head[kMaxMembers] = {};         // null, or each member's copy of the head-read parts, in the head's GPU
  uint32_t n = 0, me = 0;
  nvls::Region region;

  __device__ uint8_t* copy(uint32_t m, uint64_t off) const {
    const bool head_reads = off - region.flag(nvls::kRedTail) < 8 || off - region.flag(nvls::kBcHead) < 8 ||
                            (off >= nvls::Region::kFlagBytes && off < region.bc(0));
    return (head_reads && at_head[m] != nullptr ? at_head[m] : members[m]) + off;
  }
  __device__ uint8_t* uc(uint64_t off) const { return copy(me, off); }

  template <class C>
  __device__ __forceinline__ void ld_reduce(C&, uint64_t off, nvls::DType t, nvls::RedOp op, uint32_t pack, uint8_t* out) const {
    load(copy(0, off), out, pack);
    for (uint32_t m = 1; m < n; ++m) {
      alignas(16) uint8_t v[16];
      load(copy(m, off), v, pack);
      nvls::reduce_into(t, op, out, v, pack);
    }
  }
  // A hunk of U packs at off, off + stride, ...: every member's U loads are issued before
  // their reduce, so they are in flight together, and the packs stay in registers.
  template <uint32_t U, class C>
  __device__ __forceinline__ void ld_reduce_n(C&, uint64_t off, uint64_t stride, nvls::DType t, nvls::RedOp op, uint32_t pack,
                              uint8_t (&out)[U][16]) const {
    uint32_t acc[U][4], v[U][4];
#pragma unroll
    for (uint32_t u = 0; u < U; ++u) load_words(copy(0, off + u * stride), acc[u], pack);
    for (uint32_t m = 1; m < n; ++m) {
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) load_words(copy(m, off + u * stride), v[u], pack);
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) nvls::reduce_words(t, op, acc[u], v[u], pack);
    }
#pragma unroll
    for (uint32_t u = 0; u < U; ++u) *reinterpret_cast<uint4*>(out[u]) = make_uint4(acc[u][0], acc[u][1], acc[u][2], acc[u][3]);
  }
  template <class C>
  __device__ void st(C&, uint64_t off, const uint8_t* src, uint32_t bytes) const {
    for (uint32_t m = 0; m < n; ++m) {
      uint8_t* d = copy(m, off);
      // Packs are 16, 8, 4 or 2 aligned bytes: one store each, with no byte loop (which would
      // keep the caller's pack out of registers).
      if (bytes == 16) *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(src);
      else if (bytes == 8) *reinterpret_cast<uint2*>(d) = *reinterpret_cast<const uint2*>(src);
      else if (bytes == 4) *reinterpret_cast<unsigned*>(d) = *reinterpret_cast<const unsigned*>(src);
      else *reinterpret_cast<unsigned short*>(d) = *reinterpret_cast<const unsigned short*>(src);
    }
  }
  template <class C>
  __device__ uint64_t ld_min(C&, uint64_t off) const {
    uint64_t lo = ~0ull;
    for (uint32_t m = 0; m < n; ++m) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> f(*reinterpret_cast<unsigned long long*>(copy(m, off)));
      const uint64_t v = f.load(cuda::memory_order_acquire);
      lo = v < lo ? v : lo;
    }
    return lo;
  }
  // Time is real here: nothing to charge.
  template <class C>
  __device__ void charge_reduce(C&, uint64_t, bool) const {}
  template <class C>
  __device__ void charge_local(C&, uint64_t) const {}
  // Before a post that frees what the CTA read: nothing (core/nvls Post::kFrees).
  template <class C>
  __device__ void reads_done(C&) const {}
  template <class C>
  __device__ void st_flag(C&, uint64_t off, uint64_t v) const {
    for (uint32_t m = 0; m < n; ++m) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> f(*reinterpret_cast<unsigned long long*>(copy(m, off)));
      f.store(v, cuda::memory_order_relaxed);
    }
  }

 private:
  // A pack of 4, 8 or 16 bytes into words (the rest zero).
  __device__ static void load_words(const uint8_t* p, uint32_t (&w)[4], uint32_t bytes) {
    w[0] = w[1] = w[2] = w[3] = 0;
    if (bytes == 16) {
      const uint4 x = __ldcv(reinterpret_cast<const uint4*>(p));
      w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
    } else if (bytes == 8) {
      const uint2 x = __ldcv(reinterpret_cast<const uint2*>(p));
      w[0] = x.x, w[1] = x.y;
    } else {
      w[0] = __ldcv(reinterpret_cast<const unsigned*>(p));
    }
  }
  __device__ static void load(const uint8_t* p, uint8_t* out, uint32_t bytes) {
    if (bytes == 16) {
      *reinterpret_cast<uint4*>(out) = __ldcv(reinterpret_cast<const uint4*>(p));
    } else if (bytes == 8) {
      *reinterpret_cast<unsigned long long*>(out) = __ldcv(reinterpret_cast<const unsigned long long*>(p));
    } else if (bytes == 4) {
      *reinterpret_cast<unsigned*>(out) = __ldcv(reinterpret_cast<const unsigned*>(p));
    } else {
      *reinterpret_cast<unsigned short*>(out) = *reinterpret_cast<const volatile unsigned short*>(p);
    }
  }
};

// A rank's views by (head, channel), in device memory; with registered buffers (Args::
// registered) also every member's input and output (io[0], io[1]: no head placement).
struct EmuMcs {
  EmuMc* v;
  uint32_t channels;
  EmuMc* io = nullptr;
  __device__ EmuMc& at(uint32_t h, uint32_t c) const { return v[h * channels + c]; }
  __device__ EmuMc& input() const { return io[0]; }
  __device__ EmuMc& output() const { return io[1]; }
};

}  // namespace doorbell::cuda_exec
