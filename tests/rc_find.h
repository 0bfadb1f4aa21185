// Run a check as a rapidcheck property until a case fails: the last failure rapidcheck saw
// (its shrunk case's), or "" when every case held. What tests of planted bugs ask.
#pragma once

#include <rapidcheck.h>

#include <functional>
#include <string>

namespace doorbell::testing {

// `run`: one generated case, what broke ("" if it held).
inline std::string first_failure(const std::string& name, const std::function<std::string()>& run) {
  std::string seen;
  const bool held = rc::check(name, [&] {
    const std::string why = run();
    if (!why.empty()) seen = why;
    RC_ASSERT(why.empty());
  });
  return held ? std::string() : seen;
}

}  // namespace doorbell::testing
