// Small private files replaced whole: the step's launch file and an exec session's record. Each
// is written to `path`.tmp (0600, created or truncated), then renamed over `path`, so a reader
// (a restarted agent) sees the old file or the new one, never half of one. Not fsync'd: what
// they guard against is the agent dying, and the page cache outlives it.
//
// Plain libc (trainlet-step uses it); safe from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace trainlet::step {

// Writes all of `text` to `fd` (a file just created at `path`) and closes it; on a failure the
// file is removed. Errors (Io) read "<what> <path>: <errno text>" (ENOSPC for a write of 0).
Status WriteNewFile(int fd, const std::string& path, const std::string& text,
                    const std::string& what);

// Errors (Io) read "<what> <path>: <errno text>", naming the temporary file when writing it failed.
Status ReplaceFile(const std::string& path, const std::string& text, const std::string& what);

// The whole file. Errors: NotFound when missing and Io when unreadable, "<what> <path>: ...";
// Invalid when it is larger than `max_bytes`. `follow_links` false: a symbolic link at `path` is
// refused (Io, ELOOP) rather than read through.
Result<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes,
                                    const std::string& what, bool follow_links = true);

}  // namespace trainlet::step
