// Errors as values across module boundaries: every fallible call returns Result<T> (no exceptions escape shared/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace allocscope {

// An error says what was expected and where: `offset` is the byte offset in the input (or kNoOffset).
struct Error {
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  std::string message;
  uint64_t offset = kNoOffset;
  // The offset counts the bytes of the pickle inflated from a .gz, not the file's: said, since a reader of a .gz's
  // error would look for that byte in the file.
  bool in_inflated = false;
  // The offset is in a JSON snapshot's text, and near the value at fault rather than on it: a JSON snapshot is read
  // as the pickle it stands for (json_snapshot.h), and errors raised on that pickle name the nearest JSON byte known.
  bool in_json = false;

  // "at byte 1234: expected ..., found ..." — the form users see on the CLI and in the viewer.
  std::string describe() const {
    if (offset == kNoOffset) return message;
    if (in_json)
      return "near byte " + std::to_string(offset) + (in_inflated ? " of the inflated JSON" : " of the JSON") + ": " +
             message;
    return "at byte " + std::to_string(offset) + (in_inflated ? " of the inflated pickle" : "") + ": " + message;
  }
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}        // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: ok or an error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : e_(std::move(e)) {}  // NOLINT
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

}  // namespace allocscope

#define ALLOCSCOPE_RETURN_IF_ERROR(expr)            \
  do {                                              \
    auto _st = (expr);                              \
    if (!_st.ok()) return _st.error();              \
  } while (0)
