#include "hw/trace/perfetto.h"

namespace doorbell::trace {

nlohmann::ordered_json perfetto(const Event& e, uint32_t pid, double ts) {
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kMaxArgs && e.decl->keys[i] != nullptr; ++i)
    std::visit(
        [&](const auto& v) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) args[e.decl->keys[i]] = v;
        },
        e.args[i]);
  if (e.decl->phase == Phase::kCounter)
    return {{"name", e.track.empty() ? e.decl->name : e.track}, {"ph", "C"}, {"ts", ts}, {"pid", pid}, {"args", std::move(args)}};
  nlohmann::ordered_json j = {{"name", e.decl->name}, {"ph", "i"}, {"s", "p"}, {"ts", ts}, {"pid", pid}, {"tid", 0}};
  if (!args.empty()) j["args"] = std::move(args);
  return j;
}

}  // namespace doorbell::trace
