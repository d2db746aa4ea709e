#include "coordinator/lifecycle_rules.h"

#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/trainjob/yaml_support.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// The TrainJob document with spec.suspend removed, re-emitted, so two documents that differ only
// in suspend compare equal. For the comparison only: yaml-cpp's own emitter writes every scalar
// plain, so `cpu: 1` and `cpu: "1"` compare equal, as they did for a spec a suspend rewrote before
// WithSuspend kept types (a re-apply of such a job's file still matches). Never stored.
Result<std::string> WithoutSuspend(const std::string& yaml) {
  try {
    YAML::Node doc = YAML::Load(yaml);
    YAML::Node spec = doc["spec"];
    if (spec.IsMap()) spec.remove("suspend");
    YAML::Emitter out;
    out << doc;
    return std::string(out.c_str());
  } catch (const YAML::Exception& e) {
    return InvalidError(std::string("stored TrainJob no longer parses: ") + e.what());
  }
}

// The first field where two TrainJob documents differ, as a path ("spec.trainer.numNodes",
// "spec.trainer.command[2]", "metadata.labels"); "" when they are the same. Scalars compare as
// text, as WithoutSuspend's documents do.
std::string FirstDifference(const YAML::Node& a, const YAML::Node& b, const std::string& path) {
  if (a.Type() != b.Type()) return path;
  if (a.IsScalar()) return a.Scalar() == b.Scalar() ? "" : path;
  auto at = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (a.IsSequence()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      std::string d = FirstDifference(a[i], b[i], path + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
    return a.size() == b.size() ? ""
                                : path + "[" + std::to_string(std::min(a.size(), b.size())) + "]";
  }
  if (!a.IsMap()) return "";
  for (const auto& kv : a) {
    const std::string key = kv.first.Scalar();
    const YAML::Node other = b[key];
    if (!other.IsDefined()) return at(key);
    std::string d = FirstDifference(kv.second, other, at(key));
    if (!d.empty()) return d;
  }
  for (const auto& kv : b) {
    if (!a[kv.first.Scalar()].IsDefined()) return at(kv.first.Scalar());
  }
  return "";
}

// The signals a warning may be, by name. SIGKILL and SIGSTOP are absent: no rank can catch them.
constexpr std::array<std::pair<const char*, int>, 14> kSignals = {{
    {"HUP", SIGHUP},
    {"INT", SIGINT},
    {"QUIT", SIGQUIT},
    {"ABRT", SIGABRT},
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},
    {"ALRM", SIGALRM},
    {"TERM", SIGTERM},
    {"CONT", SIGCONT},
    {"URG", SIGURG},
    {"XCPU", SIGXCPU},
    {"VTALRM", SIGVTALRM},
    {"WINCH", SIGWINCH},
}};

bool AllDigits(const std::string& text, size_t max_len) {
  return !text.empty() && text.size() <= max_len &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int> ParseSignal(std::string text) {
  if (AllDigits(text, 2)) {
    const int n = std::atoi(text.c_str());
    for (const auto& [name, number] : kSignals) {
      if (number == n) return n;
    }
    return std::nullopt;
  }
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (text.starts_with("SIG")) text.erase(0, 3);
  for (const auto& [name, number] : kSignals) {
    if (text == name) return number;
  }
  return std::nullopt;
}

}  // namespace

std::string SignalName(int signal) {
  for (const auto& [name, number] : kSignals) {
    if (number == signal) return std::string("SIG") + name;
  }
  return "signal " + std::to_string(signal);
}

