#include "agent/exec_sessions.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/platform/descriptors.h"

namespace trainlet::agent {

ExecSessions::~ExecSessions() {
  for (auto& [id, s] : sessions_) {
    if (s.out_fd >= 0) close(s.out_fd);
    if (s.err_fd >= 0) close(s.err_fd);
  }
}

void ExecSessions::Start(const v1::ExecStart& start, const std::map<std::string, std::string>& env,
                         const std::string& cwd) {
  auto refuse = [&](const std::string& why) {
    v1::Envelope env_out;
    auto* ex = env_out.mutable_exec_exited();
    ex->set_exec_id(start.exec_id());
    ex->set_exit_code(255);
    ex->set_error(why);
    send_(std::move(env_out));
  };
  if (sessions_.count(start.exec_id()) != 0) return;  // a duplicate of a running session
  int out[2];
  int err[2];
  if (platform::OpenPipe(out) != 0) return refuse(std::string("pipe: ") + std::strerror(errno));
  if (platform::OpenPipe(err) != 0) {
    close(out[0]);
    close(out[1]);
    return refuse(std::string("pipe: ") + std::strerror(errno));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  WorkerLaunch launch;
  launch.job = start.job();
  launch.attempt = start.attempt();
  launch.rank = next_rank_++;
  launch.argv = {"/bin/sh", "-c", start.command()};
  launch.env = env;
  for (const auto& [k, v] : start.env()) launch.env[k] = v;
  launch.cwd = cwd;
  launch.stdout_fd = out[1];
  launch.stderr_fd = err[1];
  auto pid = supervisor_->Start(launch);
  close(out[1]);
  close(err[1]);
  if (!pid.ok()) {
    close(out[0]);
    close(err[0]);
    return refuse(pid.status().message());
  }
  Session& s = sessions_[start.exec_id()];
  s.job = start.job();
  s.attempt = start.attempt();
  s.rank = launch.rank;
  s.grace_ms = start.stop_grace_ms() != 0 ? start.stop_grace_ms() : 10000;
  s.out_fd = out[0];
  s.err_fd = err[0];
  spdlog::info("exec {} for {} attempt {}: pid {}: {}", start.exec_id(), start.job(),
               start.attempt(), *pid, start.command().substr(0, 200));
}

void ExecSessions::Cancel(uint64_t exec_id, std::chrono::steady_clock::time_point now) {
  auto it = sessions_.find(exec_id);
  if (it == sessions_.end() || it->second.exited) return;
  // Stop() works on a whole attempt; a session is stopped on its own by signalling its group.
  if (supervisor_->IsRunning(it->second.job, it->second.attempt, it->second.rank)) {
    supervisor_->StopRank(it->second.job, it->second.attempt, it->second.rank,
                          std::chrono::milliseconds(it->second.grace_ms), now);
  }
}

void ExecSessions::AddPollItems(std::vector<zmq_pollitem_t>& items) const {
  for (const auto& [id, s] : sessions_) {
    if (s.out_fd >= 0) items.push_back({nullptr, s.out_fd, ZMQ_POLLIN, 0});
    if (s.err_fd >= 0) items.push_back({nullptr, s.err_fd, ZMQ_POLLIN, 0});
  }
}

void ExecSessions::Drain(uint64_t id, Session& s, int& fd, uint32_t stream) {
  char buf[64 * 1024];
  while (fd >= 0) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      v1::Envelope env;
      auto* o = env.mutable_exec_output();
      o->set_exec_id(id);
      o->set_stream(stream);
      o->set_data(buf, static_cast<size_t>(n));
      send_(std::move(env));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    close(fd);  // EOF or a broken pipe: nothing more will come
    fd = -1;
  }
}

void ExecSessions::OnPolled(const std::vector<zmq_pollitem_t>& items) {
  std::vector<uint64_t> touched;
  for (const auto& item : items) {
    if (item.socket != nullptr || item.revents == 0) continue;
    for (auto& [id, s] : sessions_) {
      if (item.fd == s.out_fd) {
        Drain(id, s, s.out_fd, 1);
        touched.push_back(id);
      } else if (item.fd == s.err_fd) {
        Drain(id, s, s.err_fd, 2);
        touched.push_back(id);
      }
    }
  }
  for (uint64_t id : touched) MaybeFinish(id);
}

bool ExecSessions::OnWorkerExit(const WorkerExit& exit) {
  if (exit.rank < kExecRankBase) return false;
  for (auto& [id, s] : sessions_) {
    if (s.job == exit.job && s.attempt == exit.attempt && s.rank == exit.rank) {
      s.exited = true;
      s.exit = exit;
      // Whatever is still in the pipes was written before the exit: send it first.
      Drain(id, s, s.out_fd, 1);
      Drain(id, s, s.err_fd, 2);
      MaybeFinish(id);
      return true;
    }
  }
  return true;  // an exec rank whose session is gone already
}

void ExecSessions::MaybeFinish(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (!s.exited || s.out_fd >= 0 || s.err_fd >= 0) return;
  v1::Envelope env;
  auto* ex = env.mutable_exec_exited();
  ex->set_exec_id(id);
  ex->set_exit_code(s.exit.exit_code);
  ex->set_signal(s.exit.signal);
  spdlog::info("exec {} for {} ended: code {} signal {}", id, s.job, s.exit.exit_code,
               s.exit.signal);
  send_(std::move(env));
  sessions_.erase(it);
}

}  // namespace trainlet::agent
