// The Status of a failed system call, for the parts of common/platform that return Status: the
// errno values a caller can act on get their own codes, the rest the caller's `otherwise`.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "common/status.h"

namespace trainlet::platform {

// "`what`: strerror(err)", as NotFound (ENOENT, ENOTDIR), Permission (EACCES, EPERM) or
// `otherwise`. `what` names the path, or the call that failed.
inline Status ErrnoStatus(int err, std::string what, ErrorCode otherwise) {
  what += ": ";
  what += std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status(ErrorCode::kNotFound, std::move(what));
    case EACCES:
    case EPERM:
      return Status(ErrorCode::kPermission, std::move(what));
    default:
      return Status(otherwise, std::move(what));
  }
}

}  // namespace trainlet::platform
