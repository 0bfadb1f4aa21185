// Publishing by counted windows (SPEC §4), for IBGDA's submit (core/ibgda/queue.h): the
// ring's indices are cut into windows, and a producer that has written and fenced its span
// counts its entries into the window's counter instead of waiting for every earlier span to
// be published before it. Whoever learns that a window is whole (its count reached the
// window's size), or that every entry reserved in it so far is written, moves `ready` to that
// window's end once `ready` reached the window's start; every producer returns once `ready`
// covers its span, so a caller's span is published when it returns, as with
// publish_in_order.
//
// Why: with the in-order chain each producer waited for the one before it, one L2 round trip
// of the chained word per span, and a QP shared by 64 posters ran at that chain's rate
// (gpu/run-post-bench, lane-0 rows: ~6.8 M spans/s a QP, NVSHMEM's rate). Counting is one
// atomic per producer that waits for no one; only whole windows form a chain.
//
// The counters are cumulative: window w's counter reads lap(w) * size + k once its first k
// entries are counted, lap(w) = w / kPublishWindows. They cover two laps of the ring, so a
// window's entries are all counted before the window that shares its counter a lap later
// can reserve any (that needs room, which needs the earlier window completed).
#pragma once

#include <cstdint>

#include "core/exec/context.h"
#include "core/sync/publish_order.h"

