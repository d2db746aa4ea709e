#include "agent/health_checker.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/platform/descriptors.h"

namespace trainlet::agent {
namespace fs = std::filesystem;
namespace {

// Printed by the wrapper after the program ends: the last such line on the pipe is the status.
constexpr std::string_view kExitMarker = "trainlet-health-exit=";

// "$0" is the program; its status is printed after its output, on a line of its own.
constexpr const char* kWrapper =
    "exec 2>&1; \"$0\"; rc=$?; printf '\\n%s%d\\n' 'trainlet-health-exit=' \"$rc\"";

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

std::string FormatBytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return std::to_string(b >> 30) + " GiB";
  return std::to_string(b >> 20) + " MiB";
}

}  // namespace

int CountGpusFromSysfs() {
  int n = 0;
  std::error_code ec;
  // NVIDIA's driver lists one directory per GPU it holds, by PCI bus id.
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    ++n;
  }
  // AMD: DRM cards whose PCI vendor is 0x1002 (renderD* and connectors are skipped).
  for (const auto& e : fs::directory_iterator("/sys/class/drm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("card", 0) != 0 || name.find('-') != std::string::npos) continue;
    std::ifstream vendor(e.path() / "device" / "vendor");
    std::string v;
    if (vendor >> v && v == "0x1002") ++n;
  }
  return n;
}

int64_t FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

HealthChecker::HealthChecker(HealthCheckConfig config, ProcessSpawner* spawner,
                             std::vector<std::string> env, GpuCounter count_gpus,
                             FreeSpace free_space, AcceleratorHealth accelerator_health)
    : config_(std::move(config)),
      spawner_(spawner),
      env_(std::move(env)),
      count_gpus_(count_gpus ? std::move(count_gpus) : GpuCounter(CountGpusFromSysfs)),
      free_space_(free_space ? std::move(free_space) : FreeSpace(FreeBytes)),
      accelerator_health_(std::move(accelerator_health)),
      baseline_gpus_(config_.check_gpu_count ? count_gpus_() : -1) {}

HealthChecker::~HealthChecker() {
  if (pid_ > 0) spawner_->Kill(-pid_, SIGKILL);
  if (fd_ >= 0) close(fd_);
}

std::chrono::milliseconds HealthChecker::Tick(Clock::time_point now) {
  if (pid_ > 0 && now >= deadline_) {
    spawner_->Kill(-pid_, SIGKILL);
    FinishProgram("health check program " + config_.program + " timed out after " +
                  std::to_string(config_.timeout.count()) + " ms" +
                  (output_.empty() ? "" : ": " + OneLine(output_)));
  }
  if (now >= next_run_) {
    next_run_ = now + config_.interval;
    std::string builtin;
    if (config_.min_free_disk_bytes > 0) {
      const int64_t free = free_space_(config_.state_dir);
      if (free >= 0 && static_cast<uint64_t>(free) < config_.min_free_disk_bytes) {
        builtin = "state dir " + config_.state_dir + " has " + FormatBytes(free) +
                  " free, under the " + FormatBytes(config_.min_free_disk_bytes) + " minimum";
      }
    }
    if (builtin.empty() && baseline_gpus_ >= 0) {
      const int gpus = count_gpus_();
      if (gpus >= 0 && gpus != baseline_gpus_) {
        builtin = "GPU count changed: " + std::to_string(gpus) + " now, " +
                  std::to_string(baseline_gpus_) + " when the agent started";
      }
    }
    if (builtin.empty() && accelerator_health_) builtin = accelerator_health_();
    builtin_verdict_ = builtin;
    if (!config_.program.empty() && pid_ <= 0) StartProgram(now);
    Recompute();
  }
  auto next = next_run_;
  if (pid_ > 0) next = std::min(next, deadline_);
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::ceil<std::chrono::milliseconds>(next - now));
}

