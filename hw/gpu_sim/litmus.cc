#include "hw/gpu_sim/litmus.h"

#include <sstream>

#include "hw/gpu_sim/sim_ctx.h"

namespace doorbell::gpu_sim {

using exec::Litmus;

namespace {

// A host / NIC agent in a litmus test: in-order accesses straight to memory. As a NIC on a
// GPU without write ordering (`landing`), x is a response's data landing and y its CQE, with a
// CST between them where `cst`.
struct HostThread {
  AgentCtx& a;
  WeakMemory* w = nullptr;
  const uint64_t* x = nullptr;
  bool landing = false, cst = false;
  template <exec::Scope S, exec::Order O>
  void store(exec::ScopeTag<S>, exec::OrderTag<O>, uint64_t* p, uint64_t v) {
    a.point();
    if (landing && w != nullptr) {
      if (p == x) {
        w->landing(p, sizeof v, "litmus landing", 0, a.id());
        *p = v;
        return;
      }
      if (cst) w->flush_landings(a.id());
    }
    a.store64(p, v);
  }
  template <exec::Scope S, exec::Order O>
  uint64_t load(exec::ScopeTag<S>, exec::OrderTag<O>, const uint64_t* p) {
    a.point();
    return a.load64(p, "host", "litmus word", 0);
  }
  template <exec::Scope S>
  void fence(exec::ScopeTag<S>) {}
};

template <class C>
void run_role(C& ctx, Litmus t, exec::Scope s, uint32_t role, uint64_t* x, uint64_t* y, uint64_t* r) {
  switch (s) {
    case exec::Scope::kCta: return exec::litmus_thread(ctx, t, exec::cta_scope, role, x, y, r);
    case exec::Scope::kGpu: return exec::litmus_thread(ctx, t, exec::gpu_scope, role, x, y, r);
    case exec::Scope::kSystem: return exec::litmus_thread(ctx, t, exec::system_scope, role, x, y, r);
  }
}

exec::Scope fence_scope(LitmusPlace p) {
  switch (p) {
    case LitmusPlace::kSameCta:
    case LitmusPlace::kOtherCtaCta: return exec::Scope::kCta;
    case LitmusPlace::kOtherCtaGpu:
    case LitmusPlace::kOtherGpuGpu:
    case LitmusPlace::kHostReaderGpu: return exec::Scope::kGpu;
    default: return exec::Scope::kSystem;
  }
}

bool host_place(LitmusPlace p) {
  return p == LitmusPlace::kHostReaderGpu || p == LitmusPlace::kHostReaderSys || p == LitmusPlace::kHostWriterSys ||
         p == LitmusPlace::kNicLandsNoCst || p == LitmusPlace::kNicLandsCst;
}

}  // namespace

const char* litmus_place_name(LitmusPlace p) {
  switch (p) {
    case LitmusPlace::kSameCta: return "same CTA, .cta";
    case LitmusPlace::kOtherCtaCta: return "2 CTAs, .cta";
    case LitmusPlace::kOtherCtaGpu: return "2 CTAs, .gpu";
    case LitmusPlace::kOtherCtaSys: return "2 CTAs, .sys";
    case LitmusPlace::kHostReaderGpu: return "host reads, .gpu";
    case LitmusPlace::kHostReaderSys: return "host reads, .sys";
    case LitmusPlace::kHostWriterSys: return "host writes, .sys";
    case LitmusPlace::kOtherGpuGpu: return "2 GPUs, .gpu";
    case LitmusPlace::kOtherGpuSys: return "2 GPUs, .sys";
    case LitmusPlace::kNicLandsNoCst: return "NIC lands, no CST";
    case LitmusPlace::kNicLandsCst: return "NIC lands, CST";
  }
  return "?";
}

bool litmus_applies(Litmus t, LitmusPlace p) { return exec::litmus_is_mp(t) || !host_place(p); }

// A release / acquire pair (or fences) orders only where each one's scope includes the other
// thread: not a .cta pair across CTAs, nor a .gpu pair across GPUs (nor a .gpu writer for the host).
bool ptx_allows(Litmus t, LitmusPlace p) {
  const bool adequate = p != LitmusPlace::kOtherCtaCta && p != LitmusPlace::kHostReaderGpu && p != LitmusPlace::kOtherGpuGpu;
  const bool writer_fenced = t == Litmus::kMpWriterFence || t == Litmus::kMpFences || t == Litmus::kMpRelAcq;
  const bool reader_fenced = t == Litmus::kMpReaderFence || t == Litmus::kMpFences || t == Litmus::kMpRelAcq;
  if (p == LitmusPlace::kHostReaderGpu || p == LitmusPlace::kHostReaderSys)
    return !(writer_fenced && adequate);  // the host reads in order: only the writer can reorder
  // The host writes in order; a NIC's landing may pass its CQE unless a CST separates them.
  if (p == LitmusPlace::kHostWriterSys || p == LitmusPlace::kNicLandsCst) return !reader_fenced;
  if (p == LitmusPlace::kNicLandsNoCst) return true;
  switch (t) {
    case Litmus::kMpFences:
    case Litmus::kMpRelAcq:
    case Litmus::kSbFences: return !adequate;
    default: return true;
  }
}

bool model_should_show(Litmus t, LitmusPlace p) { return t != Litmus::kLb && ptx_allows(t, p); }

uint64_t run_litmus(Litmus t, LitmusPlace p, uint64_t runs, uint64_t first_seed, MemoryModel m) {
  uint64_t weak = 0;
  const exec::Scope scope = fence_scope(p);
  const bool host_reader = p == LitmusPlace::kHostReaderGpu || p == LitmusPlace::kHostReaderSys;
  const bool nic = p == LitmusPlace::kNicLandsNoCst || p == LitmusPlace::kNicLandsCst;
  const bool host_writer = p == LitmusPlace::kHostWriterSys || nic;
  for (uint64_t i = 0; i < runs; ++i) {
    SchedOptions so;
    so.seed = first_seed + i;
    so.memory = m;
    so.stack_bytes = 32 << 10;
    Scheduler s(so);
    alignas(64) uint64_t mem[16] = {};
    uint64_t* x = &mem[0];
    uint64_t* y = &mem[8];  // another cache line
    uint64_t r[2][2] = {};
    auto gpu = [&](uint32_t role) {
      return [&, role](SimCtx& ctx) { run_role(ctx, t, scope, role, x, y, r[role]); };
    };
    if (nic && s.weak() != nullptr) s.weak()->set_unordered_landings(true);
    auto host = [&](uint32_t role) {
      return [&, role](AgentCtx& a) {
        HostThread h{a, s.weak(), x, nic, p == LitmusPlace::kNicLandsCst};
        run_role(h, t, scope, role, x, y, r[role]);
      };
    };
    if (p == LitmusPlace::kSameCta) {
      s.launch("litmus", {1, 2, 1}, [&](SimCtx& ctx) { run_role(ctx, t, scope, ctx.warp(), x, y, r[ctx.warp()]); });
    } else if (host_reader) {
      s.launch("T0", {1, 1, 1}, gpu(0));
      s.add_agent("T1 host", host(1), false);
    } else if (host_writer) {
      s.add_agent(nic ? "T0 NIC" : "T0 host", host(0), false);
      s.launch("T1", {1, 1, 1}, gpu(1));
    } else if (p == LitmusPlace::kOtherGpuGpu || p == LitmusPlace::kOtherGpuSys) {
      s.launch("T0", {1, 1, 1, 0}, gpu(0));
      s.launch("T1", {1, 1, 1, 1}, gpu(1));
    } else {
      s.launch("litmus", {2, 1, 1}, [&](SimCtx& ctx) { run_role(ctx, t, scope, ctx.cta(), x, y, r[ctx.cta()]); });
    }
    (void)s.run();
    weak += exec::litmus_weak(t, r[0][0], r[1][0], r[1][1]);
  }
  return weak;
}

std::string litmus_table(uint64_t runs, uint64_t first_seed, MemoryModel m) {
  std::ostringstream os;
  os << "| test (" << memory_model_name(m) << " model, " << runs << " runs) |";
  for (LitmusPlace p : kLitmusPlaces) os << " " << litmus_place_name(p) << " |";
  os << "\n|---|";
  for (size_t i = 0; i < std::size(kLitmusPlaces); ++i) os << "---|";
  os << "\n";
  for (Litmus t : exec::kLitmusTests) {
    os << "| " << exec::litmus_name(t) << " |";
    for (LitmusPlace p : kLitmusPlaces) {
      if (!litmus_applies(t, p)) {
        os << " n/a |";
        continue;
      }
      os << " " << run_litmus(t, p, runs, first_seed, m) << (ptx_allows(t, p) ? "" : " (forbidden)") << " |";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace doorbell::gpu_sim
