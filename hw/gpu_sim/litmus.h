// The litmus suite (core/exec/litmus.h) run on the CPU model: where the two threads sit,
// which fence scope they use, how often each test shows its weak outcome, and whether the
// PTX memory model allows that outcome there. Tests and `doorbell litmus` print the table.
#pragma once

#include <cstdint>
#include <string>

#include "core/exec/litmus.h"
#include "hw/gpu_sim/weak_memory.h"

namespace doorbell::gpu_sim {

// Where T0 and T1 run and the scope of their fences.
enum class LitmusPlace : uint8_t {
  kSameCta,          // two warps of one CTA, .cta fences
  kOtherCtaCta,      // two CTAs, .cta fences (too narrow)
  kOtherCtaGpu,      // two CTAs, .gpu fences
  kOtherCtaSys,      // two CTAs, .sys fences
  kHostReaderGpu,    // T1 is a host / NIC agent reading memory; the GPU writer fences at .gpu (too narrow)
  kHostReaderSys,    // ... and at .sys
  kHostWriterSys,    // T0 is a host / NIC agent writing memory; the GPU reader fences at .sys
  kOtherGpuGpu,      // T0 and T1 on two GPUs (peer memory), .gpu fences (too narrow)
  kOtherGpuSys,      // ... .sys fences
  kNicLandsNoCst,    // T0 is a NIC landing x (a READ response) then writing y (its CQE), on a GPU
                     // without GPUDirect RDMA write ordering; the GPU reader fences at .sys
  kNicLandsCst,      // ... with a CST (the NIC reads GPU memory) between the two
};
inline constexpr LitmusPlace kLitmusPlaces[] = {LitmusPlace::kSameCta,       LitmusPlace::kOtherCtaCta,    LitmusPlace::kOtherCtaGpu,
                                                LitmusPlace::kOtherCtaSys,   LitmusPlace::kOtherGpuGpu,    LitmusPlace::kOtherGpuSys,
                                                LitmusPlace::kHostReaderGpu, LitmusPlace::kHostReaderSys,  LitmusPlace::kHostWriterSys,
                                                LitmusPlace::kNicLandsNoCst, LitmusPlace::kNicLandsCst};
const char* litmus_place_name(LitmusPlace p);
// Host agents take part in MP only (a device reads GPU data, or writes data a GPU reads).
bool litmus_applies(exec::Litmus t, LitmusPlace p);
// The PTX memory model allows the weak outcome here (host agents access memory in order).
bool ptx_allows(exec::Litmus t, LitmusPlace p);
// The model is meant to produce every allowed outcome except LB's (no load buffering: a load
// never reads a store that follows it in the other thread; Hopper shows none either).
bool model_should_show(exec::Litmus t, LitmusPlace p);

// Weak outcomes in `runs` runs with seeds first_seed, first_seed + 1, ...
uint64_t run_litmus(exec::Litmus t, LitmusPlace p, uint64_t runs, uint64_t first_seed, MemoryModel m);
// The whole suite as a Markdown table of weak counts (n/a where a test does not apply).
std::string litmus_table(uint64_t runs, uint64_t first_seed, MemoryModel m);

}  // namespace doorbell::gpu_sim
