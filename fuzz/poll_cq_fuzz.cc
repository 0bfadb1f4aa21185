// Target 1: poll_cq's rebuilding of the 64-bit consumer index from the CQE's 16-bit
// wqe_counter. The input is a program of producer advances, NIC completions (the collapsed
// CQE reports the last completed WQE), error CQEs, polls and jumps far ahead (the state after
// a long run: wraps of 2^16 and 2^32 are reached in a few steps, and jumps land just below
// them), checked against a 64-bit reference: a poll succeeds iff the reference says idx
// completed (never for an idx not yet posted, though its low 16 bits may match the CQE's),
// and cons_idx then equals the reference exactly, never moves back and never passes it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>

#include "core/ibgda/queue.h"
#include "fuzz/check.h"
#include "fuzz/host_ctx.h"

using namespace doorbell;
using namespace doorbell::ibgda;

namespace {

// The CQE of WQE completed - 1 (an error CQE with `syndrome`, if `error`), as a NIC writes it.
void write_cqe(mlx5::Cqe64* cqe, uint64_t completed, bool error, uint8_t syndrome) {
  mlx5::Completion c;
  c.opcode = error ? mlx5::CqeOpcode::kReqErr : mlx5::CqeOpcode::kReq;
  c.wqe_counter = uint16_t(completed - 1);
  c.syndrome = error ? syndrome : 0;
  const mlx5::CqeWords w = mlx5::cqe_words(c, 0, 0);
  const uint64_t words[8] = {0, 0, 0, 0, w.w4, w.w5, w.w6, w.w7};
  std::memcpy(cqe, words, sizeof words);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  alignas(64) mlx5::Cqe64 cqe;
  std::memset(&cqe, 0xff, sizeof(cqe));  // invalid, as the driver leaves it
  Mvars mv;
  uint64_t error = 0;
  DevQp qp;
  qp.nwqes = 1u << in.ConsumeIntegralInRange<uint32_t>(1, 12);
  qp.cqe = &cqe;
  qp.mv = &mv;
  DevState st;
  st.error = &error;
#ifdef DOORBELL_PLANT
  st.opt.plant.no_carry = true;  // planted: no 0x10000 carry
#endif
  uint64_t completed = 0;  // reference: WQEs [0, completed) are done; the CQE says so
  bool failed = false;     // an error CQE was written
  fuzz::HostCtx ctx;
  while (in.remaining_bytes() > 0) {
    const uint64_t room = qp.nwqes - (mv.prod_idx - mv.cons_idx);
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:  // the producer posts up to a ring's worth beyond what it knows completed
        if (room > 0) mv.resv_head = mv.ready_head = mv.prod_idx += in.ConsumeIntegralInRange<uint64_t>(1, room);
        break;
      case 1:  // the NIC completes more (the CQE reports the last one)
        if (!failed && mv.prod_idx > completed) {
          completed += in.ConsumeIntegralInRange<uint64_t>(1, mv.prod_idx - completed);
          write_cqe(&cqe, completed, false, 0);
        }
        break;
      case 2: {  // a poll: mostly for an idx up to the producer, at times for one never posted
        if (mv.prod_idx == 0) break;
        uint64_t idx = in.ConsumeIntegralInRange<uint64_t>(1, mv.prod_idx);
        switch (in.ConsumeIntegralInRange<int>(0, 3)) {
          case 0: idx = mv.prod_idx + in.ConsumeIntegralInRange<uint64_t>(1, qp.nwqes); break;  // just past it
          case 1: idx += uint64_t(in.ConsumeIntegralInRange<uint32_t>(1, 4)) << 16; break;  // same 16 low bits
          default: break;
        }
        const uint64_t before = mv.cons_idx;
        const OpResult r = poll_cq(ctx, st, qp, idx);
        FUZZ_CHECK(mv.cons_idx >= before, "cons_idx moved back: %llu -> %llu", (unsigned long long)before,
                   (unsigned long long)mv.cons_idx);
        FUZZ_CHECK(mv.cons_idx <= completed, "cons_idx %llu passed the %llu completed (idx %llu, depth %u)",
                   (unsigned long long)mv.cons_idx, (unsigned long long)completed, (unsigned long long)idx, qp.nwqes);
        if (idx <= before) {
          FUZZ_CHECK(r == OpResult::kOk, "poll for a consumed idx failed");
        } else if (idx > mv.prod_idx) {
          FUZZ_CHECK(r == OpResult::kTimeout && mv.cons_idx == before, "poll for idx %llu, never posted (prod %llu), gave %d, cons %llu",
                     (unsigned long long)idx, (unsigned long long)mv.prod_idx, int(r), (unsigned long long)mv.cons_idx);
        } else if (failed) {
          FUZZ_CHECK(r == OpResult::kCqError && error != 0, "error CQE not reported (result %d)", int(r));
        } else if (idx <= completed) {
          FUZZ_CHECK(r == OpResult::kOk, "poll for completed idx %llu gave %d", (unsigned long long)idx, int(r));
          FUZZ_CHECK(mv.cons_idx == completed, "cons_idx %llu, reference %llu (idx %llu, depth %u)",
                     (unsigned long long)mv.cons_idx, (unsigned long long)completed, (unsigned long long)idx, qp.nwqes);
        } else {
          FUZZ_CHECK(r == OpResult::kTimeout && mv.cons_idx == before, "poll for pending idx %llu gave %d, cons %llu",
                     (unsigned long long)idx, int(r), (unsigned long long)mv.cons_idx);
        }
        break;
      }
      case 3:  // the next WQE fails: an error CQE for it
        if (!failed && mv.prod_idx > completed) {
          failed = true;
          write_cqe(&cqe, completed + 1, true, in.ConsumeIntegral<uint8_t>());
        }
        break;
      case 4: {  // far ahead: all indices of a drained queue jump (a long run in one step), half
                 // the time to just below the next 2^16 or 2^32 boundary, where the carries are
        if (failed || mv.cons_idx != mv.prod_idx || completed != mv.prod_idx) break;
        uint64_t to = mv.prod_idx + in.ConsumeIntegralInRange<uint64_t>(0, uint64_t(1) << 40);
        if (in.ConsumeBool()) {
          const uint64_t unit = in.ConsumeBool() ? uint64_t(1) << 32 : uint64_t(1) << 16;
          const uint64_t below = (mv.prod_idx / unit + 1) * unit - in.ConsumeIntegralInRange<uint64_t>(1, qp.nwqes);
          to = below > mv.prod_idx ? below : mv.prod_idx;
        }
        mv.resv_head = mv.ready_head = mv.prod_idx = mv.cons_idx = completed = to;
        if (to != 0) write_cqe(&cqe, to, false, 0);
        break;
      }
    }
  }
  return 0;
}