Result<StopWarning> StopWarningOf(const trainjob::TrainJob& job,
                                  std::chrono::milliseconds default_grace) {
  StopWarning warning{SIGUSR1, static_cast<uint32_t>(std::clamp<int64_t>(
                                   default_grace.count(), 0, kMaxPreemptionGraceSeconds * 1000))};
  auto where = [&](std::string_view annotation) {
    return "TrainJob/" + job.name + ": metadata.annotations[" + std::string(annotation) + "]: ";
  };
  if (auto it = job.annotations.find(std::string(kPreemptionSignalAnnotation));
      it != job.annotations.end()) {
    const std::optional<int> signal = ParseSignal(it->second);
    if (!signal) {
      return InvalidError(where(kPreemptionSignalAnnotation) +
                          "must be a catchable signal such as SIGUSR1, USR2 or " +
                          std::to_string(SIGUSR2) + ", got \"" + it->second + "\"");
    }
    warning.signal = *signal;
  }
  if (auto it = job.annotations.find(std::string(kPreemptionGraceAnnotation));
      it != job.annotations.end()) {
    const std::string& text = it->second;
    const long seconds = AllDigits(text, 5) ? std::strtol(text.c_str(), nullptr, 10) : -1;
    if (seconds < 0 || seconds > kMaxPreemptionGraceSeconds) {
      return InvalidError(where(kPreemptionGraceAnnotation) + "must be an integer from 0 to " +
                          std::to_string(kMaxPreemptionGraceSeconds) + " (seconds), got \"" + text +
                          "\"");
    }
    warning.grace_ms = static_cast<uint32_t>(seconds * 1000);
  }
  if (auto it = job.annotations.find(std::string(kDeadlineWarningAnnotation));
      it != job.annotations.end() && it->second != "true" && it->second != "false") {
    return InvalidError(where(kDeadlineWarningAnnotation) +
                        "must be \"true\" or \"false\", got \"" + it->second + "\"");
  }
  return warning;
}

StopWarning JobStopWarning(const trainjob::TrainJob& job, std::chrono::milliseconds default_grace) {
  auto warning = StopWarningOf(job, default_grace);
  if (warning.ok()) return *warning;
  trainjob::TrainJob bare;
  bare.name = job.name;
  return *StopWarningOf(bare, default_grace);
}

std::string WarningMessage(const StopWarning& warning, const std::string& why) {
  const std::string grace = warning.grace_ms % 1000 == 0
                                ? std::to_string(warning.grace_ms / 1000) + " s"
                                : std::to_string(warning.grace_ms) + " ms";
  return SignalName(warning.signal) + " sent to every rank; SIGTERM in " + grace +
         (why.empty() ? "" : " (" + why + ")");
}

bool DeadlineWarningWanted(const trainjob::TrainJob& job, bool by_default) {
  if (auto it = job.annotations.find(std::string(kDeadlineWarningAnnotation));
      it != job.annotations.end()) {
    return it->second == "true";
  }
  return by_default || job.annotations.contains(std::string(kPreemptionSignalAnnotation)) ||
         job.annotations.contains(std::string(kPreemptionGraceAnnotation));
}

