// A trace event as a Chrome / Perfetto trace event ("traceEvents" entry): instants on the
// process `pid`'s track, counters on the event's own track, its arguments as `args`.
#pragma once

#include <nlohmann/json.hpp>

#include "hw/trace/event.h"

namespace doorbell::trace {

nlohmann::ordered_json perfetto(const Event& e, uint32_t pid, double ts);

}  // namespace doorbell::trace
