// `doorbell psm-search`: the search for seed 004's 4 GB alltoall signature over the kernel-less
// transport's open choices (core/p2p/psm_p2p.h Choices, sim/p2p/psm_run.h's block scope and
// call overlap): each configuration's alltoall and same-size sendrecv, their outcomes, and
// how close the alltoall's stall comes to the seed's (receiver near step 325 so that the
// sender sees recvMem.tail 333, while the receiver sees sendMem.head ~380).
#pragma once

#include <cstdint>

namespace doorbell::tools {

struct PsmSearchOptions {
  uint32_t gpus = 8;
  uint64_t gib_per_gpu = 4;  // alltoall: gib / gpus per GPU pair; sendrecv: all of it to the next GPU
  uint64_t seeds = 2;        // random-schedule seeds per configuration and pattern
  uint32_t window = 0;       // 0: both 8 and 16
};

// Prints one line per configuration, then the matches re-run on the timed schedule; returns 0.
int run_psm_search(const PsmSearchOptions& o);

}  // namespace doorbell::tools
