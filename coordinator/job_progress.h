// Training progress on the coordinator's side: folding what agents forward (ProgressReport) into
// a job's status, and the stall rule that watches it.
//
// The ranks post Kubeflow's trainerStatus to their own agent (agent/, issue 15); the agent sends
// the newest per (job, attempt) in one ProgressReport envelope per batch. FoldProgress takes one
// update into JobStatus.trainer_status when it is of the job's current attempt and comes from a
// node of its placement, else says why it was dropped.
//
// Write rate. A progress update changes memory at once (the operator API reads memory, so
// `get trainjobs` shows it on the next request), but it is not written to the store on every
// report: 64 ranks posting every 100 ms, batched per agent, are still one report per agent per
// batch, i.e. many store writes a second for one job if each were written, each an fsync in WAL
// mode. ProgressWatch coalesces them: a job whose only change is its progress is written at most
// once per kProgressWriteInterval (1 s). A job changed for any other reason is written by Flush as
// before, progress included. What a coordinator crash can lose is at most the last second of
// progress, which the next post restores.
//
// Stall rule (trainlet's, not Kubeflow's). A TrainJob with annotation
// `trainlet.io/progress-timeout: <Go duration>` (else the label of that name on its runtime) that
// is Running with no progress update of its current attempt for that long gets condition
// Stalled=True (reason ProgressTimeout, the message naming the age) and a Warning event. When an
// update arrives, or a new attempt reaches Running, it goes back to False (reason
// ProgressResumed). With `trainlet.io/on-stall: restart` the attempt also fails with cause
// "Stalled: ...", so the normal restart path (maxRestarts, backoff) places a new attempt. Before
// the first update the clock runs from the moment the attempt was seen Running; after a
// coordinator restart, from the moment the restarted coordinator first saw it Running (it gives a
// stalled job one more timeout rather than restarting a healthy one for an update it never saw).
//
// Pure functions, and ProgressWatch, which is owned by JobController on the coordinator's loop
// (no locks).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "trainlet/v1/operator.pb.h"
#include "trainlet/v1/progress.pb.h"

namespace trainlet::coordinator {

// TrainJob annotation (or, as a default for its jobs, runtime label) that turns on stall
// detection: how long a Running job may go without a progress update.
inline constexpr std::string_view kProgressTimeoutAnnotation = "trainlet.io/progress-timeout";
// TrainJob annotation: what a stall does. "restart": fail the attempt (cause Stalled), so the
// gang restarts within maxRestarts. "none" (the default): only the condition and the event.
inline constexpr std::string_view kOnStallAnnotation = "trainlet.io/on-stall";
inline constexpr std::string_view kConditionStalled = "Stalled";
inline constexpr std::string_view kReasonProgressTimeout = "ProgressTimeout";
inline constexpr std::string_view kReasonProgressResumed = "ProgressResumed";
// A job whose only change is progress is written at most this often.
inline constexpr std::chrono::milliseconds kProgressWriteInterval{1000};

// A Go duration ("90s", "10m", "1h30m", "1.5h", "250ms"): one or more <decimal><unit> with unit
// ns, us, µs, ms, s, m or h, no sign, no spaces. Invalid for anything else, and for a total of 0
// or over 10000 h. The message says what is wrong, for the caller to prefix with the field.
Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text);
// "3m10s", "45s", "2h0m5s": the Go-like form trainlet prints durations in (whole seconds).
std::string FormatSeconds(int64_t seconds);

struct StallPolicy {
  std::chrono::milliseconds timeout{0};  // 0: stall detection off
  bool restart = false;                  // on-stall: restart
  std::string
      source;  // where the timeout came from, for messages: "trainlet.io/progress-timeout: 10m"
};
// The stall policy of `job` on `runtime`. Invalid, naming the annotation (or the runtime's
// label) and the value, when a timeout is not a Go duration or on-stall is neither "restart"
// nor "none"; Apply refuses the file then.
Result<StallPolicy> StallPolicyOf(const trainjob::TrainJob& job,
                                  const trainjob::TrainingRuntime& runtime);

