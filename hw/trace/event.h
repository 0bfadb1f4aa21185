// Trace events, each declared once (QEMU's trace-events shape): a name read
// <component>_<area>_<event>, its phase and its arguments. An event is one value that reads as
// a log line ("name key=value ...", line()) and becomes a Chrome / Perfetto trace event
// (scenarios/replay's timeline). The NIC model, the hosts' doorbells and the timeline's
// queue counters all emit these; nothing else builds trace text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>

namespace doorbell::trace {

enum class Phase : uint8_t { kInstant, kCounter };

inline constexpr size_t kMaxArgs = 5;
struct Decl {
  const char* name;
  Phase phase;
  std::array<const char*, kMaxArgs> keys;  // null after the last
};

// The declarations: every event there is.
inline constexpr Decl kNicWqeError{"mock_nic_wqe_error", Phase::kInstant, {"qpn", "wqe", "op", "syndrome", "vendor"}};
inline constexpr Decl kNicLinkError{"mock_nic_link_error", Phase::kInstant, {"qpn", "why"}};
inline constexpr Decl kNicRetryStart{"mock_nic_retry_start", Phase::kInstant, {"qpn", "kind", "deadline_ns"}};
inline constexpr Decl kNicDoorbellDropped{"mock_nic_fault_doorbell_dropped", Phase::kInstant, {"page"}};
inline constexpr Decl kNicBadDoorbell{"mock_nic_uar_bad_doorbell", Phase::kInstant, {"page", "offset", "qpn"}};
inline constexpr Decl kNicQpErrorForced{"mock_nic_fault_qp_error", Phase::kInstant, {"qpn"}};
inline constexpr Decl kNicAsyncEvent{"mock_nic_async_event", Phase::kInstant, {"kind", "object"}};
inline constexpr Decl kHostDoorbell{"doorbell", Phase::kInstant, {"pe"}};  // a UAR store reached a NIC
inline constexpr Decl kQpIndices{"ibgda_qp_indices", Phase::kCounter, {"resv", "ready", "prod", "cons"}};
// The verbs shim's timeline of a client's queues (DOORBELL_SHIM_TRACE=file.json).
inline constexpr Decl kShimDoorbell{"verbs_shim_doorbell", Phase::kInstant, {"qpn", "dbr"}};
inline constexpr Decl kShimQpWork{"verbs_shim_qp", Phase::kCounter, {"dbr", "fetched", "wqes"}};
inline constexpr Decl kShimCqes{"verbs_shim_cq", Phase::kCounter, {"cqes", "consumer"}};

using Value = std::variant<std::monostate, uint64_t, double, std::string>;

struct Event {
  const Decl* decl = nullptr;
  std::array<Value, kMaxArgs> args{};  // in the declaration's order
  std::string track;                   // counters: the track (e.g. "qp0->pe1"); else the name
};

template <class... A>
Event make(const Decl& d, A&&... a) {
  static_assert(sizeof...(A) <= kMaxArgs, "more arguments than a trace event has");
  Event e;
  e.decl = &d;
  size_t i = 0;
  ((e.args[i++] = Value(std::forward<A>(a))), ...);
  return e;
}

// "name key=value ...": the log line.
std::string line(const Event& e);

}  // namespace doorbell::trace
