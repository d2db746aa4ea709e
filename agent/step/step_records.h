// The events file of a step: what `trainlet-step` writes about its ranks, and what the agent (this
// one, or a restarted one) reads back. One text line per record, appended with one write(2) each:
//
//   H 1 <step pid> <step start time>     first line: format version 1 and the step process itself
//   S <rank> <pid> <start time>          rank started (pid leads its own process group)
//   F <rank> <message>                   rank could not be started; message up to the newline
//   X <rank> <pid> <exit code> <signal>  rank exited; code is 128 + signal when killed
//   D [C]                                every rank has exited: the step is done. With C, every
//                                        process its ranks started was in the ranks' cgroup,
//                                        which the step killed and saw empty: nothing of them
//                                        is left on the node (the agent's env sweep is not needed)
//
// Start times are platform::ProcessStartTime's (clock ticks since boot on Linux, microseconds
// since the epoch on macOS): with the pid they name one process across pid reuse. The file is
// read back from disk after crashes, so the parser is strict and total: bytes it does not
// understand give an error naming the byte offset, never a crash. A last line without its newline
// is not an error: it is still being written (or a crash cut it short) and is left for a later
// read.
//
// Pure functions over bytes; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::step {

inline constexpr int kStepRecordVersion = 1;
// Longer lines are refused by the parser; EncodeRecord shortens F messages to fit.
inline constexpr size_t kMaxRecordBytes = 4096;

struct StepRecord {
  enum class Kind : char {
    kHeader = 'H',
    kStarted = 'S',
    kStartFailed = 'F',
    kExited = 'X',
    kDone = 'D',
  };
  Kind kind = Kind::kDone;
  uint32_t rank = 0;
  pid_t pid = 0;            // H: the step; S, X: the rank
  uint64_t start_time = 0;  // H, S
  int exit_code = 0;        // X
  int signal = 0;           // X
  std::string message;      // F; newlines become spaces
  bool contained = false;   // D: "D C", see the header comment

  bool operator==(const StepRecord&) const = default;
};

// One line, newline included.
std::string EncodeRecord(const StepRecord& record);

// Parses the complete lines of `data` and appends them to `out`. Returns how many bytes were
// consumed (the start of an unfinished last line, or data.size()). Errors (Invalid) name the
// byte offset `base + i` of the bad line and quote its start; records before it are in `out`.
Result<size_t> ParseRecords(std::string_view data, uint64_t base, std::vector<StepRecord>* out);

}  // namespace trainlet::step
