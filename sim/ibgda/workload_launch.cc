// The workload's threads: where the protocol (core/ibgda) is instantiated for the model, so
// fuzz builds keep its coverage here and trace nothing else of the runner.
#include <optional>
#include <vector>

#include "core/ibgda/ops.h"
#include "hw/gpu_sim/sim_ctx.h"
#include "sim/ibgda/workload.h"

namespace doorbell::ibgda {

void WorkloadRun::launch(gpu_sim::Scheduler& s) {
  (void)heap::take_lookup_fault();  // this run's lookup faults only (classify takes them)
  const uint32_t npes = world_.config().npes;
  for (uint32_t pe = 0; pe < npes; ++pe) {
    if (!world_.local(pe)) continue;  // another process runs it
    DevState* st = &world_.state(pe);
    gpu_sim::LaunchConfig shape = w_.shape;
    shape.gpu = pe;  // one GPU per PE
    s.launch("pe" + std::to_string(pe), shape, [this, st, pe](gpu_sim::SimCtx& ctx) {
      const Workload& w = w_;
      const uint64_t t = (uint64_t(ctx.cta()) * ctx.warps_per_cta() + ctx.warp()) * ctx.warp_size() + ctx.lane();
      for (size_t j = 0; j < w.ops.size(); ++j) {
        const Op& o = w.ops[j];
        if (o.pe != pe || !runs_op(o, t, w.shape)) continue;
        // A collective put writes its first caller's slot.
        const uint64_t owner = o.scope == Scope::kThread ? t
                               : o.scope == Scope::kWarp ? t - ctx.lane()
                                                         : (t - ctx.lane()) - uint64_t(ctx.warp()) * ctx.warp_size();
        const uint64_t slot = w.slot_at(owner, j), src = w.src + o.src, word = w.words + o.word * 8;
        for (uint32_t r = 0; r < o.count; ++r) {
          uint64_t old = 0;
          OpResult res = OpResult::kOk;
          if (o.scope == Scope::kWarp) ctx.syncwarp();  // collectives from converged callers
          if (o.scope == Scope::kBlock) ctx.sync_cta();
          switch (o.kind) {
            case OpKind::kPut:
              res = o.scope == Scope::kWarp    ? put_nbi_warp(ctx, *st, slot, src, o.bytes, o.target)
                    : o.scope == Scope::kBlock ? put_nbi_block(ctx, *st, slot, src, o.bytes, o.target)
                                               : put_nbi(ctx, *st, slot, src, o.bytes, o.target, QpSelector{o.qp, 0});
              break;
            case OpKind::kGet:
              res = o.scope == Scope::kWarp    ? get_nbi_warp(ctx, *st, slot, src, o.bytes, o.target)
                    : o.scope == Scope::kBlock ? get_nbi_block(ctx, *st, slot, src, o.bytes, o.target)
                                               : get_nbi(ctx, *st, slot, src, o.bytes, o.target, QpSelector{o.qp, 0});
              break;
            case OpKind::kFetchAdd: res = atomic_fetch_add(ctx, *st, word, o.value, o.target, &old); break;
            case OpKind::kAdd: res = atomic_add(ctx, *st, word, o.value, o.target); break;
            case OpKind::kCompareSwap: res = atomic_compare_swap(ctx, *st, word, o.compare, o.value, o.target, &old); break;
            case OpKind::kQuiet: res = quiet_all(ctx, *st); break;
            case OpKind::kAmo:
              if (o.width == 4) {
                uint32_t old32 = 0;
                res = amo<uint32_t>(ctx, *st, o.amo, word, uint32_t(o.value), uint32_t(o.compare), o.target, &old32);
                old = old32;
              } else {
                res = amo<uint64_t>(ctx, *st, o.amo, word, o.value, o.compare, o.target, &old);
              }
              break;
            case OpKind::kPutSignal: {
              const SignalOp sop = o.signal_add ? SignalOp::kAdd : SignalOp::kSet;
              const uint64_t sig = w.sig_at(owner, j);
              res = o.scope == Scope::kWarp    ? put_signal_nbi_warp(ctx, *st, slot, src, o.bytes, sig, o.value, sop, o.target)
                    : o.scope == Scope::kBlock ? put_signal_nbi_block(ctx, *st, slot, src, o.bytes, sig, o.value, sop, o.target)
                                               : put_signal_nbi(ctx, *st, slot, src, o.bytes, sig, o.value, sop, o.target);
              break;
            }
            case OpKind::kP: {  // the value is the source's bytes, read by this thread
              uint64_t v = 0;
              ctx.read_bytes(&v, world_.at(pe, src), o.bytes);
              res = p_bytes(ctx, *st, slot, v, uint32_t(o.bytes), o.target);
              break;
            }
            case OpKind::kG: {
              uint64_t v = 0;
              res = g_bytes(ctx, *st, src, uint32_t(o.bytes), o.target, &v);
              if (res == OpResult::kOk) ctx.write_bytes(world_.at(pe, slot), &v, o.bytes);
              break;
            }
          }
          // Applied once: a lost result leaves the value unknown (failover's kResultLost).
          const std::optional<uint64_t> got = res == OpResult::kOk ? std::optional(old) : std::nullopt;
          if (res == OpResult::kResultLost) ++lost_results_, res = OpResult::kOk;
          if (res != OpResult::kOk) return void(++failed_ops_);
          if (o.kind == OpKind::kFetchAdd) atomics_.fetch_add(o.target, o.word, o.value, got);
          if (o.kind == OpKind::kAdd) atomics_.add(o.target, o.word, o.value);
          if (o.kind == OpKind::kCompareSwap) atomics_.compare_swap(o.target, o.word, o.compare, o.value, got);
          if (o.kind == OpKind::kAmo) atomics_.amo(o.target, o.word, o.amo, o.width, o.value, o.compare, got);
        }
      }
      // Generated messages (alltoall, dispatch), spread over the PE's threads.
      if (w.msgs != nullptr) {
        const std::vector<Msg>& msgs = (*w.msgs)[pe];
        for (uint64_t k = t; k < msgs.size(); k += w.threads())
          if (put_nbi(ctx, *st, w.msg_recv + msgs[k].dst, w.msg_send + msgs[k].src, msgs[k].len, msgs[k].to) != OpResult::kOk)
            return void(++failed_ops_);
      }
      if (quiet_all(ctx, *st) != OpResult::kOk) return void(++failed_ops_);
      const bool phantom = world_.config().heap.phantom;  // sizes only: no bytes to read
      // What a kernel does next: the thread reads its own gets' data after its quiet (on a GPU
      // without GPUDirect RDMA write ordering, only the quiet's CST makes it visible).
      for (size_t j = 0; j < w.ops.size(); ++j) {
        const Op& o = w.ops[j];
        if (o.kind != OpKind::kGet || o.scope != Scope::kThread || o.pe != pe || phantom || !owns_slot(o, t, w.shape)) continue;
        std::vector<uint8_t> got(o.bytes);
        ctx.read_bytes(got.data(), world_.at(pe, w.slot_at(t, j)), o.bytes);
        if (const uint64_t b = first_difference(got.data(), o.target, o.src, o.bytes); b != o.bytes && read_back_.empty())
          read_back_ = "op " + std::to_string(j) + " of pe " + std::to_string(pe) + " thread " + std::to_string(t) + ": after its quiet it read byte " +
                       std::to_string(b) + " of its get's data as it was before the get";
      }
      // Put-with-signal: the same thread here waits for each signal sent to it, then the data
      // must be there (every sender had quieted its own before waiting: no cycle).
      for (size_t j = 0; j < w.ops.size(); ++j) {
        const Op& o = w.ops[j];
        if (o.kind != OpKind::kPutSignal || o.target != pe || !owns_slot(o, t, w.shape)) continue;
        if (failed_ops_ != 0) return;  // a sender may have stopped short: its signal may never come
        const uint64_t want = o.signal_add ? o.value * o.count : o.value;
        uint64_t seen = 0;
        if (signal_wait_until(ctx, *st, w.sig_at(t, j), Cmp::kEq, want, &seen) != OpResult::kOk) return void(++failed_ops_);
        std::vector<uint8_t> got(o.bytes);
        ctx.read_bytes(got.data(), world_.at(pe, w.slot_at(t, j)), o.bytes);
        if (const uint64_t b = first_difference(got.data(), o.pe, o.src, o.bytes); b != o.bytes && read_back_.empty())
          read_back_ = "op " + std::to_string(j) + " of pe " + std::to_string(o.pe) + " thread " + std::to_string(t) + ": its signal showed with byte " +
                          std::to_string(b) + " of its data not there";
      }
    });
  }
}

}  // namespace doorbell::ibgda
