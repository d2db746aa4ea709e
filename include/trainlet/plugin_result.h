// What a plugin call returns: a value, or why there is none. Public, like the plugin interfaces
// that use it, so a plugin builds against include/trainlet/ (and the generated trainlet/v1/
// messages) alone, without trainlet's internal headers.
//
// The codes mirror trainlet's internal error kinds one for one; the daemons convert at the plugin
// boundary (plugins/plugin_status.h), so a plugin's code and message reach the user unchanged.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace trainlet {

enum class PluginErrorCode {
  kOk = 0,
  kInvalid,      // the job's spec or the node's data is wrong; the message names the field
  kNotFound,     // a named thing (a file, a device) does not exist
  kExists,       // a named thing already exists
  kUnavailable,  // a source cannot be reached now (a vendor library, a tool); retrying may help
  kPermission,   // refused by the operating system or a peer
  kIo,           // a file could not be read
  kInternal,     // a bug, or an unexpected failure of a library call
};

// "Invalid", "Internal", ...: the same words trainlet's own errors print.
inline const char* PluginErrorCodeName(PluginErrorCode code) {
  switch (code) {
    case PluginErrorCode::kOk:
      return "OK";
    case PluginErrorCode::kInvalid:
      return "Invalid";
    case PluginErrorCode::kNotFound:
      return "NotFound";
    case PluginErrorCode::kExists:
      return "AlreadyExists";
    case PluginErrorCode::kUnavailable:
      return "Unavailable";
    case PluginErrorCode::kPermission:
      return "PermissionDenied";
    case PluginErrorCode::kIo:
      return "IoError";
    case PluginErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

// OK, or an error code and a message that says what failed, naming the field, file or node, so
// the caller can show it to a user unchanged.
class [[nodiscard]] PluginStatus {
 public:
  PluginStatus() = default;
  PluginStatus(PluginErrorCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == PluginErrorCode::kOk; }
  PluginErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Invalid: spec.trainer.command: no command to run"
  std::string ToString() const {
    return ok() ? "OK" : std::string(PluginErrorCodeName(code_)) + ": " + message_;
  }

 private:
  PluginErrorCode code_ = PluginErrorCode::kOk;
  std::string message_;
};

// A value, or the PluginStatus that explains why there is none. An OK status without a value is a
// bug in the plugin and aborts.
template <typename T>
class [[nodiscard]] PluginResult {
 public:
  PluginResult(T value) : v_(std::move(value)) {}              // NOLINT: implicit by design
  PluginResult(PluginStatus status) : v_(std::move(status)) {  // NOLINT
    if (std::get<PluginStatus>(v_).ok()) std::abort();
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const PluginStatus& status() const {
    static const PluginStatus kOk;
    return ok() ? kOk : std::get<PluginStatus>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, PluginStatus> v_;
};

}  // namespace trainlet
