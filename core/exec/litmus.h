// Litmus tests of the memory model, one source for the CPU model (hw/gpu_sim/litmus) and a
// GPU (gpu/litmus_check.cu): two threads, two 8-byte locations x and y (zero at the start),
// relaxed accesses and optional fences of one scope. Each test names its weak outcome.
//   MP    T0: x = 1; [fence]; y = 1          T1: r0 = y; [fence]; r1 = x     weak: r0 = 1, r1 = 0
//   MP+rel/acq  T0: x = 1; y.release = 1     T1: r0 = y.acquire; r1 = x      weak: r0 = 1, r1 = 0
//   SB    T0: x = 1; [fence]; r0 = y         T1: y = 1; [fence]; r1 = x     weak: r0 = 0, r1 = 0
//   LB    T0: r0 = x; y = 1                  T1: r1 = y; x = 1              weak: r0 = 1, r1 = 1
#pragma once

#include <cstdint>

#include "core/exec/context.h"

namespace doorbell::exec {

enum class Litmus : uint8_t { kMp, kMpWriterFence, kMpReaderFence, kMpFences, kSb, kSbFences, kLb, kMpRelAcq };
inline constexpr Litmus kLitmusTests[] = {Litmus::kMp, Litmus::kMpWriterFence, Litmus::kMpReaderFence, Litmus::kMpFences,
                                          Litmus::kMpRelAcq, Litmus::kSb, Litmus::kSbFences, Litmus::kLb};
// The message-passing tests (T0 writes x then y, T1 reads y then x).
DOORBELL_HD constexpr bool litmus_is_mp(Litmus t) {
  return t == Litmus::kMp || t == Litmus::kMpWriterFence || t == Litmus::kMpReaderFence || t == Litmus::kMpFences ||
         t == Litmus::kMpRelAcq;
}

inline const char* litmus_name(Litmus t) {
  switch (t) {
    case Litmus::kMp: return "MP";
    case Litmus::kMpWriterFence: return "MP+fence writer";
    case Litmus::kMpReaderFence: return "MP+fence reader";
    case Litmus::kMpFences: return "MP+fences";
    case Litmus::kSb: return "SB";
    case Litmus::kSbFences: return "SB+fences";
    case Litmus::kLb: return "LB";
    case Litmus::kMpRelAcq: return "MP+rel/acq";
  }
  return "?";
}

// Thread `role` (0 or 1) of test t; fills its results r[0] (and r[1] for MP's reader).
template <class C, Scope S>
DOORBELL_HD void litmus_thread(C& ctx, Litmus t, ScopeTag<S> s, uint32_t role, uint64_t* x, uint64_t* y, uint64_t* r) {
  const bool wf = t == Litmus::kMpWriterFence || t == Litmus::kMpFences;
  const bool rf = t == Litmus::kMpReaderFence || t == Litmus::kMpFences;
  switch (t) {
    case Litmus::kMp:
    case Litmus::kMpWriterFence:
    case Litmus::kMpReaderFence:
    case Litmus::kMpFences:
      if (role == 0) {
        ctx.store(s, relaxed, x, uint64_t(1));
        if (wf) ctx.fence(s);
        ctx.store(s, relaxed, y, uint64_t(1));
      } else {
        r[0] = ctx.load(s, relaxed, static_cast<const uint64_t*>(y));
        if (rf) ctx.fence(s);
        r[1] = ctx.load(s, relaxed, static_cast<const uint64_t*>(x));
      }
      break;
    case Litmus::kSb:
    case Litmus::kSbFences:
      ctx.store(s, relaxed, role == 0 ? x : y, uint64_t(1));
      if (t == Litmus::kSbFences) ctx.fence(s);
      r[0] = ctx.load(s, relaxed, static_cast<const uint64_t*>(role == 0 ? y : x));
      break;
    case Litmus::kLb:
      r[0] = ctx.load(s, relaxed, static_cast<const uint64_t*>(role == 0 ? x : y));
      ctx.store(s, relaxed, role == 0 ? y : x, uint64_t(1));
      break;
    case Litmus::kMpRelAcq:
      if (role == 0) {
        ctx.store(s, relaxed, x, uint64_t(1));
        ctx.store(s, release, y, uint64_t(1));
      } else {
        r[0] = ctx.load(s, acquire, static_cast<const uint64_t*>(y));
        r[1] = ctx.load(s, relaxed, static_cast<const uint64_t*>(x));
      }
      break;
  }
}

// Whether the results (T0's r0, T1's r0, T1's r1) are the test's weak outcome.
DOORBELL_HD bool litmus_weak(Litmus t, uint64_t t0_r0, uint64_t t1_r0, uint64_t t1_r1) {
  switch (t) {
    case Litmus::kSb:
    case Litmus::kSbFences: return t0_r0 == 0 && t1_r0 == 0;
    case Litmus::kLb: return t0_r0 == 1 && t1_r0 == 1;
    default: return t1_r0 == 1 && t1_r1 == 0;
  }
}

}  // namespace doorbell::exec
