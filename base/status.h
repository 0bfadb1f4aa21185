// Status and Result for host-side control paths: errors carry a code and a message and
// cannot be silently dropped ([[nodiscard]]). Data paths report hardware-style (syndromes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace doorbell {

enum class Errc : uint8_t {
  kOk = 0,
  kBadParam,      // a malformed argument or command field
  kBadState,      // the object is not in a state that allows this
  kNoResource,    // out of ids, memory or table slots
  kNotFound,      // unknown id / key / handle
  kNotSupported,  // the backend cannot do this at all
  kInternal,
};

const char* errc_name(Errc e);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Errc code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Errc::kOk; }
  explicit operator bool() const { return is_ok(); }
  Errc code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string to_string() const;

 private:
  Errc code_ = Errc::kOk;
  std::string msg_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}             // NOLINT: implicit on purpose
  Result(Status s) : v_(std::move(s)) {}         // NOLINT
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  Status status() const { return is_ok() ? Status{} : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

inline const char* errc_name(Errc e) {
  switch (e) {
    case Errc::kOk: return "ok";
    case Errc::kBadParam: return "bad parameter";
    case Errc::kBadState: return "bad state";
    case Errc::kNoResource: return "no resource";
    case Errc::kNotFound: return "not found";
    case Errc::kNotSupported: return "not supported";
    case Errc::kInternal: return "internal error";
  }
  return "?";
}

inline std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(errc_name(code_)) + ": " + msg_;
}

}  // namespace doorbell
