#include "agent/standby_step.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/platform/descriptors.h"

namespace trainlet::agent {

StandbyStep::StandbyStep(ProcessSpawner* spawner, Options options)
    : spawner_(spawner), options_(std::move(options)) {}

StandbyStep::~StandbyStep() {
  Drop();
  // It leaves its cgroup (one RCU grace period) and exits; reaped here, unless the caller's
  // reaper already took it (ECHILD).
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (dropped_ > 0 && Clock::now() < deadline) {
    const pid_t r = waitpid(dropped_, nullptr, WNOHANG);
    if (r != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void StandbyStep::StepStarted(Clock::time_point now) { wanted_at_ = now + options_.quiet; }

std::optional<StandbyStep::Clock::time_point> StandbyStep::Tick(Clock::time_point now) {
  if (pid_ > 0 || !wanted_at_) return std::nullopt;
  if (now < *wanted_at_) return wanted_at_;
  wanted_at_.reset();
  if (Status s = Start(); !s.ok()) {
    spdlog::warn("supervisor: no standby step ({}): the next launch starts its step cold",
                 s.message());
  }
  return std::nullopt;
}

Status StandbyStep::Start() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    return InternalError(std::string("socketpair: ") + std::strerror(errno));
  }
  platform::SetDescriptorFlags(sv[0], platform::Blocking::kBlocking);
  platform::SetDescriptorFlags(sv[1], platform::Blocking::kBlocking);
  ProcessSpawner::Request request;
  request.argv = {options_.step_binary, "--standby", options_.cgroup_mode};
  request.cwd = std::string("/");  // (a literal assigned here trips GCC 12's -Wrestrict)
  request.log_path = options_.log_path;
  request.stdout_fd = sv[1];
  request.new_session = true;  // as any step: no session signals of the agent's
  Result<pid_t> pid = spawner_->Spawn(request);
  close(sv[1]);
  if (!pid.ok()) {
    close(sv[0]);
    return pid.status();
  }
  pid_ = *pid;
  socket_ = sv[0];
  spdlog::debug("supervisor: standby step {} started", pid_);
  return Status::Ok();
}

std::optional<StandbyStep::Taken> StandbyStep::Take(const std::string& dir) {
  if (pid_ <= 0) return std::nullopt;
  const std::string line = dir + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = platform::SendNoSignal(socket_, line.data() + done, line.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::warn("supervisor: standby step {} did not take {}: {}", pid_, dir,
                   std::strerror(errno));
      Drop();
      return std::nullopt;
    }
    done += static_cast<size_t>(n);
  }
  Taken taken{pid_, socket_};
  pid_ = 0;
  socket_ = -1;
  return taken;
}

bool StandbyStep::Reaped(pid_t pid, Clock::time_point now) {
  if (pid <= 0) return false;
  if (pid == dropped_) {
    dropped_ = 0;
    return true;
  }
  if (pid != pid_) return false;
  spdlog::warn("supervisor: standby step {} ended before a launch took it; see {}", pid_,
               options_.log_path);
  close(socket_);
  socket_ = -1;
  pid_ = 0;
  (void)now;  // not replaced before the next step starts: a standby that dies would again
  return true;
}

void StandbyStep::Drop() {
  if (socket_ >= 0) close(socket_);
  socket_ = -1;
  if (pid_ > 0) dropped_ = pid_;
  pid_ = 0;
}

}  // namespace trainlet::agent
