#include "common/status.h"

#include <spdlog/spdlog.h>

namespace trainlet {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalid:
      return "Invalid";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kExists:
      return "AlreadyExists";
    case ErrorCode::kUnavailable:
      return "Unavailable";
    case ErrorCode::kPermission:
      return "PermissionDenied";
    case ErrorCode::kIo:
      return "IoError";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

void CheckFailed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "trainlet: invariant broken at %s:%d: %s %s\n", file, line, expr,
               msg.c_str());
  spdlog::critical("invariant broken at {}:{}: {} {}", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace trainlet
