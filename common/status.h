// Error policy (see README "Errors"):
//  - Failures that come from outside (a file, the network, an operator, a worker) or that are
//    likely are returned as values: `Status` or `Result<T>`. Their message says what failed and
//    names the field, flag, path or peer involved, so it can be shown to a user unchanged.
//  - A broken invariant is a bug: TRAINLET_CHECK logs and aborts the process loudly.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace trainlet {

enum class ErrorCode {
  kOk = 0,
  kInvalid,      // bad input: a file, a flag, a message
  kNotFound,     // a named thing does not exist
  kExists,       // a named thing already exists
  kUnavailable,  // a peer or resource cannot be reached now; retrying may help
  kPermission,   // authentication or authorisation refused
  kIo,           // the file system failed
  kInternal,     // unexpected failure of a library call
};

const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Invalid: spec.trainer.numNodes: must be >= 1"
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidError(std::string m) { return {ErrorCode::kInvalid, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status PermissionError(std::string m) { return {ErrorCode::kPermission, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status InternalError(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) std::abort();   // an OK status carries no value: a bug
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace trainlet

// A broken invariant: a bug in trainlet, never bad input. Aborts with the location.
#define TRAINLET_CHECK(cond)                                             \
  do {                                                                   \
    if (!(cond)) ::trainlet::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define TRAINLET_CHECK_MSG(cond, msg)                                       \
  do {                                                                      \
    if (!(cond)) ::trainlet::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

// Returns the Status from the enclosing function when it is not OK.
#define TRAINLET_RETURN_IF_ERROR(expr) \
  do {                                 \
    ::trainlet::Status _st = (expr);   \
    if (!_st.ok()) return _st;         \
  } while (0)

#define TRAINLET_CONCAT_INNER(a, b) a##b
#define TRAINLET_CONCAT(a, b) TRAINLET_CONCAT_INNER(a, b)
// TRAINLET_ASSIGN_OR_RETURN(auto x, Foo()); returns Foo()'s Status when it failed.
#define TRAINLET_ASSIGN_OR_RETURN(lhs, expr) \
  TRAINLET_ASSIGN_OR_RETURN_IMPL(TRAINLET_CONCAT(_res_, __LINE__), lhs, expr)
#define TRAINLET_ASSIGN_OR_RETURN_IMPL(res, lhs, expr) \
  auto res = (expr);                                   \
  if (!res.ok()) return res.status();                  \
  lhs = std::move(res).value()
