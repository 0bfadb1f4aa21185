// Target 5: the scenario parser. Any text either parses into a scenario every later stage may
// trust (PEs, warps and targets that exist, powers of two where the queues need them, a
// dispatch that spreads over the PEs, ...) or fails with `file:line: message` whose line lies
// in the file. Nothing may throw past parse_text.
#include <algorithm>
#include <cstdint>
#include <string>

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
  FUZZ_CHECK(s.pes >= 1 && s.pes <= 64, "pes %u", s.pes);
  FUZZ_CHECK(pow2(s.qp_depth) && pow2(s.num_requests_in_batch) && pow2(s.ibuf_slots), "queue sizes not powers of two");
  FUZZ_CHECK(s.ctas >= 1 && s.warps >= 1 && s.lanes >= 1 && s.lanes <= 32, "launch shape");
  FUZZ_CHECK(!s.ops.empty() || s.alltoall_bytes_per_pe != 0 || s.dispatch_experts != 0, "no workload");
  for (const Op& o : s.ops) {
    FUZZ_CHECK(o.pe < s.pes, "op on PE %u of %u", o.pe, s.pes);
    FUZZ_CHECK(o.kind == OpKind::kQuiet || o.target < s.pes, "op targets PE %u of %u", o.target, s.pes);
    FUZZ_CHECK(o.warp < int32_t(s.warps), "op on warp %d of %u", o.warp, s.warps);
    FUZZ_CHECK(o.bytes >= 1 && o.count >= 1, "empty op");
    FUZZ_CHECK(!(s.phantom && is_atomic(o.kind)), "atomics on phantom memory");
  }
  if (s.dispatch_experts != 0)
    FUZZ_CHECK(s.dispatch_experts % s.pes == 0 && s.dispatch_topk >= 1 && s.dispatch_topk <= s.dispatch_experts,
               "dispatch shape");
  if (s.alltoall_bytes_per_pe != 0) FUZZ_CHECK(s.alltoall_bytes_per_pe % (uint64_t(s.pes) * 8) == 0, "alltoall split");
  for (const doorbell::ibgda::WorldFault& f : s.faults) FUZZ_CHECK(f.pe < s.pes && f.target < s.pes, "fault on a PE that does not exist");
  FUZZ_CHECK(s.expect != Expect::kErrors || !s.expect_syndrome.empty(), "expected error without a syndrome");
  return 0;
}
