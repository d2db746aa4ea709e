// Logging setup shared by the daemons: spdlog to stderr, or to the systemd journal with
// structured fields.
//
// Journal fields on every entry: MESSAGE, PRIORITY (syslog levels), SYSLOG_IDENTIFIER
// (trainlet-<component>), TRAINLET_COMPONENT, and TRAINLET_NODE once SetLogNode() was called.
// Entries logged inside a ScopedLogFields also carry TRAINLET_JOB and TRAINLET_RANK, so
// `journalctl TRAINLET_JOB=train-1` shows one job's story across agent restarts.
//
// Threading: SetUpLogging and SetLogNode are called from main before the loop starts; the
// scoped fields are thread-local.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet {

enum class LogTarget {
  kAuto,  // the journal when stderr is connected to it (JOURNAL_STREAM), else stderr
  kStderr,
  kJournal,  // the journal; stderr when this system has no journal socket
};

// "auto", "stderr", "journal". InvalidError names the value otherwise.
Result<LogTarget> ParseLogTarget(const std::string& name);
// Whether `level` is one of trace, debug, info, warn, error, critical, off.
bool IsValidLogLevel(const std::string& level);

// level: trace, debug, info, warn, error. Unknown names fall back to info.
void SetUpLogging(const std::string& component, const std::string& level,
                  LogTarget target = LogTarget::kStderr);
// The node name every later entry carries (TRAINLET_NODE).
void SetLogNode(const std::string& node);
// Where SetUpLogging sent the logs: "stderr" or "journal".
std::string ActiveLogTarget();

// TRAINLET_JOB (and TRAINLET_RANK when rank >= 0) on every entry logged by this thread while
// the object lives. Nests: the inner scope wins, the outer one returns when it ends.
class ScopedLogFields {
 public:
  explicit ScopedLogFields(const std::string& job, int64_t rank = -1);
  ~ScopedLogFields();
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

 private:
  std::string saved_job_;
  int64_t saved_rank_;
};

// The journal fields ("KEY=value") of one entry at syslog `priority` (0..7) with the fields in
// scope on this thread. What the journal sink sends; exposed for tests.
std::vector<std::string> JournalFields(int priority, const std::string& message);

}  // namespace trainlet
