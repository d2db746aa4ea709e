// The last words of a worker that failed: the last non-empty line of its log, for the EXITED
// event's message (the coordinator appends it to the attempt's cause, so "step
// dataset-initializer exited with code 3" also says why).
//
// Reads only the end of the file (kLogTailWindow bytes), never the whole log. Pure file I/O; any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace trainlet::agent {

inline constexpr size_t kLogTailWindow = 4096;  // bytes read from the end of the log
inline constexpr size_t kMaxExitLineBytes = 256;

// The last line of `path` that holds more than whitespace, without its line ending, cut to
// `max_bytes` at a UTF-8 character boundary, with bytes that are not UTF-8 replaced by '?' (the
// message is a protobuf string). "" when the file is missing, unreadable or blank at its end.
std::string LastLogLine(const std::string& path, size_t max_bytes = kMaxExitLineBytes);

// Where a read of the log at `path` asked from `offset` starts: `offset`, or 0 when the file is
// now shorter (the rank's log was cut since, agent/step/log_rotation.h), so that `trainletctl
// logs -f` goes on with the rotation's note and what follows it.
uint64_t LogReadStart(const std::string& path, uint64_t offset);

// A slice of a rank's log, for LogRead (launch.proto).
struct LogSlice {
  std::string data;
  uint64_t next_offset = 0;
  bool eof = false;  // fewer bytes than asked: none more now
};
// At most `max_bytes` (0: 256 KiB; at most 1 MiB) of `path` from LogReadStart(path, offset);
// nullopt when the file cannot be opened.
std::optional<LogSlice> ReadLogSlice(const std::string& path, uint64_t offset, uint32_t max_bytes);

// Whether [s, s+n) starts with a whole UTF-8 character; its length, else 0.
size_t Utf8CharLength(const unsigned char* s, size_t n);

}  // namespace trainlet::agent
