// WorkerSupervisor, the step half: starting a step, reading its events file, adopting the steps
// of a previous agent, and ending the record of a step. See worker_supervisor.h.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "agent/step/step_launch.h"
#include "agent/step/step_records.h"
#include "agent/step/step_stop.h"
#include "agent/step/workspace_mount.h"
#include "agent/worker_supervisor.h"
#include "common/platform/descriptors.h"
#include "common/platform/process_info.h"

namespace trainlet::agent {
namespace fs = std::filesystem;
using step::StepRecord;

namespace {

constexpr char kStepDied[] = "step process died; exit status unknown";
// The spare dirs one launch takes: the job's work dir, workspace/, dataset/ and model/, its
// logs/<job> dir (JobDataPurge's stamp) and the attempt's log dir (the step), the step dir, and
// the work dir's .trainlet-secrets and its uid-<UID> dir (the step, rank_files.h).
constexpr size_t kSpareDirsPerLaunch = 9;
// The spare files one launch takes besides its ranks' logs: the step's two files (SpawnStep), its
// workspace note, and the first file of each secret (the step: two secrets, and two agent files
// copied for a rank of another user; later ranks get hard links).
constexpr size_t kSpareFilesPerLaunch = 7;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// The name of a new step's directory: <job>.<attempt>, with .<n> added when a step of that
// attempt exists already (a plan that added ranks).
std::string NewStepDir(const std::string& steps_dir, const std::string& job, uint32_t attempt) {
  const std::string base = steps_dir + "/" + job + "." + std::to_string(attempt);
  std::string dir = base;
  for (int n = 1; fs::exists(dir); ++n) dir = base + "." + std::to_string(n);
  return dir;
}

void AddToWakeSet(platform::PollSet& set, int fd) {
  if (fd < 0) return;  // polled instead (Tick)
  if (const int err = set.Add(fd, platform::PollSet::kReadable, nullptr); err != 0) {
    spdlog::warn("supervisor: adding to the wake-up set: {}", std::strerror(err));
  }
}

}  // namespace

Status WorkerSupervisor::InitSteps() {
  std::error_code ec;
  fs::create_directories(options_.steps_dir, ec);
  if (ec) return IoError(options_.steps_dir + ": " + ec.message());
  // Launch files hold the ranks' env: keep them to the agent's user.
  fs::permissions(options_.steps_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  std::string error;
  auto files = platform::FileWatch::Open(&error);
  auto pending = files ? platform::WakeEvent::Open(&error) : nullptr;
  auto wake = pending ? platform::PollSet::Open(&error) : nullptr;
  if (!wake) return InternalError("supervisor: " + error);
  files_ = std::move(files);
  pending_ = std::move(pending);
  wake_ = std::move(wake);
  AddToWakeSet(*wake_, files_->fd());
  AddToWakeSet(*wake_, pending_->fd());
  if (options_.spare_dir.empty())
    options_.spare_dir = (fs::path(options_.steps_dir).parent_path() / "spare-files").string();
  spares_ = std::make_unique<step::SpareFileFiller>(options_.spare_dir);
#if defined(__linux__)  // elsewhere there is no cgroup to enter ahead
  if (options_.step_standby && !options_.step_binary.empty()) {
    const std::string log =
        (fs::path(options_.steps_dir).parent_path() / "standby-step.log").string();
    standby_ = std::make_unique<StandbyStep>(
        spawner_, StandbyStep::Options{options_.step_binary, options_.step_cgroup, log});
  }
#endif
  return Status::Ok();
}

WorkerSupervisor::~WorkerSupervisor() {
  for (auto& [id, st] : steps_) CloseStep(st);
}

void WorkerSupervisor::CloseStep(Step& s) {
  if (s.watch >= 0 && files_) files_->Remove(s.watch);
  s.process.Reset();  // also leaves the wake-up set
  if (s.events_fd >= 0) close(s.events_fd);
  s.watch = s.events_fd = -1;
}

bool WorkerSupervisor::StepsPolled() const {
  if (steps_.empty()) return false;
  if (files_ && files_->fd() < 0) return true;
  return std::any_of(steps_.begin(), steps_.end(), [](const auto& entry) {
    const Step& s = entry.second;
    return !s.gone && !s.child && s.process.fd() < 0;  // an adopted step with no exit watch
  });
}

void WorkerSupervisor::UpdatePolling() {
  const bool wanted = StepsPolled();
  if (wanted == (poll_timer_ != nullptr)) return;
  if (!wanted) {
    poll_timer_.reset();  // closing it takes it out of the wake-up set
    return;
  }
  std::string error;
  poll_timer_ = platform::PeriodicTimer::Open(
      std::min(platform::FileWatch::kPollInterval, platform::ProcessHandle::kPollInterval), &error);
  if (!poll_timer_) {
    spdlog::error("supervisor: cannot poll the steps ({}): their exits come only with SIGCHLD",
                  error);
    return;
  }
  AddToWakeSet(*wake_, poll_timer_->fd());
}

void WorkerSupervisor::SignalStep(Step& s, int sig) {
  if (s.gone) return;
  int err;
  if (s.process.valid()) {
    err = s.process.Signal(sig);
  } else if (s.child) {
    err = kill(s.pid, sig) == 0 ? 0 : errno;  // a child cannot be reused before we reap it
  } else {
    return;
  }
  if (err != 0 && err != ESRCH) {
    spdlog::warn("supervisor: signal {} to the step of {} attempt {} (pid {}): {}", sig, s.job,
                 s.attempt, s.pid, std::strerror(err));
  }
}

void WorkerSupervisor::StopStep(Step& s, std::chrono::milliseconds grace, Clock::time_point now,
                                const StopWarning& warning) {
  if (s.kill_sent) return;
  if (grace.count() <= 0) {
    spdlog::info("supervisor: stopping job {} attempt {} (step pid {}) with SIGKILL", s.job,
                 s.attempt, s.pid);
    SignalStep(s, SIGUSR1);
    s.kill_sent = true;
    s.kill_at.reset();
    return;
  }
  if (!s.term_sent) {
    // The step reads the request when SIGTERM comes: the warning, then SIGTERM, are its to send.
    const bool warned = warning.signal != 0 && WriteStepRequest(s, "stop", warning);
    if (warned) {
      s.warning_ends = now + std::max(warning.grace, std::chrono::milliseconds(0));
      spdlog::info(
          "supervisor: stopping job {} attempt {} (step pid {}): {}, SIGTERM in {} ms, SIGKILL "
          "{} ms after",
          s.job, s.attempt, s.pid, strsignal(warning.signal), warning.grace.count(), grace.count());
    } else {
      spdlog::info(
          "supervisor: stopping job {} attempt {} (step pid {}): SIGTERM, SIGKILL in {} ms", s.job,
          s.attempt, s.pid, grace.count());
    }
    SignalStep(s, SIGTERM);
    s.term_sent = true;
  }
  // A warning under way keeps its grace: the SIGKILL comes `grace` after its end at the soonest.
  const Clock::time_point deadline = std::max(now, s.warning_ends.value_or(now)) + grace;
  if (!s.kill_at || deadline < *s.kill_at) s.kill_at = deadline;
}

bool WorkerSupervisor::WriteStepRequest(const Step& s, const char* file,
                                        const StopWarning& warning) {
  if (!s.stop_requests) {
    spdlog::warn("supervisor: the step of job {} attempt {} predates warnings: {}", s.job,
                 s.attempt,
                 std::string(file) == "stop" ? "stopping without the warning" : "no warning sent");
    return false;
  }
  step::StopRequest request;
  request.warning_signal = warning.signal;
  request.warning_grace_ms =
      static_cast<uint32_t>(std::clamp<int64_t>(warning.grace.count(), 0, UINT32_MAX));
  request.sent_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const Status written = step::WriteStopRequest(s.dir + "/" + file, request);
  if (!written.ok()) {
    spdlog::error(
        "supervisor: job {} attempt {}: {}; {}", s.job, s.attempt, written.message(),
        std::string(file) == "stop" ? "stopping without the warning" : "the warning is not sent");
  }
  return written.ok();
}

// Keeps the launches StartStep can hand to a step: the ones it refuses get their error in
// `results` and stay out of the spec. spec.ranks[i] is launches[index[i]].
step::StepLaunch WorkerSupervisor::StepSpecFor(std::vector<WorkerLaunch>& launches,
                                               std::chrono::milliseconds stop_grace,
                                               std::vector<Result<pid_t>>& results,
                                               std::vector<size_t>& index) const {
  const std::string& job = launches[0].job;
  const uint32_t attempt = launches[0].attempt;
  step::StepLaunch spec;
  spec.job = job;
  spec.attempt = attempt;
  spec.stop_grace_ms = static_cast<uint32_t>(std::max<int64_t>(0, stop_grace.count()));
  spec.agent_lock = options_.agent_lock;
  spec.orphan_grace_ms = static_cast<uint32_t>(std::max<int64_t>(0, options_.orphan_grace.count()));
  spec.cgroup = options_.step_cgroup;
  spec.log_max_bytes = options_.log_max_bytes;
  spec.spare_dir = options_.spare_dir;
  spec.agent_stamps = options_.agent_stamps;
  spec.stop_requests = true;  // the trainlet-step beside this agent is of its version
  spec.base_env = base_env_;
  std::set<uint32_t> ranks;
  for (size_t i = 0; i < launches.size(); ++i) {
    WorkerLaunch& l = launches[i];
    const std::string who = "job " + l.job + " attempt " + std::to_string(l.attempt) + " rank " +
                            std::to_string(l.rank);
    Status st = ValidateLaunch(l, who);
    if (st.ok() && (l.job != job || l.attempt != attempt)) {
      st = InvalidError(who + ": a step runs ranks of one job attempt (" + job + " attempt " +
                        std::to_string(attempt) + ")");
    }
    if (st.ok() && (l.stdout_fd >= 0 || l.stderr_fd >= 0)) {
      st = InvalidError(who + ": output pipes are for direct workers only");
    }
    if (st.ok() && !ranks.insert(l.rank).second) {
      st = Status(ErrorCode::kExists, who + ": listed twice");
    }
    if (st.ok() && (!wake_ || options_.step_binary.empty())) {
      st = UnavailableError(who + ": this supervisor has no steps directory or step binary");
    }
    if (!st.ok()) {
      results[i] = st;
      continue;
    }
    step::StepRank r;
    r.rank = l.rank;
    r.local_rank = l.local_rank;
    r.argv = l.argv;
    r.env = std::move(l.env);
    r.cwd = l.cwd;
    r.log_path = l.log_path;
    r.stderr_path = l.stderr_path;
    r.cpus = l.cpus;
    r.step = l.step;
    r.run_as = l.run_as;
    r.run_as.agent_run_as = options_.run_as;
    spec.ranks.push_back(std::move(r));
    index.push_back(i);
    // What the rank's replicated job waits for, once per job (step_gate.h).
    const bool listed = std::any_of(spec.steps.begin(), spec.steps.end(),
                                    [&](const step::StepOrder& o) { return o.name == l.step; });
    if (!l.waits.empty() && !listed) spec.steps.push_back({l.step, l.waits});
  }
  return spec;
}

Status WorkerSupervisor::SpawnStep(const step::StepLaunch& spec, Step& s, int& ready_fd) {
  s.dir = NewStepDir(options_.steps_dir, spec.job, spec.attempt);
  s.job = spec.job;
  s.attempt = spec.attempt;
  s.stop_grace_ms = spec.stop_grace_ms;
  s.stop_requests = spec.stop_requests;
  s.child = true;
  std::error_code ec;
  // The dir and two files are spares renamed into place where the filler left some
  // (spare_files.h): the step dir (a new name: NewStepDir), the launch file's temporary name
  // (opened O_TRUNC by WriteLaunchFile) and the events file.
  step::SpareFiles spares(options_.spare_dir);
  if (!spares.TakeDirAs(s.dir)) fs::create_directory(s.dir, ec);
  if (ec) return IoError("step dir " + s.dir + ": " + ec.message());
  spares.TakeAs(s.dir + "/launch.json.tmp");
  const std::string events = s.dir + "/events";
  const bool spare_events = spares.TakeAs(events);
  Status written = step::WriteLaunchFile(s.dir + "/launch.json", spec);
  if (!written.ok()) {
    fs::remove_all(s.dir, ec);
    return written;
  }
  const int create =
      spare_events ? -1 : open(events.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (create >= 0) close(create);
  s.events_fd = open(events.c_str(), O_RDONLY | O_CLOEXEC);
  if (s.events_fd < 0) {
    const Status st = IoError(Errno(events));
    fs::remove_all(s.dir, ec);
    return st;
  }
  s.watch = files_->Add(events);
  Result<pid_t> pid = StartStepProcess(s.dir, ready_fd);
  if (!pid.ok()) {
    CloseStep(s);
    fs::remove_all(s.dir, ec);
    return pid.status();
  }
  s.pid = *pid;
  s.start_time = platform::ProcessStartTime(s.pid).value_or(0);
  // Our unreaped child: the handle cannot name another process. It is not in the wake-up set:
  // a child's end comes from waitid.
  s.process = platform::ProcessHandle::OpenChild(s.pid, s.start_time);
  return Status::Ok();
}

// The standby step when one waits (it is in its cgroup already), else a new trainlet-step.
Result<pid_t> WorkerSupervisor::StartStepProcess(const std::string& dir, int& ready_fd) {
  if (auto taken = standby_ ? standby_->Take(dir) : std::nullopt) {
    ready_fd = taken->ready_fd;
    return taken->pid;
  }
  int ready[2];
  if (platform::OpenPipe(ready) != 0) return InternalError(Errno("pipe"));
  ProcessSpawner::Request request;
  request.argv = {options_.step_binary, dir};
  request.cwd = "/";
  request.log_path = dir + "/step.log";
  request.stdout_fd = ready[1];
  request.new_session = true;
  Result<pid_t> pid = spawner_->Spawn(request);
  close(ready[1]);
  if (!pid.ok()) {
    close(ready[0]);
    return Status(pid.status().code(), "step: " + pid.status().message());
  }
  ready_fd = ready[0];
  return pid;
}

bool WorkerSupervisor::WaitStepReady(int ready_fd) const {
  // Blocks the loop while the step spawns the ranks, as spawning them here would. The step says
  // "ready" once every S or F record is written; EOF means it died first.
  const auto deadline = Clock::now() + options_.step_start_timeout;
  auto next_keepalive = Clock::now() + std::chrono::seconds(1);
  std::string said;
  while (said.find('\n') == std::string::npos) {
    const auto now = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (left.count() <= 0) break;
    if (now >= next_keepalive) {
      if (options_.keepalive) options_.keepalive();
      next_keepalive = now + std::chrono::seconds(1);
    }
    pollfd p{ready_fd, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 500)));
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    char buf[64];
    const ssize_t n = read(ready_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    said.append(buf, static_cast<size_t>(n));
  }
  close(ready_fd);
  return said == "ready\n";
}

void WorkerSupervisor::ReportStepStarts(Step& s, const std::vector<WorkerLaunch>& launches,
                                        const std::vector<size_t>& index, bool is_ready,
                                        std::vector<StepRecord>& records,
                                        std::vector<Result<pid_t>>& results) {
  ReadNewRecords(s, &records);
  s.workspace = step::ReadWorkspaceNote(s.dir);  // written before its ranks started
  std::map<uint32_t, std::string> failed;
  for (const StepRecord& r : records) {
    if (r.kind == StepRecord::Kind::kHeader && r.start_time != 0) s.start_time = r.start_time;
    if (r.kind == StepRecord::Kind::kStarted) {
      s.live[r.rank] = StepRankState{r.pid, r.start_time};
      s.known.insert(r.rank);
    } else if (r.kind == StepRecord::Kind::kStartFailed) {
      failed[r.rank] = r.message;
      s.known.insert(r.rank);
    }
  }
  // Exits that came in already stay in `records`: replay them after the starts are reported.
  // One line for the step at info, one per rank at debug: a 4,096-rank job is one line.
  size_t started = 0;
  for (size_t k = 0; k < index.size(); ++k) {
    const WorkerLaunch& l = launches[index[k]];
    const std::string who = "job " + s.job + " attempt " + std::to_string(s.attempt) + " rank " +
                            std::to_string(l.rank);
    if (auto it = s.live.find(l.rank); it != s.live.end()) {
      results[index[k]] = it->second.pid;
      ++started;
      spdlog::debug("supervisor: {} local_rank {} started as pid {} under step {} (log {})", who,
                    l.local_rank, it->second.pid, s.pid,
                    l.log_path.empty() ? "discarded" : l.log_path);
    } else if (is_ready && !l.waits.empty()) {
      // Held by the step until its replicated job's dependencies are met: running, pid unknown.
      // An F record of it (its dependency failed at once) comes out of ApplyStepRecords after
      // the exit that caused it, as a never-started rank (WorkerExit::started false).
      s.live[l.rank] = StepRankState{0, 0};
      s.known.erase(l.rank);
      results[index[k]] = pid_t{0};
      spdlog::debug("supervisor: {} held until its dependencies are met", who);
    } else if (auto f = failed.find(l.rank); f != failed.end()) {
      results[index[k]] = InternalError(who + ": " + f->second);
      spdlog::warn("supervisor: {} failed to start: {}", who, f->second);
    } else {
      results[index[k]] = UnavailableError(
          who + ": the step process " +
          (is_ready ? std::string("did not start it") : "ended or hung before starting it") +
          "; see " + s.dir + "/step.log");
    }
  }
  if (started != 0) {
    spdlog::info("supervisor: job {} attempt {}: {} rank(s) started under step {} ({})", s.job,
                 s.attempt, started, s.pid, s.dir);
  }
}

std::vector<Result<pid_t>> WorkerSupervisor::StartStep(std::vector<WorkerLaunch> launches,
                                                       std::chrono::milliseconds stop_grace) {
  std::vector<Result<pid_t>> results(launches.size(), Result<pid_t>(InternalError("not started")));
  if (launches.empty()) return results;
  const std::string job = launches[0].job;
  const uint32_t attempt = launches[0].attempt;
  std::vector<size_t> index;  // spec.ranks[i] is launches[index[i]]
  const step::StepLaunch spec = StepSpecFor(launches, stop_grace, results, index);
  if (spec.ranks.empty()) return results;

  Step s;
  for (const auto& r : spec.ranks) s.run_as[r.rank] = r.run_as;
  int ready_fd = -1;
  const auto spawning = Clock::now();
  Status spawned = SpawnStep(spec, s, ready_fd);
  if (const auto took = Clock::now() - spawning; took > std::chrono::seconds(1)) {
    spdlog::warn("supervisor: job {} attempt {}: writing and spawning its step took {} ms", job,
                 attempt, std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  }
  if (!spawned.ok()) {
    spdlog::error("supervisor: job {} attempt {}: {}", job, attempt, spawned.message());
    for (size_t i : index) {
      results[i] =
          Status(spawned.code(), "job " + job + " attempt " + std::to_string(attempt) + " rank " +
                                     std::to_string(launches[i].rank) + ": " + spawned.message());
    }
    return results;
  }
  const bool is_ready = WaitStepReady(ready_fd);
  std::vector<StepRecord> records;
  ReportStepStarts(s, launches, index, is_ready, records, results);
  if (!is_ready) {
    spdlog::error("supervisor: step of job {} attempt {} (pid {}) did not report ready", job,
                  attempt, s.pid);
    SignalStep(s, SIGKILL);  // its ranks are ended as those of a dead step by Reap
  }
  // The next step of this size finds its logs made (the step has reported ready: the filler
  // takes no CPU from its spawns).
  // The ranks' logs, the step's files and the first secret files, and the dirs.
  if (spares_) spares_->Want(spec.ranks.size() + kSpareFilesPerLaunch, kSpareDirsPerLaunch);
  if (standby_) standby_->StepStarted(Clock::now());  // the next one, once the node is quiet
  const int id = next_step_id_++;
  Step& kept = steps_[id] = std::move(s);
  // Exits recorded during the start (a rank that ended at once) go out with the next Reap,
  // after the caller has reported the starts.
  std::vector<WorkerExit> early;
  ApplyStepRecords(kept, records, &early);
  if (!early.empty()) {
    pending_exits_.insert(pending_exits_.end(), early.begin(), early.end());
    pending_->Notify();
  }
  UpdatePolling();
  return results;
}

void WorkerSupervisor::ReadNewRecords(Step& s, std::vector<StepRecord>* out) {
  if (s.events_fd < 0 || s.corrupt) return;
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = pread(s.events_fd, buf, sizeof buf, static_cast<off_t>(s.offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      spdlog::error("supervisor: {}/events: {}", s.dir, std::strerror(errno));
      return;
    }
    if (n == 0) break;
    s.offset += static_cast<uint64_t>(n);
    s.partial.append(buf, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  const uint64_t base = s.offset - s.partial.size();
  auto used = step::ParseRecords(s.partial, base, out);
  if (!used.ok()) {
    // What came before the bad bytes stands; nothing after it can be trusted. The step's
    // unrecorded ranks are then ended as those of a dead step.
    spdlog::error("supervisor: {}/events: {}", s.dir, used.status().message());
    s.corrupt = true;
    s.partial.clear();
    return;
  }
  s.partial.erase(0, *used);
}

void WorkerSupervisor::ApplyStepRecords(Step& s, const std::vector<StepRecord>& records,
                                        std::vector<WorkerExit>* exits) {
  for (const StepRecord& r : records) {
    switch (r.kind) {
      case StepRecord::Kind::kHeader:
        break;
      case StepRecord::Kind::kStarted:
        // StartStep and AdoptSteps take the starts; a held rank's comes late (TakeLateStarts).
        if (auto it = s.live.find(r.rank); it != s.live.end() && it->second.pid == 0) {
          it->second = StepRankState{r.pid, r.start_time};
          s.known.insert(r.rank);
          late_starts_.push_back({s.job, s.attempt, r.rank, r.pid});
        }
        break;
      case StepRecord::Kind::kStartFailed:
        // A held rank that will never start (its dependency failed, or the step was stopped).
        if (auto it = s.live.find(r.rank); it != s.live.end() && it->second.pid == 0) {
          WorkerExit e{s.job, s.attempt, r.rank, 0, 127, 0, r.message, /*started=*/false};
          exits->push_back(std::move(e));
          s.known.insert(r.rank);
          s.returned.emplace(r.rank, 0);
          s.live.erase(it);
        }
        break;
      case StepRecord::Kind::kExited: {
        auto it = s.live.find(r.rank);
        if (it == s.live.end()) break;  // reported already
        WorkerExit e{s.job, s.attempt, r.rank, r.pid, r.exit_code, r.signal, ""};
        // The agent logs each exit it reports; this line only adds the pid.
        spdlog::debug("supervisor: job {} attempt {} rank {} (pid {}) exited: code {} signal {}",
                      s.job, s.attempt, r.rank, r.pid, r.exit_code, r.signal);
        exits->push_back(std::move(e));
        s.returned.emplace(r.rank, 0);
        s.live.erase(it);
        break;
      }
      case StepRecord::Kind::kDone:
        s.done = true;
        s.contained = r.contained;
        break;
    }
  }
}

void WorkerSupervisor::CheckStepAlive(Step& s) {
  if (s.gone || s.child) return;  // a child's end comes from waitid
  if (s.process.Exited()) {
    s.gone = true;
    s.process.Reset();  // it stays readable: out of the wake-up set for good
  }
}

// A step killed outright (SIGKILL, the OOM killer) cannot kill or remove its ranks' cgroup: what a
// rank detached there (setsid, a double fork, `env -i`) would run on, out of reach of any pid or
// env sweep (issue 19, defect 5). The agent kills the cgroup, and removes it once it is empty.
void WorkerSupervisor::EndDeadStepCgroup(Step& s) {
  if (s.cgroup_ended || s.pid <= 0) return;
  s.cgroup_ended = true;
  const auto mode = platform::ParseCgroupMode(options_.step_cgroup);
  if (!mode || *mode == platform::CgroupMode::kNone) return;
  auto cgroup = platform::ProcessCgroup::Open("step-" + std::to_string(s.pid), *mode);
  if (!cgroup.ok()) return;  // none: no cgroups here, or the step removed its own
  if (Status k = (*cgroup)->Kill(); !k.ok()) {
    spdlog::warn("supervisor: the dead step of job {} attempt {}: {}", s.job, s.attempt,
                 k.message());
  }
  dead_cgroups_.push_back(std::move(*cgroup));
}

void WorkerSupervisor::EndDeadStep(Step& s, std::vector<WorkerExit>* exits) {
  if (s.gone) EndDeadStepCgroup(s);
  if (s.live.empty()) return;
  spdlog::error(
      "supervisor: the step of job {} attempt {} (pid {}) {} with {} rank(s) not "
      "recorded as exited: ending them",
      s.job, s.attempt, s.pid, s.corrupt ? "wrote a corrupt events file" : "died", s.live.size());
  if (!s.gone) SignalStep(s, SIGKILL);
  for (auto& [rank, r] : s.live) {
    // Only the very process the step started: its pid with its start time.
    if (r.pid > 0 && platform::SameProcessAlive(r.pid, r.start_time)) {
      kill(-r.pid, SIGKILL);
      kill(r.pid, SIGKILL);
    }
    WorkerExit e{s.job, s.attempt, rank, r.pid, 255, 0, kStepDied};
    exits->push_back(std::move(e));
    s.returned.emplace(rank, 0);
  }
  s.live.clear();
}

void WorkerSupervisor::ReapSteps(std::vector<WorkerExit>* exits) {
  if (!wake_) return;
  // Drain the wake-ups; every step is read below whatever woke us.
  files_->Drain();
  pending_->Drain();
  if (poll_timer_) poll_timer_->Consume();
  while (wake_->Ready(16).size() == 16) {
  }
  exits->insert(exits->end(), pending_exits_.begin(), pending_exits_.end());
  pending_exits_.clear();
  std::erase_if(dead_cgroups_,
                [](const auto& cgroup) { return !cgroup->Populated() && cgroup->Remove().ok(); });
  for (auto& [id, s] : steps_) {
    CheckStepAlive(s);  // first: once it is gone, the file below holds all it ever wrote
    std::vector<StepRecord> records;
    ReadNewRecords(s, &records);
    ApplyStepRecords(s, records, exits);
    if ((s.gone && !s.done) || s.corrupt) EndDeadStep(s, exits);
  }
  RemoveFinishedSteps();
}

void WorkerSupervisor::ExitReported(const WorkerExit& exit, uint64_t seq) {
  for (auto& [id, s] : steps_) {
    if (s.job != exit.job || s.attempt != exit.attempt) continue;
    auto it = s.returned.find(exit.rank);
    if (it != s.returned.end()) it->second = seq;
  }
}

void WorkerSupervisor::ExitDelivered(const std::string& job, uint32_t attempt, uint32_t rank) {
  for (auto& [id, s] : steps_) {
    if (s.job == job && s.attempt == attempt) s.returned.erase(rank);
  }
  RemoveFinishedSteps();
}

bool WorkerSupervisor::StepKnows(const std::string& job, uint32_t attempt, uint32_t rank) const {
  return std::any_of(steps_.begin(), steps_.end(), [&](const auto& entry) {
    const Step& s = entry.second;
    return s.job == job && s.attempt == attempt &&
           (s.known.contains(rank) || s.live.contains(rank) || s.returned.contains(rank));
  });
}

std::string WorkerSupervisor::StepWorkspace(const std::string& job, uint32_t attempt) const {
  std::string found;
  for (const auto& [id, s] : steps_) {  // by id: the newest step of the attempt comes last
    if (s.job == job && s.attempt == attempt && !s.workspace.empty()) found = s.workspace;
  }
  return found;
}

std::optional<step::RunAsRequest> WorkerSupervisor::RankRunAs(const std::string& job,
                                                              uint32_t attempt,
                                                              uint32_t rank) const {
  std::optional<step::RunAsRequest> found;
  for (const auto& [id, s] : steps_) {  // by id: the newest step of the attempt comes last
    if (s.job != job || s.attempt != attempt) continue;
    if (auto it = s.run_as.find(rank); it != s.run_as.end()) found = it->second;
  }
  return found;
}

void WorkerSupervisor::ReportsAcked(uint64_t seq) {
  acked_through_ = std::max(acked_through_, seq);
  RemoveFinishedSteps();
}

void WorkerSupervisor::RemoveFinishedSteps() {
  for (auto it = steps_.begin(); it != steps_.end();) {
    Step& s = it->second;
    const bool delivered = std::all_of(s.returned.begin(), s.returned.end(), [&](const auto& r) {
      return r.second != 0 && r.second <= acked_through_;
    });
    if (!s.gone || !s.live.empty() || !delivered) {
      ++it;
      continue;
    }
    CloseStep(s);
    std::error_code ec;
    fs::remove_all(s.dir, ec);
    if (ec) spdlog::warn("supervisor: cannot remove {}: {}", s.dir, ec.message());
    it = steps_.erase(it);
  }
  UpdatePolling();
}

std::vector<WorkerSupervisor::AdoptedStep> WorkerSupervisor::AdoptSteps() {
  std::vector<AdoptedStep> found;
  if (!wake_) return found;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(options_.steps_dir, ec)) {
    if (e.is_directory(ec)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    auto launch = step::ReadLaunchFile((dir / "launch.json").string());
    if (!launch.ok()) {
      if (launch.status().code() == ErrorCode::kNotFound && !fs::exists(dir / "events", ec)) {
        // The previous agent died before it started this step: nothing ran.
        fs::remove_all(dir, ec);
      } else {
        spdlog::error("supervisor: cannot adopt step {}: {}", dir.string(),
                      launch.status().message());
      }
      continue;
    }
    Step s;
    s.dir = dir.string();
    s.job = launch->job;
    s.attempt = launch->attempt;
    s.stop_grace_ms = launch->stop_grace_ms;
    s.stop_requests = launch->stop_requests;
    s.workspace = step::ReadWorkspaceNote(s.dir);
    for (const auto& r : launch->ranks) s.run_as[r.rank] = r.run_as;
    const std::string events = s.dir + "/events";
    s.events_fd = open(events.c_str(), O_RDONLY | O_CLOEXEC);
    if (s.events_fd < 0) {
      spdlog::error("supervisor: cannot adopt step {}: {}", s.dir, Errno(events));
      continue;
    }
    std::vector<StepRecord> records;
    ReadNewRecords(s, &records);
    bool alive = false;
    if (!records.empty() && records[0].kind == StepRecord::Kind::kHeader) {
      s.pid = records[0].pid;
      s.start_time = records[0].start_time;
      s.process = platform::ProcessHandle::Open(s.pid, s.start_time);  // checks twice
      alive = s.process.valid();
    }
    s.gone = !alive;
    // A warned stop under way (step_stop.h): the step times it; a stop asked again must not cut
    // its grace short, so its end is estimated from when the previous agent asked.
    if (auto stop = step::ReadStopRequest(s.dir + "/stop");
        stop.ok() && stop->warning_signal != 0) {
      const int64_t now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
      const int64_t left_ms =
          std::max<int64_t>(0, stop->sent_unix_ms + stop->warning_grace_ms - now_unix_ms);
      s.term_sent = true;
      s.warning_ends = Clock::now() + std::chrono::milliseconds(left_ms);
    }
    std::vector<WorkerExit> exits;
    for (const StepRecord& r : records) {
      if (r.kind == StepRecord::Kind::kStarted) {
        s.live[r.rank] = StepRankState{r.pid, r.start_time};
        s.known.insert(r.rank);
      } else if (r.kind == StepRecord::Kind::kStartFailed) {
        // Reported as START_FAILED by the previous agent, perhaps never delivered: again, as an
        // exit, which fails the attempt just the same and is ignored for an older one.
        s.known.insert(r.rank);
        exits.push_back(
            WorkerExit{s.job, s.attempt, r.rank, 0, 127, 0, "start failed: " + r.message});
        s.returned.emplace(r.rank, 0);
      }
    }
    ApplyStepRecords(s, records, &exits);
    // Ranks the step still holds for their dependencies: running, not started (a dead step's are
    // ended below with the rest).
    for (const step::StepRank& r : launch->ranks) {
      const bool waits =
          std::any_of(launch->steps.begin(), launch->steps.end(),
                      [&](const auto& o) { return o.name == r.step && !o.depends_on.empty(); });
      if (waits && !s.known.contains(r.rank)) s.live.emplace(r.rank, StepRankState{0, 0});
    }
    AdoptedStep info{s.job, s.attempt, s.stop_grace_ms, 0, exits.size(), alive, {}, {}, {}};
    for (const step::StepRank& r : launch->ranks) {
      info.ranks.push_back(r.rank);
      info.cpus.insert(info.cpus.end(), r.cpus.begin(), r.cpus.end());
    }
    info.rendezvous = AdoptedRendezvousOf(*launch, ::geteuid());
    if ((s.gone && !s.done) || s.corrupt) EndDeadStep(s, &exits);
    info.running = s.live.size();
    info.exited = exits.size();
    s.watch = files_->Add(events);
    AddToWakeSet(*wake_, s.process.fd());
    spdlog::info(
        "supervisor: adopted step {} (pid {}, {}): {} rank(s) running, {} exit(s) to "
        "report",
        s.dir, s.pid, alive ? "alive" : "ended", info.running, info.exited);
    pending_exits_.insert(pending_exits_.end(), exits.begin(), exits.end());
    found.push_back(info);
    steps_[next_step_id_++] = std::move(s);
  }
  if (!pending_exits_.empty()) pending_->Notify();
  RemoveFinishedSteps();
  return found;
}

}  // namespace trainlet::agent
