// Error and Result types shared by every layer of gdbtrace-server.
//
// Every fallible operation returns Result<T>. An Error carries an errno-style
// code (used for "Exx" replies) and a human-readable message (used for "E.text"
// replies and console output), so a failure deep in the target reaches the user
// in plain words instead of a bare E01.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace gdbtrace {

struct Error {
  int code = EIO;       // errno value; replies use it as "E<hex>"
  std::string message;  // for "E.message" replies and logs
};

inline Error make_error(int code, std::string message) { return Error{code, std::move(message)}; }

template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  const Error& error() const { return std::get<1>(v_); }

private:
  std::variant<T, Error> v_;
};

template <> class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

private:
  Error err_;
  bool ok_ = true;
};

inline Result<void> ok() { return {}; }

} // namespace gdbtrace