void HealthChecker::StartProgram(Clock::time_point now) {
  int pipe_fds[2];
  if (platform::OpenPipe(pipe_fds) != 0) {
    program_verdict_ = std::string("health check program: pipe: ") + std::strerror(errno);
    return;
  }
  ProcessSpawner::Request req;
  req.argv = {"/bin/sh", "-c", kWrapper, config_.program};
  req.envp = env_;
  req.stdout_fd = pipe_fds[1];
  req.stderr_fd = pipe_fds[1];
  auto pid = spawner_->Spawn(req);
  close(pipe_fds[1]);
  if (!pid.ok()) {
    close(pipe_fds[0]);
    program_verdict_ = "health check program " + config_.program + ": " + pid.status().message();
    return;
  }
  fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  pid_ = *pid;
  fd_ = pipe_fds[0];
  deadline_ = now + config_.timeout;
  output_.clear();
  output_truncated_ = false;
  pid_reaped_ = false;
}

void HealthChecker::AddPollItems(std::vector<zmq_pollitem_t>& items) const {
  if (fd_ >= 0) items.push_back({nullptr, fd_, ZMQ_POLLIN, 0});
}

void HealthChecker::OnPolled(const std::vector<zmq_pollitem_t>& items, Clock::time_point now) {
  if (fd_ < 0) return;
  for (const auto& item : items) {
    if (item.socket == nullptr && item.fd == fd_ && item.revents != 0) {
      ReadOutput(now);
      return;
    }
  }
}

void HealthChecker::ReadOutput(Clock::time_point now) {
  (void)now;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) {
      // Keep the head for the reason and the tail for the exit marker.
      output_.append(buf, static_cast<size_t>(n));
      if (output_.size() > 4 * kMaxOutput) {
        output_.erase(kMaxOutput, output_.size() - 3 * kMaxOutput);
        output_truncated_ = true;
      }
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // EOF: the wrapper has ended (or closed its output)
  }
  const size_t at = output_.rfind(kExitMarker);
  if (at == std::string::npos) {
    FinishProgram("health check program " + config_.program + " ended without a status" +
                  (output_.empty() ? "" : ": " + OneLine(output_)));
    return;
  }
  const int code = std::atoi(output_.c_str() + at + kExitMarker.size());
  std::string shown = OneLine(output_.substr(0, at));
  if (shown.size() > kMaxOutput || output_truncated_) {
    shown = shown.substr(0, kMaxOutput) + " ...";
  }
  if (code == 0) {
    FinishProgram("");
  } else {
    // The shell reports death by signal N as 128+N.
    FinishProgram("health check program " + config_.program +
                  (code > 128 ? " was killed by signal " + std::to_string(code - 128)
                              : " exited " + std::to_string(code)) +
                  (shown.empty() ? "" : ": " + shown));
  }
}

void HealthChecker::FinishProgram(const std::string& verdict) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid_ > 0 && !pid_reaped_) unreaped_.push_back(pid_);
  Reap();
  pid_ = -1;
  program_verdict_ = verdict;
  if (verdict.empty() && output_.size() > kExitMarker.size() + 3) {
    spdlog::debug("health check program passed");
  }
  Recompute();
}

void HealthChecker::Reap() {
  if (pid_ > 0 && !pid_reaped_) {
    // Exited before its output was read to the end: the verdict still comes from the pipe.
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) pid_reaped_ = true;
  }
  // The output pipe's EOF usually comes before the exit, so a finished program may still wait.
  for (auto it = unreaped_.begin(); it != unreaped_.end();) {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(*it, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    // ECHILD: the supervisor took it first; the status came from the pipe anyway.
    it = (r == *it || (r < 0 && errno == ECHILD)) ? unreaped_.erase(it) : it + 1;
  }
}

void HealthChecker::Recompute() {
  std::string reason = !program_verdict_.empty() ? program_verdict_ : builtin_verdict_;
  if (!program_verdict_.empty() && !builtin_verdict_.empty()) {
    reason = builtin_verdict_ + "; " + program_verdict_;
  }
  if (reason != reason_) {
    if (reason.empty()) {
      spdlog::info("node is healthy again");
    } else {
      spdlog::warn("node is unhealthy: {}", reason);
    }
  }
  reason_ = std::move(reason);
}

}  // namespace trainlet::agent
