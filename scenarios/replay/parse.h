// Reading scenario files. Every mistake is reported as `file:line: message` — unknown keys
// (with the keys that are known), wrong types, out-of-range values, unknown ops, PEs that
// do not exist — and nothing runs.
#pragma once

#include <string>

#include "base/status.h"
#include "scenarios/replay/scenario.h"

namespace doorbell::scenario {

Result<Scenario> parse_file(const std::string& path);
Result<Scenario> parse_text(const std::string& text, const std::string& file_name);

}  // namespace doorbell::scenario