namespace doorbell::sync {

inline constexpr uint32_t kPublishWindows = 64;
// Polls of a waiting producer between two looks at its window's counter.
inline constexpr uint64_t kRecheckEvery = 16;

// log2 of a power of two. (Not std::countr_zero: nvcc 13 folds <bit>'s functions to
// constants in device code.)
DOORBELL_HD constexpr uint32_t log2_pow2(uint64_t x) {
  uint32_t s = 0;
  for (uint32_t b = 32; b != 0; b >>= 1)
    if (x >> b) s += b, x >>= b;
  return s;
}
static_assert(log2_pow2(1) == 0 && log2_pow2(1024) == 10 && log2_pow2(uint64_t{1} << 63) == 63);

// log2 of the entries per window for a ring of `depth` entries (a power of two): a shift,
// as the GPU has no fast 64-bit division.
DOORBELL_HD constexpr uint32_t window_shift(uint64_t depth) {
  return depth > kPublishWindows / 2 ? log2_pow2(depth) - log2_pow2(kPublishWindows / 2) : 0;
}

struct Windows {
  uint64_t* count;  // kPublishWindows counters
  uint32_t shift;   // window_shift(depth)
  DOORBELL_HD uint64_t size() const { return uint64_t{1} << shift; }
  DOORBELL_HD uint64_t of(uint64_t idx) const { return idx >> shift; }
  DOORBELL_HD uint64_t* at(uint64_t w) const { return count + w % kPublishWindows; }
  // Window w's counter once its first k entries are counted.
  DOORBELL_HD uint64_t value(uint64_t w, uint64_t k) const { return (w / kPublishWindows << shift) + k; }
};

// The counters of a ring whose indices begin at `s` (every entry below s written): window
// j's counter holds the value of the first window at or after s's window that uses it.
DOORBELL_HD void windows_start_at(Windows win, uint64_t s) {
  const uint64_t ws = win.of(s);
  for (uint64_t w = ws; w < ws + kPublishWindows; ++w) *win.at(w) = win.value(w, w == ws ? s - (w << win.shift) : 0);
}

// [from, to) is written: whoever holds it moves `ready` to `to` once `ready` reached `from`.
struct Claim {
  uint64_t from = 0, to = 0;  // empty when to == 0
  DOORBELL_HD void join(Claim k) {
    if (k.to == 0) return;
    if (to == 0) {
      *this = k;
    } else if (k.from <= to && k.to >= from) {  // adjacent or overlapping: one range
      from = k.from < from ? k.from : from;
      to = k.to > to ? k.to : to;
    }
  }
};

// Calls f(w, lo, hi) for each window w that [base, next) touches, [lo, hi) the part in it.
template <class F>
DOORBELL_HD void for_each_window(Windows win, uint64_t base, uint64_t next, F f) {
  for (uint64_t w = win.of(base), lo = base; lo < next; ++w) {
    const uint64_t end = (w + 1) << win.shift, hi = next < end ? next : end;
    f(w, lo, hi);
    lo = hi;
  }
}

// Count [base, next) as written (the caller fenced it): one atomic per window it touches.
// Returns the windows the counting completed (those in between are the caller's alone).
template <class C>
DOORBELL_HD Claim count_written(C& ctx, Windows win, uint64_t base, uint64_t next) {
  Claim c;
  for_each_window(win, base, next, [&](uint64_t w, uint64_t lo, uint64_t hi) {
    if (ctx.atomic_add(exec::gpu_scope, win.at(w), hi - lo) + (hi - lo) == win.value(w, win.size()))
      c.join({w << win.shift, (w + 1) << win.shift});
  });
  return c;
}

// Count [base, next) where no one needs what the counts completed (IBGDA's submit_alone
// published the span itself): reductions, which the thread does not wait for.
template <class C>
DOORBELL_HD void count_published(C& ctx, Windows win, uint64_t base, uint64_t next) {
  for_each_window(win, base, next,
                  [&](uint64_t w, uint64_t lo, uint64_t hi) { exec::reduce_add(ctx, exec::gpu_scope, win.at(w), hi - lo); });
}

// What the counters say is written in the window of index `idx` (one whose entry at idx is
// counted): all of it, or every entry reserved so far (`resv`, read after the count: each
// counted entry was reserved before its count).
template <class C>
DOORBELL_HD Claim written_prefix(C& ctx, Windows win, const uint64_t* resv, uint64_t idx) {
  const uint64_t w = win.of(idx), from = w << win.shift;
  const uint64_t k = ctx.load(exec::gpu_scope, exec::acquire, win.at(w)) - win.value(w, 0);
  if (k == win.size()) return {from, from + win.size()};
  const uint64_t r = ctx.load(exec::gpu_scope, exec::relaxed, resv);
  return r - from == k ? Claim{from, r} : Claim{};
}

// Publish [base, next) by counting it, and return once `ready` covers it. `*moved` is where
// this call moved `ready` (0 if it did not: others published the span); the caller that moved
// it rings for it. `resv` is the ring's reservation head; `abandoned(polls)` says, while
// waiting, that an earlier span will never be written (its ring failed).
// A claim's holder moves `ready` by CAS from the claim's start, fenced once before its CASes
// and retried back to back as publish_in_order retries (whole windows of one span each form
// a chain, e.g. warp-scope puts: a fence or a load between handoffs slowed it); a CAS that
// finds `ready` inside the claim (a smaller claim moved it there) goes on from there.
template <class C, class Abandoned>
DOORBELL_HD Publish publish_counted(C& ctx, uint64_t* ready, const uint64_t* resv, Windows win, uint64_t base, uint64_t next,
                                    const char* what, Abandoned abandoned, uint64_t* moved) {
  Claim c = count_written(ctx, win, base, next);
  *moved = 0;
  bool fenced = false;
  for (uint64_t polls = 0;; ++polls) {
    uint64_t r;
    if (c.to != 0) {
      // The counts seen (by the RMW or acquire that read them) before `ready` moves: whoever
      // reads `ready` then sees the entries they stand for.
      if (!fenced) ctx.fence(exec::gpu_scope), fenced = true;
      r = ctx.atomic_cas(exec::gpu_scope, ready, c.from, c.to);
      if (r == c.from) {
        *moved = c.to;
        if (c.to >= next) return Publish::kOk;
        r = c.to, c = {};
      } else if (r > c.from && r < c.to) {
        c.from = r;
        continue;
      } else if (r >= c.to) {
        c = {};
      } else if ((polls + 1) % exec::retries_per_spin<C> != 0) {
        continue;
      }
    } else {
      r = ctx.load(exec::gpu_scope, exec::relaxed, ready);
    }
    if (r >= next) return Publish::kOk;
    // The last to count entries of a window learns here that they are all written; the
    // later looks catch a count that landed after this one's (submit_alone's). The window
    // looked at is the one `ready` waits in, where it is one of this span's.
    if (c.to != 0 || polls % kRecheckEvery == 0) {
      const Claim was = c;
      c.join(written_prefix(ctx, win, resv, r > base ? r : base));
      if (c.from != was.from || c.to != was.to) fenced = false;
    }
    // Given up only if nobody published the span meanwhile (a claim may have carried it since
    // `r` was read): the caller issues a given-up span again, and an atomic must not run twice.
    if (abandoned(polls))
      return ctx.load(exec::gpu_scope, exec::acquire, ready) >= next ? Publish::kOk : Publish::kAbandoned;
    if (!ctx.spin(what, ready, r)) return Publish::kTimeout;
  }
}

}  // namespace doorbell::sync