int64_t DeadlineWarningMs(const trainjob::TrainJob& spec, const v1::JobStatus& st,
                          const StopWarning& warning, bool wanted) {
  const JobPhase phase = PhaseOf(st);
  if (!wanted || DeadlineWarned(st) || warning.signal == 0 || st.deleting() ||
      !spec.active_deadline_seconds ||
      (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) {
    return INT64_MAX;
  }
  const int64_t deadline = ActiveDeadlineMs(spec, st.created_unix_ms());
  const int64_t lead =
      std::min<int64_t>(warning.grace_ms, int64_t{*spec.active_deadline_seconds} * 1000 / 2);
  return deadline == INT64_MAX ? INT64_MAX : deadline - lead;
}

std::vector<std::pair<std::string, std::string>> RestartEnv(const v1::JobStatus& st) {
  std::vector<std::pair<std::string, std::string>> env;
  if (st.preempted()) {
    env.emplace_back("TRAINLET_PREEMPTED", "1");
    env.emplace_back("TRAINLET_RESTART_REASON", "preempted");
    return env;
  }
  if (st.attempts_size() == 0) return env;
  const auto& last = st.attempts(st.attempts_size() - 1);
  if (last.attempt_result() == v1::ATTEMPT_RESULT_FAILED) {
    env.emplace_back("TRAINLET_RESTART_REASON", "failed");
  } else if (last.attempt_result() == v1::ATTEMPT_RESULT_STOPPED) {
    env.emplace_back("TRAINLET_RESTART_REASON", "suspended");
  }
  return env;
}

Result<uint32_t> RestartLimit(const trainjob::TrainJob& job,
                              const trainjob::TrainingRuntime& runtime) {
  auto it = job.annotations.find(std::string(kMaxRestartsAnnotation));
  if (it == job.annotations.end()) return static_cast<uint32_t>(std::max(0, runtime.max_restarts));
  const std::string& text = it->second;
  const bool digits =
      !text.empty() && text.size() <= 4 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long value = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (value < 0 || value > kMaxRestartsLimit) {
    return InvalidError("TrainJob/" + job.name + ": metadata.annotations[" +
                        std::string(kMaxRestartsAnnotation) + "]: must be an integer from 0 to " +
                        std::to_string(kMaxRestartsLimit) + ", got \"" + text + "\"");
  }
  return static_cast<uint32_t>(value);
}

std::chrono::milliseconds RestartBackoff(uint32_t restarts_used, std::chrono::milliseconds first,
                                         std::chrono::milliseconds max) {
  const int shift = static_cast<int>(std::min<uint32_t>(restarts_used, 16));
  return std::min(first * (1 << shift), max);
}

int64_t RestartHoldMs(int64_t last_heard_ms, std::chrono::milliseconds partition_grace,
                      uint32_t stop_grace_ms) {
  return last_heard_ms + partition_grace.count() + int64_t{stop_grace_ms} + kRestartHoldMarginMs;
}

int64_t TtlDeleteMs(const trainjob::TrainingRuntime& runtime,
                    std::optional<std::chrono::seconds> default_ttl, int64_t finished_ms) {
  int64_t seconds = -1;
  if (runtime.ttl_seconds_after_finished) {
    seconds = std::max<int32_t>(0, *runtime.ttl_seconds_after_finished);
  } else if (default_ttl) {
    seconds = std::max<int64_t>(0, default_ttl->count());
  }
  if (seconds < 0) return 0;
  if (seconds > (INT64_MAX - finished_ms) / 1000) return 0;  // too far away to count: kept
  return std::max<int64_t>(1, finished_ms + seconds * 1000);
}

std::vector<std::string> NodesThatRan(const v1::JobStatus& st) {
  std::set<std::string> nodes;
  for (const auto& a : st.attempts()) nodes.insert(a.rank_nodes().begin(), a.rank_nodes().end());
  for (const auto& r : st.ranks()) nodes.insert(r.node());
  nodes.erase("");
  return {nodes.begin(), nodes.end()};
}

bool RankEnded(const v1::RankStatus& r) { return !IsRankActive(r.rank_state()); }

int64_t ActiveDeadlineMs(const trainjob::TrainJob& spec, int64_t created_unix_ms) {
  if (!spec.active_deadline_seconds) return INT64_MAX;
  const int64_t seconds = std::max<int64_t>(0, *spec.active_deadline_seconds);
  // Far-future deadlines (the CRD allows any int64) must not overflow.
  if (seconds > (INT64_MAX - created_unix_ms) / 1000) return INT64_MAX;
  return created_unix_ms + seconds * 1000;
}

int64_t StartDeadlineMs(const v1::JobStatus& st, std::chrono::milliseconds start_timeout) {
  if (PhaseOf(st) != JobPhase::kStarting || st.deleting() || st.attempts_size() == 0) {
    return INT64_MAX;
  }
  const auto& rec = st.attempts(st.attempts_size() - 1);
  if (AttemptEnded(rec)) return INT64_MAX;
  // Ranks held by a step's dependency count from its last progress (attempt_steps.h).
  const std::optional<int64_t> from = StartClockMs(st, rec.started_unix_ms());
  return from ? *from + start_timeout.count() : INT64_MAX;
}

void EndAttemptRecord(v1::JobStatus& st, AttemptTrigger result, const std::string& cause,
                      int64_t now_ms) {
  if (st.attempts_size() == 0) return;
  auto* rec = st.mutable_attempts(st.attempts_size() - 1);
  if (AttemptEnded(*rec)) return;
  TRAINLET_CHECK(ApplyAttemptTrigger(*rec, result).ok());
  rec->set_cause(cause);
  rec->set_ended_unix_ms(now_ms);
}

Result<SuspendFlip> PrepareSuspend(const v1::JobStatus& st, bool suspend, std::string spec_yaml,
                                   const std::string& how, int64_t now_ms) {
  const JobPhase phase = PhaseOf(st);
  const std::string verb = suspend ? "suspended" : "resumed";
  if (IsTerminal(phase)) {
    return InvalidError("trainjob/" + st.name() + " is " + JobPhaseName(phase) +
                        ": a finished job cannot be " + verb);
  }
  if (st.deleting()) {
    return InvalidError("trainjob/" + st.name() + " is being deleted: it cannot be " + verb);
  }
  SuspendFlip flip{st.name(), suspend, std::move(spec_yaml), st, StopWarning{}};
  Status s;
  if (suspend) {
    // A suspend is not a failure: the attempt ends "Stopped" and no restart is used up.
    EndAttemptRecord(flip.status, AttemptTrigger::kStopped, "suspended", now_ms);
    s = ApplyTransition(flip.status, JobTrigger::kSuspend, std::string(kReasonSuspended),
                        "suspended by " + how + "; every rank is stopped", now_ms);
  } else {
    s = ApplyTransition(flip.status, JobTrigger::kResume, std::string(kReasonResumed),
                        "resumed by " + how + "; a new attempt starts once the gang is placed",
                        now_ms);
  }
  if (!s.ok()) return s;
  return flip;
}

Result<SuspendFlip> PreparePreemption(const v1::JobStatus& st, std::string spec_yaml,
                                      const std::string& by, const StopWarning& warning,
                                      int64_t now_ms) {
  const JobPhase phase = PhaseOf(st);
  if (phase == JobPhase::kSuspended) {
    return InvalidError("trainjob/" + st.name() + " is Suspended: there is nothing to preempt");
  }
  TRAINLET_ASSIGN_OR_RETURN(SuspendFlip flip,
                            PrepareSuspend(st, true, std::move(spec_yaml), "preemption", now_ms));
  // PrepareSuspend's edits, re-worded as a preemption's: the same moves, Kueue's reason.
  flip.status = st;
  const bool ranks_run = std::any_of(st.ranks().begin(), st.ranks().end(),
                                     [](const auto& r) { return !RankEnded(r); });
  const std::string cause = "preempted by " + by;
  EndAttemptRecord(flip.status, AttemptTrigger::kStopped, cause, now_ms);
  const std::string message = "Preempted by " + by + "; requeued, every rank is stopped";
  TRAINLET_RETURN_IF_ERROR(ApplyTransition(flip.status, JobTrigger::kSuspend,
                                           std::string(kReasonPreempted), message, now_ms));
  SetCondition(flip.status, kConditionSuspended, true, kReasonPreempted, message, now_ms);
  flip.status.set_preemptions(flip.status.preemptions() + 1);
  flip.status.set_preempted(true);
  if (ranks_run && warning.signal != 0) {
    flip.warning = warning;
    AppendEvent(flip.status, "Warning", "PreemptionWarning", WarningMessage(warning, cause),
                now_ms);
  }
  return flip;
}

Result<std::optional<SuspendFlip>> CompareWithStored(const JobRecord& stored, bool stored_suspend,
                                                     const trainjob::TrainJob& spec,
                                                     const std::string& source, int64_t now_ms) {
  if (stored.spec_yaml == spec.yaml) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(std::string before, WithoutSuspend(stored.spec_yaml));
  TRAINLET_ASSIGN_OR_RETURN(std::string applied, WithoutSuspend(spec.yaml));
  if (before != applied) {
    std::string field;
    try {
      field = FirstDifference(YAML::Load(before), YAML::Load(applied), "");
    } catch (const YAML::Exception&) {  // both were just emitted; named or not, still refused
    }
    return Status(ErrorCode::kExists,
                  "trainjob/" + spec.name + " already exists with a different spec" +
                      (field.empty() ? "" : " (" + field + " differs)") +
                      "; only spec.suspend may change: delete it first (trainletctl delete "
                      "trainjob " +
                      spec.name + ")");
  }
  // The same job; "suspend: false" written out where it was absent is no change.
  if (spec.suspend == stored_suspend) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(
      SuspendFlip flip,
      PrepareSuspend(stored.status, spec.suspend, spec.yaml,
                     "apply of " + (source.empty() ? std::string("stdin") : source), now_ms));
  flip.job = stored.name;
  return std::optional<SuspendFlip>(std::move(flip));
}

Result<std::string> WithSuspend(const std::string& yaml, bool suspend) {
  try {
    YAML::Node doc = YAML::Load(yaml);
    doc["spec"]["suspend"] = suspend;
    // Type-keeping: yaml-cpp's emitter wrote command ["true"] back as `- true`, a boolean, and
    // the suspended job was then left unloaded by the next coordinator ("no longer parses").
    return trainjob::EmitYaml(doc);
  } catch (const YAML::Exception& e) {
    return InvalidError(std::string("stored TrainJob no longer parses: ") + e.what());
  }
}

Status StoreSuspend(JobStore& store, const SuspendFlip& flip) {
  TRAINLET_RETURN_IF_ERROR(store.UpdateSpec(flip.job, flip.spec_yaml));
  return store.UpdateStatus(flip.job, flip.status);
}

}  // namespace trainlet::coordinator
