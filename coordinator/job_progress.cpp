#include "coordinator/job_progress.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

constexpr double kMaxDurationMs = 10000.0 * 3600 * 1000;  // 10000 h

// Milliseconds per unit, or 0 for a unit Go does not know.
double UnitMs(std::string_view unit) {
  if (unit == "ns") return 1e-6;
  if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") return 1e-3;  // µ and μ
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  return 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Result<std::chrono::milliseconds> TimeoutOf(const std::string& where, const std::string& text) {
  auto d = ParseGoDuration(text);
  if (!d.ok()) return InvalidError(where + ": " + d.status().message() + ", got \"" + text + "\"");
  return *d;
}

}  // namespace

Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text) {
  const std::string why = "must be a duration such as 90s, 10m or 1h30m";
  if (text.empty()) return InvalidError(why);
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    const size_t int_digits = i - start;
    size_t frac_digits = 0;
    if (i < text.size() && text[i] == '.') {
      ++i;
      const size_t f = i;
      while (i < text.size() && IsDigit(text[i])) ++i;
      frac_digits = i - f;
    }
    if (int_digits + frac_digits == 0 || int_digits > 12) return InvalidError(why);
    const double number = std::stod(std::string(text.substr(start, i - start)));
    const size_t unit_start = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    const double unit = UnitMs(text.substr(unit_start, i - unit_start));
    if (unit == 0) return InvalidError(why + " (units ns, us, ms, s, m, h)");
    total_ms += number * unit;
  }
  if (total_ms > kMaxDurationMs) return InvalidError("must be at most 10000h");
  const auto ms = static_cast<int64_t>(std::llround(total_ms));
  if (ms <= 0) return InvalidError("must be at least 1ms");
  return std::chrono::milliseconds(ms);
}

std::string FormatSeconds(int64_t seconds) {
  seconds = std::max<int64_t>(0, seconds);
  const int64_t h = seconds / 3600, m = seconds % 3600 / 60, s = seconds % 60;
  if (h > 0) return std::to_string(h) + "h" + std::to_string(m) + "m" + std::to_string(s) + "s";
  if (m > 0) return std::to_string(m) + "m" + std::to_string(s) + "s";
  return std::to_string(s) + "s";
}

Result<StallPolicy> StallPolicyOf(const trainjob::TrainJob& job,
                                  const trainjob::TrainingRuntime& runtime) {
  StallPolicy policy;
  const std::string timeout_key(kProgressTimeoutAnnotation);
  if (auto it = job.annotations.find(timeout_key); it != job.annotations.end()) {
    TRAINLET_ASSIGN_OR_RETURN(
        policy.timeout,
        TimeoutOf("TrainJob/" + job.name + ": metadata.annotations[" + timeout_key + "]",
                  it->second));
    policy.source = timeout_key + ": " + it->second;
  } else if (auto rt = runtime.labels.find(timeout_key); rt != runtime.labels.end()) {
    TRAINLET_ASSIGN_OR_RETURN(
        policy.timeout,
        TimeoutOf(runtime.kind + "/" + runtime.name + ": metadata.labels[" + timeout_key + "]",
                  rt->second));
    policy.source = timeout_key + ": " + rt->second + " (runtime " + runtime.name + ")";
  }
  const std::string on_stall_key(kOnStallAnnotation);
  if (auto it = job.annotations.find(on_stall_key); it != job.annotations.end()) {
    if (it->second != "restart" && it->second != "none") {
      return InvalidError("TrainJob/" + job.name + ": metadata.annotations[" + on_stall_key +
                          "]: must be \"restart\" or \"none\", got \"" + it->second + "\"");
    }
    policy.restart = it->second == "restart";
  }
  return policy;
}

const char* ProgressFoldResultName(ProgressFoldResult result) {
  switch (result) {
    case ProgressFoldResult::kTaken:
      return "taken";
    case ProgressFoldResult::kUnknownJob:
      return "unknown_job";
    case ProgressFoldResult::kStaleAttempt:
      return "stale_attempt";
    case ProgressFoldResult::kForeignNode:
      return "foreign_node";
    case ProgressFoldResult::kInvalid:
      return "invalid";
  }
  TRAINLET_CHECK_MSG(false, "unknown ProgressFoldResult");
}

