#include "agent/exec_sessions.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

namespace trainlet::agent {
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kStdout = 1;
constexpr uint32_t kStderr = 2;

Status CreateEmpty(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("exec output " + path + ": " + std::strerror(errno));
  close(fd);
  return Status::Ok();
}

}  // namespace

ExecSessions::ExecSessions(WorkerSupervisor* supervisor, std::string dir, Send send)
    : supervisor_(supervisor), dir_(std::move(dir)), send_(std::move(send)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) spdlog::error("exec sessions: {}: {}", dir_, ec.message());
  // The output of a session is the launcher's business only.
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  std::string error;
  watch_ = platform::FileWatch::Open(&error);
  if (!watch_) spdlog::warn("exec sessions: no file watch ({}): output is polled", error);
}

ExecSessions::~ExecSessions() {
  for (auto& [id, s] : sessions_) Unwatch(s);
}

std::string ExecSessions::SessionDir(uint64_t exec_id) const {
  return dir_ + "/" + std::to_string(exec_id);
}

size_t ExecSessions::size() const {
  return static_cast<size_t>(std::count_if(sessions_.begin(), sessions_.end(),
                                           [](const auto& e) { return !e.second.exit_sent; }));
}

void ExecSessions::Refuse(uint64_t exec_id, const std::string& why) {
  v1::Envelope env;
  auto* ex = env.mutable_exec_exited();
  ex->set_exec_id(exec_id);
  ex->set_exit_code(255);
  ex->set_error(why);
  send_(std::move(env));
}

void ExecSessions::Watch(Session& s) {
  if (watch_ && watch_->fd() >= 0) {
    s.out_watch = watch_->Add(s.dir + "/stdout");
    s.err_watch = watch_->Add(s.dir + "/stderr");
    if (s.out_watch < 0 || s.err_watch < 0) {
      spdlog::warn("exec {}: cannot watch its output ({}): read on exit only", s.record.exec_id,
                   std::strerror(errno));
    }
  }
  UpdatePolling();
}

void ExecSessions::Unwatch(Session& s) {
  if (watch_) {
    if (s.out_watch > 0) watch_->Remove(s.out_watch);
    if (s.err_watch > 0) watch_->Remove(s.err_watch);
  }
  s.out_watch = s.err_watch = -1;
  s.out.Close();
  s.err.Close();
}

void ExecSessions::UpdatePolling() {
  const bool wanted = (!watch_ || watch_->fd() < 0) &&
                      std::any_of(sessions_.begin(), sessions_.end(),
                                  [](const auto& e) { return !e.second.exit_sent; });
  if (wanted == (poll_timer_ != nullptr)) return;
  if (!wanted) {
    poll_timer_.reset();
    return;
  }
  std::string error;
  poll_timer_ = platform::PeriodicTimer::Open(platform::FileWatch::kPollInterval, &error);
  if (!poll_timer_)
    spdlog::error("exec sessions: cannot poll output ({}): read on exit only", error);
}

void ExecSessions::Start(const v1::ExecStart& start, const std::map<std::string, std::string>& env,
                         const std::string& cwd, const std::vector<unsigned>& cpus) {
  if (sessions_.count(start.exec_id()) != 0) return;  // a duplicate of a known session
  Session s;
  s.dir = SessionDir(start.exec_id());
  s.record.exec_id = start.exec_id();
  s.record.job = start.job();
  s.record.attempt = start.attempt();
  s.record.rank = next_rank_++;
  s.record.grace_ms = start.stop_grace_ms() != 0 ? start.stop_grace_ms()
                                                 : static_cast<uint32_t>(kDefaultStopGrace.count());
  std::error_code ec;
  fs::remove_all(s.dir, ec);  // a leftover of a session the coordinator forgot long ago
  fs::create_directory(s.dir, ec);
  if (ec) return Refuse(start.exec_id(), "exec session dir " + s.dir + ": " + ec.message());
  // The record first: a restarted agent must know every session whose step may exist.
  Status ready = WriteExecRecord(s.dir + "/session.json", s.record);
  if (ready.ok()) ready = CreateEmpty(s.dir + "/stdout");
  if (ready.ok()) ready = CreateEmpty(s.dir + "/stderr");
  if (ready.ok()) ready = s.out.Open(s.dir + "/stdout", 0);
  if (ready.ok()) ready = s.err.Open(s.dir + "/stderr", 0);
  if (!ready.ok()) {
    fs::remove_all(s.dir, ec);
    return Refuse(start.exec_id(), ready.message());
  }

  WorkerLaunch launch;
  launch.job = start.job();
  launch.attempt = start.attempt();
  launch.rank = s.record.rank;
  launch.argv = {"/bin/sh", "-c", start.command()};
  // The node's env wins, as for ranks (PlanLaunches): the start's env carries the job's, and a
  // job must not name the dirs that trainlet-step, as root, gives to the job's user.
  launch.env.insert(start.env().begin(), start.env().end());
  for (const auto& [k, v] : env) launch.env[k] = v;
  launch.cwd = cwd;
  launch.log_path = s.dir + "/stdout";
  launch.stderr_path = s.dir + "/stderr";
  launch.cpus = cpus;  // an orted and the ranks it starts stay inside the job's CPUs
  // An orted starts ranks of the job: it runs as the job's ranks do on this node (the step adds
  // the agent's run_as for what the job leaves unset), with its secrets in that user's files.
  if (start.has_run_as_user()) launch.run_as.job_run_as_user = start.run_as_user();
  if (start.has_run_as_group()) launch.run_as.job_run_as_group = start.run_as_group();
  if (start.has_allow_privilege_escalation())
    launch.run_as.allow_privilege_escalation = start.allow_privilege_escalation();
  if (start.has_fs_group()) launch.run_as.fs_group = start.fs_group();
  auto started = supervisor_->StartStep({launch}, std::chrono::milliseconds(s.record.grace_ms));
  if (started.empty() || !started[0].ok()) {
    // Nothing runs: the step, if it came up at all, ends by itself. Its exit record is not ours.
    const std::string why = started.empty() ? "not started" : started[0].status().message();
    fs::remove_all(s.dir, ec);
    return Refuse(start.exec_id(), why);
  }
  spdlog::info("exec {} for {} attempt {}: pid {} under a step: {}", start.exec_id(), start.job(),
               start.attempt(), *started[0], start.command().substr(0, 200));
  Session& kept = sessions_[start.exec_id()] = std::move(s);
  Watch(kept);
  ReadOutput(kept);
}

