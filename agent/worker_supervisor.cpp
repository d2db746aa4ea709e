#include "agent/worker_supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "agent/step/step_launch.h"
#include "common/platform/process_control.h"

namespace trainlet::agent {
namespace {

std::string Describe(const std::string& job, uint32_t attempt, uint32_t rank) {
  return "job " + job + " attempt " + std::to_string(attempt) + " rank " + std::to_string(rank);
}

}  // namespace

WorkerSupervisor::WorkerSupervisor(ProcessSpawner* spawner, std::vector<std::string> base_env,
                                   Options options)
    : spawner_(spawner), base_env_(std::move(base_env)), options_(std::move(options)) {
  TRAINLET_CHECK(spawner_ != nullptr);
  if (!options_.steps_dir.empty()) {
    Status s = InitSteps();
    if (!s.ok()) spdlog::error("supervisor: steps: {}", s.message());
  }
}

WorkerSupervisor::WorkerSupervisor(ProcessSpawner* spawner, std::vector<std::string> base_env)
    : WorkerSupervisor(spawner, std::move(base_env), Options{}) {}

Status WorkerSupervisor::ValidateLaunch(const WorkerLaunch& launch, const std::string& who) const {
  if (launch.argv.empty()) return InvalidError(who + ": argv is empty");
  if (launch.attempt == 0) return InvalidError(who + ": attempt must be >= 1");
  if (IsRunning(launch.job, launch.attempt, launch.rank)) {
    return Status(ErrorCode::kExists, who + ": already running");
  }
  for (const auto& [key, value] : launch.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return InvalidError(who + ": env name '" + key + "' is empty or contains '='");
    }
  }
  return Status::Ok();
}

Result<pid_t> WorkerSupervisor::Start(const WorkerLaunch& launch) {
  const std::string who = Describe(launch.job, launch.attempt, launch.rank);
  TRAINLET_RETURN_IF_ERROR(ValidateLaunch(launch, who));

  ProcessSpawner::Request request;
  request.argv = launch.argv;
  request.envp = step::BuildWorkerEnv(base_env_, launch.env);
  request.cwd = launch.cwd;
  request.log_path = launch.log_path;
  request.stderr_path = launch.stderr_path;
  request.stdout_fd = launch.stdout_fd;
  request.stderr_fd = launch.stderr_fd;
  request.cpus = launch.cpus;
  Result<pid_t> pid = spawner_->Spawn(request);
  if (!pid.ok()) {
    spdlog::warn("supervisor: {} failed to start: {}", who, pid.status().ToString());
    return Status(pid.status().code(), who + ": " + pid.status().message());
  }
  // A pid still in the table would mean we missed its exit: two processes cannot share a pid.
  TRAINLET_CHECK_MSG(!workers_.contains(*pid), "pid reused while still recorded");
  Worker& w = workers_[*pid];
  w.job = launch.job;
  w.attempt = launch.attempt;
  w.rank = launch.rank;
  w.local_rank = launch.local_rank;
  w.pid = *pid;
  spdlog::info("supervisor: {} local_rank {} started as pid {} (log {})", who, launch.local_rank,
               *pid, launch.log_path.empty() ? "discarded" : launch.log_path);
  return pid;
}

void WorkerSupervisor::SignalGroup(const Worker& w, int sig) {
  int err = spawner_->Kill(-w.pid, sig);
  // ESRCH: the group is already empty (or only the unreaped leader is left); nothing to do.
  if (err != 0 && err != ESRCH) {
    spdlog::warn("supervisor: kill(-{}, {}) for {}: {}", w.pid, strsignal(sig),
                 Describe(w.job, w.attempt, w.rank), std::strerror(err));
  }
}

std::vector<WorkerSupervisor::RunningWorker> WorkerSupervisor::Running() const {
  std::vector<RunningWorker> out;
  for (const auto& [pid, w] : workers_) out.push_back({w.job, w.attempt, w.rank, pid});
  for (const auto& [id, st] : steps_) {
    for (const auto& [rank, r] : st.live) {
      if (r.pid != 0) out.push_back({st.job, st.attempt, rank, r.pid});  // 0: held, not started
    }
  }
  return out;
}