ProgressFoldResult FoldProgress(v1::JobStatus* status, const std::string& node,
                                const v1::JobProgress& update, int64_t now_ms) {
  if (status == nullptr) return ProgressFoldResult::kUnknownJob;
  if (update.attempt() == 0 || update.attempt() != status->attempt() ||
      IsTerminal(PhaseOf(*status)) || status->deleting()) {
    return ProgressFoldResult::kStaleAttempt;
  }
  const auto& placed = status->placement();
  if (std::find(placed.begin(), placed.end(), node) == placed.end()) {
    return ProgressFoldResult::kForeignNode;
  }
  const v1::TrainerStatus& in = update.status();
  const bool valid =
      (!in.has_progress_percentage() ||
       (in.progress_percentage() >= 0 && in.progress_percentage() <= 100)) &&
      (!in.has_estimated_remaining_seconds() || in.estimated_remaining_seconds() >= 0) &&
      in.metrics_size() <= kMaxTrainerMetrics &&
      std::all_of(in.metrics().begin(), in.metrics().end(),
                  [](const v1::TrainerMetric& m) { return !m.name().empty(); });
  if (!valid) return ProgressFoldResult::kInvalid;
  v1::TrainerStatus* ts = status->mutable_trainer_status();
  *ts = update.status();
  ts->set_attempt(update.attempt());
  ts->set_received_unix_ms(now_ms);
  if (ts->last_updated_unix_ms() <= 0) ts->set_last_updated_unix_ms(now_ms);
  return ProgressFoldResult::kTaken;
}

bool IsStalled(const v1::JobStatus& status) {
  for (const auto& c : status.conditions()) {
    if (c.type() == kConditionStalled) return c.status() == "True";
  }
  return false;
}

namespace {

// The last sign of life of the current attempt: its newest update, or when it was seen Running.
int64_t LastProgressMs(const v1::JobStatus& st, int64_t running_since_ms) {
  int64_t last = running_since_ms;
  if (st.has_trainer_status() && st.trainer_status().attempt() == st.attempt()) {
    last = std::max(last, st.trainer_status().received_unix_ms());
  }
  return last;
}

}  // namespace

int64_t StallDeadlineMs(const v1::JobStatus& st, const StallPolicy& policy,
                        int64_t running_since_ms) {
  if (policy.timeout.count() <= 0 || running_since_ms == INT64_MAX || st.deleting() ||
      PhaseOf(st) != JobPhase::kRunning || IsStalled(st)) {
    return INT64_MAX;
  }
  return LastProgressMs(st, running_since_ms) + policy.timeout.count();
}

StallVerdict JudgeStall(const v1::JobStatus& st, const StallPolicy& policy,
                        int64_t running_since_ms, int64_t now_ms) {
  StallVerdict v;
  if (policy.timeout.count() <= 0 || running_since_ms == INT64_MAX || st.deleting() ||
      PhaseOf(st) != JobPhase::kRunning) {
    return v;
  }
  const int64_t last = LastProgressMs(st, running_since_ms);
  const int64_t age_ms = std::max<int64_t>(0, now_ms - last);
  const bool stale = age_ms >= policy.timeout.count();
  const bool updated = st.has_trainer_status() && st.trainer_status().attempt() == st.attempt();
  if (stale && !IsStalled(st)) {
    v.action = StallVerdict::Action::kStalled;
    const std::string age = FormatSeconds(age_ms / 1000);
    v.message = "attempt " + std::to_string(st.attempt()) +
                (updated ? " has reported no progress for " + age
                         : " has run for " + age + " without reporting progress") +
                " (" + policy.source + ")";
  } else if (!stale && IsStalled(st)) {
    v.action = StallVerdict::Action::kResumed;
    v.message = "attempt " + std::to_string(st.attempt()) + ": " +
                (updated ? "progress reported " + FormatSeconds(age_ms / 1000) + " ago"
                         : "running since " + FormatSeconds(age_ms / 1000) + " ago");
  }
  return v;
}

void ProgressWatch::OnTaken(const std::string& job) { jobs_[job].write_pending = true; }

int64_t ProgressWatch::SeeRunning(const std::string& job, uint32_t attempt, int64_t now_ms) {
  Entry& e = jobs_[job];
  if (e.running_attempt != attempt) {
    e.running_attempt = attempt;
    e.running_since_ms = now_ms;
  }
  return e.running_since_ms;
}

int64_t ProgressWatch::RunningSince(const std::string& job, uint32_t attempt) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.running_attempt != attempt) return INT64_MAX;
  return it->second.running_since_ms;
}

bool ProgressWatch::TakeWriteDue(const std::string& job, int64_t now_ms) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.write_pending ||
      now_ms - it->second.last_write_ms < kProgressWriteInterval.count()) {
    return false;
  }
  it->second.write_pending = false;
  it->second.last_write_ms = now_ms;
  return true;
}

int64_t ProgressWatch::NextWriteMs() const {
  int64_t next = INT64_MAX;
  for (const auto& [name, e] : jobs_) {
    if (e.write_pending) next = std::min(next, e.last_write_ms + kProgressWriteInterval.count());
  }
  return next;
}

void ProgressWatch::Forget(const std::string& job) { jobs_.erase(job); }

}  // namespace trainlet::coordinator