// What FoldProgress did with one update.
enum class ProgressFoldResult {
  kTaken,         // trainer_status was set
  kUnknownJob,    // no such job (deleted, never applied)
  kStaleAttempt,  // of another attempt than the current one, or the job has finished
  kForeignNode,   // the sending node holds no rank of the attempt
  kInvalid,       // outside Kubeflow's limits, which the agent should have enforced
};
// Kubeflow's limits on one trainerStatus (the agent enforces them; the coordinator checks again,
// as it trusts no peer's message to be well formed).
inline constexpr int kMaxTrainerMetrics = 256;
// "taken", "unknown_job", "stale_attempt", "foreign_node", "invalid": the metric label.
const char* ProgressFoldResultName(ProgressFoldResult result);
// Takes `update`, sent by `node`, into `status` (null: the job is unknown) when it is of the
// current attempt, the job has not finished, `node` is in its placement and the status is within
// Kubeflow's limits (percentage 0-100, remaining seconds >= 0, at most kMaxTrainerMetrics
// metrics, each with a name): trainer_status becomes the update's status, stamped with the
// attempt and `now_ms` (received_unix_ms).
ProgressFoldResult FoldProgress(v1::JobStatus* status, const std::string& node,
                                const v1::JobProgress& update, int64_t now_ms);

// What the stall rule says of one job now.
struct StallVerdict {
  enum class Action {
    kNone,     // nothing changes
    kStalled,  // set Stalled=True (and, with restart, fail the attempt)
    kResumed,  // set Stalled=False
  };
  Action action = Action::kNone;
  std::string message;  // the condition's and event's message
};
// The rule for `status` under `policy` at `now_ms`, the current attempt having been seen Running
// since `running_since_ms`. Only a Running job can stall or resume; a finished or restarting job
// keeps its condition as it is.
StallVerdict JudgeStall(const v1::JobStatus& status, const StallPolicy& policy,
                        int64_t running_since_ms, int64_t now_ms);
// When JudgeStall would next say kStalled for `status` (INT64_MAX: not while nothing changes).
int64_t StallDeadlineMs(const v1::JobStatus& status, const StallPolicy& policy,
                        int64_t running_since_ms);
// True when `status` has condition Stalled=True.
bool IsStalled(const v1::JobStatus& status);

// Per-job bookkeeping of the progress rules that is not part of the stored status: when the
// current attempt was first seen Running (the stall clock before any update), and whether a
// progress update waits to be written. Jobs are keyed by name; Forget drops one.
class ProgressWatch {
 public:
  // Records that `job` took a progress update at `now_ms`.
  void OnTaken(const std::string& job);
  // Once per Schedule for each job: notes when `attempt` was first seen Running. Returns the
  // moment the stall clock of that attempt started.
  int64_t SeeRunning(const std::string& job, uint32_t attempt, int64_t now_ms);
  // The moment SeeRunning recorded for `attempt`, or INT64_MAX when it has not seen it Running.
  int64_t RunningSince(const std::string& job, uint32_t attempt) const;
  // True when `job` has an unwritten progress update and its last progress write is at least
  // kProgressWriteInterval old; the caller marks the job dirty, and this records the write.
  bool TakeWriteDue(const std::string& job, int64_t now_ms);
  // When the next coalesced write is due (INT64_MAX: none waits).
  int64_t NextWriteMs() const;
  void Forget(const std::string& job);

 private:
  struct Entry {
    uint32_t running_attempt = 0;  // 0: not seen Running
    int64_t running_since_ms = 0;
    bool write_pending = false;
    int64_t last_write_ms = INT64_MIN / 2;  // a first update is written at once
  };
  std::unordered_map<std::string, Entry> jobs_;  // looked up for every job on every pass
};

}  // namespace trainlet::coordinator