size_t WorkerSupervisor::RunningOf(const std::string& job, uint32_t attempt) const {
  size_t n = 0;
  for (const auto& [pid, w] : workers_) n += w.job == job && (attempt == 0 || w.attempt == attempt);
  for (const auto& [id, st] : steps_) {
    if (st.job != job || (attempt != 0 && st.attempt != attempt)) continue;
    for (const auto& [rank, r] : st.live) n += r.pid != 0;
  }
  return n;
}

void WorkerSupervisor::Stop(const std::string& job, uint32_t attempt,
                            std::chrono::milliseconds grace, Clock::time_point now,
                            const StopWarning& warning) {
  for (auto& [pid, w] : workers_) {
    if (w.job != job || (attempt != 0 && w.attempt != attempt)) continue;
    StopWorker(pid, w, grace, now, warning);
  }
  for (auto& [id, st] : steps_) {
    if (st.job != job || (attempt != 0 && st.attempt != attempt) || st.live.empty()) continue;
    StopStep(st, grace, now, warning);
  }
}

void WorkerSupervisor::Warn(const std::string& job, uint32_t attempt, int signal) {
  if (signal == 0) return;
  for (auto& [pid, w] : workers_) {
    if (w.job != job || (attempt != 0 && w.attempt != attempt)) continue;
    if (w.term_sent || w.kill_sent) continue;
    spdlog::info("supervisor: warning {} (pid {}) with {}", Describe(w.job, w.attempt, w.rank), pid,
                 strsignal(signal));
    SignalGroup(w, signal);
  }
  for (auto& [id, st] : steps_) {
    if (st.job != job || (attempt != 0 && st.attempt != attempt) || st.live.empty()) continue;
    if (st.term_sent || st.kill_sent) continue;
    spdlog::info("supervisor: warning job {} attempt {} (step pid {}) with {}", st.job, st.attempt,
                 st.pid, strsignal(signal));
    if (WriteStepRequest(st, "warn", StopWarning{signal, std::chrono::milliseconds(0)})) {
      SignalStep(st, SIGUSR2);
    }
  }
}

void WorkerSupervisor::StopRank(const std::string& job, uint32_t attempt, uint32_t rank,
                                std::chrono::milliseconds grace, Clock::time_point now) {
  for (auto& [pid, w] : workers_) {
    if (w.job == job && w.attempt == attempt && w.rank == rank) StopWorker(pid, w, grace, now, {});
  }
  for (auto& [id, st] : steps_) {
    if (st.job != job || st.attempt != attempt || !st.live.contains(rank)) continue;
    if (st.live.size() == 1) {
      StopStep(st, grace, now, {});
    } else {
      spdlog::warn("supervisor: {} shares its step with {} other rank(s): not stopped alone",
                   Describe(job, attempt, rank), st.live.size() - 1);
    }
  }
}

void WorkerSupervisor::StopWorker(pid_t pid, Worker& w, std::chrono::milliseconds grace,
                                  Clock::time_point now, const StopWarning& warning) {
  if (w.kill_sent) return;
  if (grace.count() <= 0) {
    spdlog::info("supervisor: stopping {} (pid {}) with SIGKILL",
                 Describe(w.job, w.attempt, w.rank), pid);
    SignalGroup(w, SIGKILL);
    w.kill_sent = true;
    w.kill_at.reset();
    w.term_at.reset();
    return;
  }
  if (warning.signal != 0 && !w.term_sent && !w.term_at) {
    spdlog::info("supervisor: stopping {} (pid {}): {}, SIGTERM in {} ms",
                 Describe(w.job, w.attempt, w.rank), pid, strsignal(warning.signal),
                 warning.grace.count());
    SignalGroup(w, warning.signal);
    w.term_at = now + std::max(warning.grace, std::chrono::milliseconds(0));
  }
  // A warning under way keeps its grace: SIGTERM at its end, SIGKILL `grace` after.
  if (w.term_at) {
    const Clock::time_point deadline = std::max(now, *w.term_at) + grace;
    if (!w.kill_at || deadline < *w.kill_at) w.kill_at = deadline;
    return;
  }
  Clock::time_point deadline = now + grace;
  if (!w.term_sent) {
    spdlog::info("supervisor: stopping {} (pid {}): SIGTERM, SIGKILL in {} ms",
                 Describe(w.job, w.attempt, w.rank), pid, grace.count());
    SignalGroup(w, SIGTERM);
    w.term_sent = true;
  }
  if (!w.kill_at || deadline < *w.kill_at) w.kill_at = deadline;
}