void ExecSessions::Restore() {
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.is_directory(ec)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    auto record = ReadExecRecord((dir / "session.json").string());
    if (!record.ok()) {
      // Without a record nothing was started (it is written first), and nobody can be told.
      spdlog::error("exec sessions: cannot restore {}: {}; removing it", dir.string(),
                    record.status().message());
      fs::remove_all(dir, ec);
      continue;
    }
    next_rank_ = std::max(next_rank_, record->rank + 1);
    if (sessions_.count(record->exec_id) != 0) continue;
    if (!supervisor_->StepKnows(record->job, record->attempt, record->rank)) {
      spdlog::warn(
          "exec {} of {} attempt {}: no step ran it (the agent stopped before it "
          "started); reporting it as failed",
          record->exec_id, record->job, record->attempt);
      Refuse(record->exec_id, "the trainlet agent restarted before the command started");
      fs::remove_all(dir, ec);
      continue;
    }
    Session s;
    s.dir = dir.string();
    s.record = *record;
    Status opened = s.out.Open(s.dir + "/stdout", record->acked_stdout);
    if (opened.ok()) opened = s.err.Open(s.dir + "/stderr", record->acked_stderr);
    if (!opened.ok()) spdlog::error("exec {}: {}", record->exec_id, opened.message());
    spdlog::info(
        "exec {} of {} attempt {}: adopted; resending output from byte {} (stdout) "
        "and {} (stderr)",
        record->exec_id, record->job, record->attempt, record->acked_stdout, record->acked_stderr);
    Session& kept = sessions_[record->exec_id] = std::move(s);
    Watch(kept);
    ReadOutput(kept);
  }
}

void ExecSessions::ReadOutput(Session& s) {
  if (held_) return;  // what is new now, Resend() reads from the acknowledged counts anyway
  for (const uint32_t stream : {kStdout, kStderr}) {
    OutputTail& tail = stream == kStdout ? s.out : s.err;
    if (!tail.is_open()) continue;
    Status read = tail.ReadNew([&](uint64_t offset, std::string_view data) {
      v1::Envelope env;
      auto* o = env.mutable_exec_output();
      o->set_exec_id(s.record.exec_id);
      o->set_stream(stream);
      o->set_offset(offset);
      o->set_data(data.data(), data.size());
      Emit(std::move(env));
    });
    if (!read.ok()) {
      spdlog::error("exec {}: {}", s.record.exec_id, read.message());
      tail.Close();  // what follows cannot be read; the exit is still sent
    }
  }
}

void ExecSessions::Cancel(uint64_t exec_id, std::chrono::steady_clock::time_point now) {
  auto it = sessions_.find(exec_id);
  if (it == sessions_.end() || it->second.exited) return;
  Session& s = it->second;
  s.cancelled = true;
  supervisor_->StopRank(s.record.job, s.record.attempt, s.record.rank,
                        std::chrono::milliseconds(s.record.grace_ms), now);
}

void ExecSessions::OnDelivered(
    const google::protobuf::RepeatedPtrField<v1::ExecDelivered>& delivered,
    std::chrono::steady_clock::time_point now) {
  std::map<uint64_t, const v1::ExecDelivered*> listed;
  for (const auto& d : delivered) listed[d.exec_id()] = &d;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    Session& s = it->second;
    auto found = listed.find(it->first);
    if (found == listed.end()) {
      // The coordinator relays it no more: it delivered the exit, or ended the session.
      if (s.exit_sent) {
        Forget(it);
      } else if (!s.cancelled) {
        spdlog::info("exec {} of {}: the coordinator no longer relays it: stopping it", it->first,
                     s.record.job);
        Cancel(it->first, now);
      }
      it = next;
      continue;
    }
    const uint64_t out = found->second->stdout_bytes();
    const uint64_t err = found->second->stderr_bytes();
    if (out != s.record.acked_stdout || err != s.record.acked_stderr) {
      s.record.acked_stdout = out;
      s.record.acked_stderr = err;
      Status written = WriteExecRecord(s.dir + "/session.json", s.record);
      if (!written.ok()) {
        // The older counts stay on disk: a restarted agent resends more, which the coordinator
        // drops. Nothing is lost.
        spdlog::warn("exec {}: {}", it->first, written.message());
      }
    }
    it = next;
  }
}

