// Result<T>: a value or an Error that names what was wrong (tier two of the error model in
// docs/ARCHITECTURE.md: bad input from a file or a request). Broken invariants use T9_CHECK.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

namespace t9 {

struct Error {
  std::string message;
};

// Builds an Error with fmt formatting: return t9::error("tensor {} out of range", name);
template <typename... Args>
Error error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void> equivalent.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e.message)), failed_(true) {}  // NOLINT: implicit by design
  static Status ok_status() { return {}; }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return err_; }
  Error error() const { return Error{err_}; }

 private:
  std::string err_;
  bool failed_ = false;
};

}  // namespace t9

// Propagates an error from an expression returning Status or Result<T>.
#define T9_TRY(expr)                                        \
  do {                                                      \
    auto&& t9_try_r_ = (expr);                              \
    if (!t9_try_r_.ok()) return ::t9::Error{t9_try_r_.message()}; \
  } while (0)

#define T9_CONCAT_INNER_(a, b) a##b
#define T9_CONCAT_(a, b) T9_CONCAT_INNER_(a, b)
// T9_ASSIGN_OR_RETURN(auto x, make_x()); — binds the value or returns the error.
#define T9_ASSIGN_OR_RETURN(lhs, expr)                                          \
  auto T9_CONCAT_(t9_r_, __LINE__) = (expr);                                    \
  if (!T9_CONCAT_(t9_r_, __LINE__).ok())                                        \
    return ::t9::Error{T9_CONCAT_(t9_r_, __LINE__).message()};                  \
  lhs = std::move(T9_CONCAT_(t9_r_, __LINE__)).value()
