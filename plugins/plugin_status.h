// The adapter between the public plugin results (trainlet/plugin_result.h) and trainlet's own
// Status and Result (common/status.h). Plugins built into trainlet use Status inside and convert
// at their interface; the daemons convert back where they call a plugin. The codes map one for
// one, so nothing is lost either way. Pure functions; any thread.
#pragma once

#include <utility>

#include "common/status.h"
#include "trainlet/plugin_result.h"

namespace trainlet {

inline PluginErrorCode ToPluginErrorCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return PluginErrorCode::kOk;
    case ErrorCode::kInvalid:
      return PluginErrorCode::kInvalid;
    case ErrorCode::kNotFound:
      return PluginErrorCode::kNotFound;
    case ErrorCode::kExists:
      return PluginErrorCode::kExists;
    case ErrorCode::kUnavailable:
      return PluginErrorCode::kUnavailable;
    case ErrorCode::kPermission:
      return PluginErrorCode::kPermission;
    case ErrorCode::kIo:
      return PluginErrorCode::kIo;
    case ErrorCode::kInternal:
      return PluginErrorCode::kInternal;
  }
  return PluginErrorCode::kInternal;
}

// A code outside the enum (a plugin that cast one up) reads as Internal.
inline ErrorCode ToErrorCode(PluginErrorCode code) {
  switch (code) {
    case PluginErrorCode::kOk:
      return ErrorCode::kOk;
    case PluginErrorCode::kInvalid:
      return ErrorCode::kInvalid;
    case PluginErrorCode::kNotFound:
      return ErrorCode::kNotFound;
    case PluginErrorCode::kExists:
      return ErrorCode::kExists;
    case PluginErrorCode::kUnavailable:
      return ErrorCode::kUnavailable;
    case PluginErrorCode::kPermission:
      return ErrorCode::kPermission;
    case PluginErrorCode::kIo:
      return ErrorCode::kIo;
    case PluginErrorCode::kInternal:
      return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}

inline PluginStatus ToPluginStatus(const Status& status) {
  if (status.ok()) return PluginStatus();
  return PluginStatus(ToPluginErrorCode(status.code()), status.message());
}

inline Status ToStatus(const PluginStatus& status) {
  if (status.ok()) return Status::Ok();
  return Status(ToErrorCode(status.code()), status.message());
}

template <typename T>
PluginResult<T> ToPluginResult(Result<T> result) {
  if (!result.ok()) return ToPluginStatus(result.status());
  return std::move(result).value();
}

template <typename T>
Result<T> ToResult(PluginResult<T> result) {
  if (!result.ok()) return ToStatus(result.status());
  return std::move(result).value();
}

}  // namespace trainlet
