// Target 5: the scenario parser. Any text either parses into a scenario every later stage may
// trust (PEs, warps and targets that exist, powers of two where the queues need them, a
// dispatch that spreads over the PEs, ...) or fails with `file:line: message` whose line lies
// in the file. Nothing may throw past parse_text.
#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>

#include "fuzz/check.h"
#include "scenarios/replay/parse.h"

using namespace doorbell::scenario;

namespace {

bool pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = parse_text(text, "fuzz.yaml");
  if (!r.is_ok()) {
    const std::string msg = r.status().message(), file = "fuzz.yaml:";
    const size_t digits = msg.find_first_not_of("0123456789", file.size());
    FUZZ_CHECK(msg.compare(0, file.size(), file) == 0 && digits != std::string::npos && digits > file.size() &&
                   msg.compare(digits, 2, ": ") == 0 && msg.size() > digits + 2,
               "error without file:line: message: '%s'", msg.c_str());
    const long line = std::stol(msg.substr(file.size(), std::min<size_t>(digits - file.size(), 9)));
    const long lines = long(std::count(text.begin(), text.end(), '\n')) + 1;
    FUZZ_CHECK(line >= 1 && line <= lines + 1, "error at line %ld of a %ld-line file: '%s'", line, lines, msg.c_str());
    return 0;
  }
  const Scenario& s = *r;
  FUZZ_CHECK(s.pes >= 1 && s.pes <= 1024, "pes %u", s.pes);  // the parser's range (scenarios/scale has 256)
  FUZZ_CHECK(s.expect.result != Expect::kErrors || !s.expect.syndrome.empty(), "expected error without a syndrome");
  const IbgdaWorkload* w = std::get_if<IbgdaWorkload>(&s.work);
  if (w == nullptr) {  // p2p, nvls: the device-level runs' shapes
    FUZZ_CHECK(s.pes >= 2 && s.expect.words.empty(), "a device-level workload on %u GPUs, or with expected words", s.pes);
    if (const NvlsWorkload* nv = std::get_if<NvlsWorkload>(&s.work)) {  // what sim/nvls would otherwise refuse at run time
      const doorbell::nvls::NvlsRunConfig& c = nv->run;
      const std::string shape = doorbell::nvls::config_error(c);
      FUZZ_CHECK(s.pes <= 8 && c.calls >= 1 && shape.empty(), "nvls shape: %s", shape.c_str());
      FUZZ_CHECK(!c.sync_warp || c.warps_per_cta >= 2, "a sync warp in CTAs of one warp");
      FUZZ_CHECK(!s.phantom || c.registered == doorbell::nvls::Registered::kNone, "registered buffers on phantom memory");
    }
    return 0;
  }
  const doorbell::ibgda::Stack& st = w->stack;
  FUZZ_CHECK(st.log_qp_depth >= 3 && st.log_qp_depth <= 15 && pow2(st.num_requests_in_batch) && pow2(st.ibuf_slots), "queue sizes not powers of two");
  FUZZ_CHECK(w->ctas >= 1 && w->warps >= 1 && w->lanes >= 1 && w->lanes <= 32, "launch shape");
  FUZZ_CHECK(!w->ops.empty() || w->alltoall.bytes_per_pe != 0 || w->dispatch.experts != 0, "no workload");
  for (const Op& o : w->ops) {
    FUZZ_CHECK(o.pe < s.pes, "op on PE %u of %u", o.pe, s.pes);
    FUZZ_CHECK(o.kind == OpKind::kQuiet || o.target < s.pes, "op targets PE %u of %u", o.target, s.pes);
    FUZZ_CHECK(o.warp < int32_t(w->warps), "op on warp %d of %u", o.warp, w->warps);
    FUZZ_CHECK(o.bytes >= 1 && o.count >= 1, "empty op");
    FUZZ_CHECK(!(s.phantom && is_atomic(o.kind)), "atomics on phantom memory");
  }
  if (w->dispatch.experts != 0)
    FUZZ_CHECK(w->dispatch.experts % s.pes == 0 && w->dispatch.topk >= 1 && w->dispatch.topk <= w->dispatch.experts, "dispatch shape");
  if (w->alltoall.bytes_per_pe != 0) FUZZ_CHECK(w->alltoall.bytes_per_pe % (uint64_t(s.pes) * 8) == 0, "alltoall split");
  for (const doorbell::ibgda::WorldFault& f : w->faults) FUZZ_CHECK(f.pe < s.pes && f.target < s.pes, "fault on a PE that does not exist");
  return 0;
}