void ExecSessions::Forget(std::map<uint64_t, Session>::iterator it) {
  Session& s = it->second;
  Unwatch(s);
  std::error_code ec;
  fs::remove_all(s.dir, ec);
  if (ec) spdlog::warn("exec {}: cannot remove {}: {}", it->first, s.dir, ec.message());
  // Only now may the step's record of the exit go: it was our copy of the exit status.
  supervisor_->ExitDelivered(s.record.job, s.record.attempt, s.record.rank);
  sessions_.erase(it);
  UpdatePolling();
}

void ExecSessions::AddPollItems(std::vector<zmq_pollitem_t>& items) const {
  if (sessions_.empty()) return;
  if (watch_ && watch_->fd() >= 0) items.push_back({nullptr, watch_->fd(), ZMQ_POLLIN, 0});
  if (poll_timer_) items.push_back({nullptr, poll_timer_->fd(), ZMQ_POLLIN, 0});
}

void ExecSessions::OnPolled(const std::vector<zmq_pollitem_t>& items) {
  bool fired = false;
  for (const auto& item : items) {
    if (item.socket != nullptr || item.revents == 0) continue;
    if (watch_ && item.fd == watch_->fd() && item.fd >= 0) {
      watch_->Drain();
      fired = true;
    } else if (poll_timer_ && item.fd == poll_timer_->fd()) {
      poll_timer_->Consume();
      fired = true;
    }
  }
  if (!fired) return;
  for (auto& [id, s] : sessions_) {
    if (!s.exit_sent) ReadOutput(s);
  }
}

bool ExecSessions::OnWorkerExit(const WorkerExit& exit) {
  if (exit.rank < kExecRankBase) return false;
  for (auto& [id, s] : sessions_) {
    if (s.record.job == exit.job && s.record.attempt == exit.attempt &&
        s.record.rank == exit.rank) {
      if (!s.exit_sent) SendExit(s, exit);
      return true;
    }
  }
  // An exec rank whose session is gone already: its exit has nobody to go to.
  supervisor_->ExitDelivered(exit.job, exit.attempt, exit.rank);
  return true;
}

void ExecSessions::SendExit(Session& s, const WorkerExit& exit) {
  s.exited = true;
  s.exit = exit;
  // Everything in the files was written before the exit: send it first.
  ReadOutput(s);
  Unwatch(s);
  spdlog::info("exec {} for {} ended: code {} signal {}", s.record.exec_id, s.record.job,
               exit.exit_code, exit.signal);
  SendExitMessage(s);
  s.exit_sent = true;
  UpdatePolling();
}

void ExecSessions::SendExitMessage(const Session& s) {
  v1::Envelope env;
  auto* ex = env.mutable_exec_exited();
  ex->set_exec_id(s.record.exec_id);
  ex->set_exit_code(s.exit.exit_code);
  ex->set_signal(s.exit.signal);
  if (!s.exit.message.empty()) ex->set_error(s.exit.message);
  Emit(std::move(env));
}

void ExecSessions::Emit(v1::Envelope env) {
  if (!held_) send_(std::move(env));
}

void ExecSessions::Hold() { held_ = true; }

void ExecSessions::Report(google::protobuf::RepeatedPtrField<v1::ExecSessionReport>* out) const {
  for (const auto& [id, s] : sessions_) {
    auto* r = out->Add();
    r->set_exec_id(id);
    r->set_job(s.record.job);
    r->set_attempt(s.record.attempt);
    r->set_stdout_bytes(s.record.acked_stdout);
    r->set_stderr_bytes(s.record.acked_stderr);
  }
}

void ExecSessions::Resend() {
  held_ = false;
  for (auto& [id, s] : sessions_) {
    // Reopened at the acknowledged counts: what went out since may have been lost with the
    // coordinator's old connection.
    for (const uint32_t stream : {kStdout, kStderr}) {
      OutputTail& tail = stream == kStdout ? s.out : s.err;
      const uint64_t acked = stream == kStdout ? s.record.acked_stdout : s.record.acked_stderr;
      const std::string path = s.dir + (stream == kStdout ? "/stdout" : "/stderr");
      if (Status opened = tail.Open(path, acked); !opened.ok()) {
        spdlog::error("exec {}: {}", id, opened.message());
      }
    }
    ReadOutput(s);
    if (s.exit_sent) {  // its files are complete: read them to the end again, then the exit
      s.out.Close();
      s.err.Close();
      SendExitMessage(s);
    }
  }
}

}  // namespace trainlet::agent