std::optional<std::chrono::milliseconds> WorkerSupervisor::Tick(Clock::time_point now) {
  std::optional<Clock::time_point> next;
  for (auto& [pid, w] : workers_) {
    if (w.term_at && *w.term_at <= now && !w.kill_sent) {
      spdlog::info("supervisor: {} (pid {}) outlived its warning: SIGTERM",
                   Describe(w.job, w.attempt, w.rank), pid);
      SignalGroup(w, SIGTERM);
      w.term_sent = true;
      w.term_at.reset();
    }
    if (w.term_at && (!next || *w.term_at < *next)) next = w.term_at;
    if (!w.kill_at) continue;
    if (*w.kill_at <= now) {
      spdlog::info("supervisor: {} (pid {}) outlived its grace: SIGKILL",
                   Describe(w.job, w.attempt, w.rank), pid);
      SignalGroup(w, SIGKILL);
      w.kill_sent = true;
      w.kill_at.reset();
    } else if (!next || *w.kill_at < *next) {
      next = w.kill_at;
    }
  }
  for (auto& [id, st] : steps_) {
    if (!st.kill_at) continue;
    if (*st.kill_at <= now) {
      spdlog::info(
          "supervisor: step of job {} attempt {} (pid {}) outlived its grace: SIGKILL "
          "to its ranks",
          st.job, st.attempt, st.pid);
      SignalStep(st, SIGUSR1);
      st.kill_sent = true;
      st.kill_at.reset();
    } else if (!next || *st.kill_at < *next) {
      next = st.kill_at;
    }
  }
  if (auto at = standby_ ? standby_->Tick(now) : std::nullopt; at && (!next || *at < *next))
    next = at;
  if (!next) return std::nullopt;
  return std::chrono::ceil<std::chrono::milliseconds>(*next - now);
}

std::vector<WorkerExit> WorkerSupervisor::Reap() {
  std::vector<WorkerExit> exits;
  while (true) {
    // Peeked first: the exited leader stays a zombie, which keeps its pgid from being reused
    // while its group is killed below. Then the real reap.
    const pid_t pid = platform::PeekExitedChild();
    if (pid < 0) {
      if (errno != ECHILD) spdlog::error("supervisor: waitid: {}", std::strerror(errno));
      break;
    }
    if (pid == 0) break;  // children exist, none has exited

    Step* step = nullptr;
    for (auto& [id, st] : steps_) {
      if (st.child && !st.gone && st.pid == pid) step = &st;
    }
    auto it = workers_.find(pid);
    if (it != workers_.end()) SignalGroup(it->second, SIGKILL);

    int status = 0;
    pid_t reaped;
    do {
      reaped = waitpid(pid, &status, WNOHANG);
    } while (reaped < 0 && errno == EINTR);
    if (reaped != pid) {
      // waitid just reported it as a zombie; only another reaper in this process could take it.
      spdlog::error("supervisor: waitpid({}) after waitid: {}", pid,
                    reaped < 0 ? std::strerror(errno) : "not exited");
      break;
    }

    int exit_code = 0, sig = 0;
    if (WIFEXITED(status)) {
      exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      sig = WTERMSIG(status);
      exit_code = 128 + sig;
    }
    if (step != nullptr) {
      // Its records are read below, now that it can write no more.
      step->gone = true;
      if (exit_code != 0) {
        spdlog::warn("supervisor: step of job {} attempt {} (pid {}) ended with code {}; see {}",
                     step->job, step->attempt, pid, exit_code, step->dir + "/step.log");
      }
      continue;
    }
    if (standby_ && standby_->Reaped(pid, Clock::now())) continue;
    if (it == workers_.end()) {
      spdlog::info("supervisor: reaped unknown child pid {} (exit code {}, signal {})", pid,
                   exit_code, sig);
      continue;
    }
    const Worker& w = it->second;
    if (sig != 0) {
      spdlog::info("supervisor: {} (pid {}) killed by {}", Describe(w.job, w.attempt, w.rank), pid,
                   strsignal(sig));
    } else {
      spdlog::info("supervisor: {} (pid {}) exited with code {}",
                   Describe(w.job, w.attempt, w.rank), pid, exit_code);
    }
    exits.push_back(WorkerExit{w.job, w.attempt, w.rank, pid, exit_code, sig, ""});
    workers_.erase(it);
  }
  ReapSteps(&exits);
  return exits;
}

