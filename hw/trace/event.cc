#include "hw/trace/event.h"

namespace doorbell::trace {

std::string line(const Event& e) {
  std::string s = e.decl->name;
  for (size_t i = 0; i < kMaxArgs && e.decl->keys[i] != nullptr; ++i) {
    s += ' ';
    s += e.decl->keys[i];
    s += '=';
    std::visit(
        [&s](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, uint64_t>) s += std::to_string(v);
          else if constexpr (std::is_same_v<T, double>) s += std::to_string(v);
          else if constexpr (std::is_same_v<T, std::string>) s += v;
        },
        e.args[i]);
  }
  return s;
}

}  // namespace doorbell::trace
