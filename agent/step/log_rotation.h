// LogRotation: caps the size of each rank's log (issue 19, defect 9: a rank that wrote 1 GB kept
// it on disk).
//
// Ranks write their logs themselves, through descriptors opened O_APPEND (OpenWorkerLog), so a
// log cannot be renamed away under them. It is cut by copy-truncate, as logrotate's copytruncate:
// once a log passes `max_bytes`, its content is copied to `<log>.1` (replacing the previous
// `.1`), the log is truncated to 0, and a line is appended saying where it was cut:
//   [trainlet] log rotated at N bytes, earlier output in rank-0.log.1
// Appends after the truncate land at the new end (O_APPEND), so the file never goes sparse.
// What the rank wrote while the copy was closed and renamed into place is copied after it, and
// the log is truncated right after that second copy reaches its end: only a write that lands in
// between (microseconds; logrotate's copytruncate leaves milliseconds) is lost.
// A log's disk use stays below about 2 x (max_bytes + what a rank writes between two checks).
//
// Owned by the step's loop (step_runner.cpp), which calls Check every kCheckIntervalMs while
// ranks run. No threads; pure file I/O. Errors (a full disk) are returned as text for the step to
// say; the log is then left as it is and tried again at the next check.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace trainlet::step {

class LogRotation {
 public:
  static constexpr int kCheckIntervalMs = 100;

  // `max_bytes` 0: no cap (Check does nothing).
  explicit LogRotation(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  bool enabled() const { return max_bytes_ != 0 && !paths_.empty(); }
  // Watches the log at `path` ("" is ignored: a discarded log).
  void Watch(const std::string& path) {
    if (!path.empty()) paths_.insert(path);
  }
  // The log's writer is gone (its rank reaped, with its process group): it cannot grow any more,
  // so it is not cut again, and its last lines stay in the file `logs` reads. A cut after the
  // last write only moved the tail into <log>.1 and left the note alone in the log.
  void Unwatch(const std::string& path) { paths_.erase(path); }
  // Rotates every watched log longer than max_bytes; a message per failure, each said once
  // while it repeats (a full disk fails every check).
  std::vector<std::string> Check();

  // Copies `path` to `<path>.1`, truncates it and appends the note. The note's N is the size
  // copied.
  // `meanwhile` runs once the first copy is in place, before the catch-up (tests write there
  // as a rank would).
  static std::string Rotate(const std::string& path,
                            const std::function<void()>& meanwhile = nullptr);
  // The note Rotate appends, for `bytes` copied to `rotated` (a file name, no directory).
  static std::string Note(uint64_t bytes, const std::string& rotated);

 private:
  uint64_t max_bytes_;
  std::set<std::string> paths_;
  std::map<std::string, std::string> last_error_;  // by path: the failure said last
};

}  // namespace trainlet::step