size_t WorkerSupervisor::running() const {
  size_t n = workers_.size();
  for (const auto& [id, st] : steps_) n += st.live.size();
  return n;
}

size_t WorkerSupervisor::running(const std::string& job) const {
  size_t n = std::count_if(workers_.begin(), workers_.end(),
                           [&job](const auto& entry) { return entry.second.job == job; });
  for (const auto& [id, st] : steps_) {
    if (st.job == job) n += st.live.size();
  }
  return n;
}

WorkerSupervisor::Leftovers WorkerSupervisor::LeftoversOf(const std::string& job,
                                                          uint32_t attempt) const {
  Leftovers out;
  // Direct workers have no cgroup: what they leave is found only by the sweep.
  out.running = std::any_of(workers_.begin(), workers_.end(), [&](const auto& entry) {
    return entry.second.job == job && entry.second.attempt == attempt;
  });
  out.uncontained = out.running;
  bool any = false;
  for (const auto& [id, st] : steps_) {
    if (st.job != job || st.attempt != attempt) continue;
    any = true;
    if (!st.live.empty()) out.running = true;
    if (!st.done && !st.gone) {
      out.winding = true;
    } else if (!st.done || !st.contained || st.corrupt) {
      out.uncontained = true;  // it died, wrote garbage, or had no cgroup to kill
    }
  }
  if (!any) out.uncontained = true;
  return out;
}

bool WorkerSupervisor::IsRunning(const std::string& job, uint32_t attempt, uint32_t rank) const {
  for (const auto& [id, st] : steps_) {
    if (st.job == job && st.attempt == attempt && st.live.contains(rank)) return true;
  }
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& entry) {
    const Worker& w = entry.second;
    return w.job == job && w.attempt == attempt && w.rank == rank;
  });
}

std::vector<WorkerExit> WorkerSupervisor::KillAllAndWait(std::chrono::milliseconds timeout) {
  if (running() != 0) spdlog::info("supervisor: killing {} worker(s)", running());
  for (auto& [pid, w] : workers_) {
    SignalGroup(w, SIGKILL);
    w.kill_sent = true;
    w.kill_at.reset();
  }
  for (auto& [id, st] : steps_) {
    if (st.gone) continue;
    SignalStep(st, SIGUSR1);  // the step SIGKILLs its ranks, records their exits and ends
    st.kill_sent = true;
    st.kill_at.reset();
  }
  return WaitGone(timeout, true);
}

std::vector<WorkerExit> WorkerSupervisor::KillDirectAndWait(std::chrono::milliseconds timeout) {
  if (!workers_.empty()) spdlog::info("supervisor: killing {} direct worker(s)", workers_.size());
  for (auto& [pid, w] : workers_) {
    SignalGroup(w, SIGKILL);
    w.kill_sent = true;
    w.kill_at.reset();
  }
  return WaitGone(timeout, false);
}

std::vector<WorkerExit> WorkerSupervisor::WaitGone(std::chrono::milliseconds timeout,
                                                   bool steps_too) {
  auto busy = [&] {
    if (!workers_.empty()) return true;
    if (!steps_too) return false;
    return std::any_of(steps_.begin(), steps_.end(),
                       [](const auto& e) { return !e.second.gone || !e.second.live.empty(); });
  };
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<WorkerExit> exits = Reap();
  // SIGKILLed processes die within microseconds to a few milliseconds; a short, growing sleep
  // keeps this cheap without owning SIGCHLD, which belongs to the loop's SignalWatch.
  auto nap = std::chrono::microseconds(200);
  while (busy() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::min<Clock::duration>(nap, deadline - Clock::now()));
    nap = std::min(nap * 2, std::chrono::microseconds(10'000));
    std::vector<WorkerExit> more = Reap();
    exits.insert(exits.end(), more.begin(), more.end());
  }
  if (busy()) {
    spdlog::warn("supervisor: {} worker(s) not reaped within {} ms", running(), timeout.count());
  }
  return exits;
}

}  // namespace trainlet::agent
