// FakeEnv: a platform::Env for unit tests (common/platform/env.h), the way leveldb's tests swap
// in their own Env.
//  - Clocks: the monotonic clock moves only by Advance() (and SleepFor, which advances it instead
//    of sleeping); the wall clock by Advance() too, and Jump() moves it alone, either way, as an
//    NTP step or an operator's `date -s` would.
//  - Hostname, environment, executable path and pid are fixed values a test may set.
//  - Files are real (tests give paths under a TempDir, tests/common/test_dir.h); a test injects
//    the next failure of a write, a directory creation or a lock (FailNextWrite: "disk full").
//  - processes() is a FakeSpawner: it records every request and signal, starts nothing, and
//    fails the next spawn when told.
// Owned by the test's thread. Header-only: any test target that links trainlet_platform can use it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/platform/env.h"

namespace trainlet::testing {

class FakeSpawner final : public platform::ProcessSpawner {
 public:
  struct Signal {
    pid_t target;
    int sig;
  };
  // Pids it hands out, counting up from here: far above any real pid_max (4194304 on Linux), so
  // a fake pid can never signal a real process by mistake.
  static constexpr pid_t kFirstPid = 1 << 30;

  Result<pid_t> Spawn(const Request& request) override {
    requests_.push_back(request);
    if (next_spawn_error_) return std::exchange(next_spawn_error_, std::nullopt).value();
    return next_pid_++;
  }
  int Kill(pid_t pgid_or_pid, int sig) override {
    signals_.push_back({pgid_or_pid, sig});
    return kill_result_;
  }

  // The next Spawn fails with `status` (not OK); the request is still recorded.
  void FailNextSpawn(Status status) { next_spawn_error_ = std::move(status); }
  // What every Kill returns from now on: 0, or an errno value such as ESRCH.
  void SetKillResult(int errno_value) { kill_result_ = errno_value; }

  // Every Spawn request, failed ones included, oldest first.
  const std::vector<Request>& requests() const { return requests_; }
  const std::vector<Signal>& signals() const { return signals_; }

 private:
  std::vector<Request> requests_;
  std::vector<Signal> signals_;
  std::optional<Status> next_spawn_error_;
  pid_t next_pid_ = kFirstPid;
  int kill_result_ = 0;
};

class FakeEnv final : public platform::PosixEnv {
 public:
  // The clocks start at an arbitrary but fixed point, far from zero (a default time_point{} often
  // means "never" to the code under test).
  FakeEnv() : steady_(std::chrono::hours(1000)), wall_ms_(1'700'000'000'000) {}

  // --- Clocks.
  std::chrono::steady_clock::time_point MonotonicNow() override { return steady_; }
  int64_t WallUnixMs() override { return wall_ms_; }
  void SleepFor(std::chrono::microseconds duration) override {
    slept_ += duration;
    Advance(std::chrono::duration_cast<std::chrono::nanoseconds>(duration));
  }
  // Time passes: both clocks move forward together.
  void Advance(std::chrono::nanoseconds by) {
    steady_ += by;
    wall_ms_ += std::chrono::duration_cast<std::chrono::milliseconds>(by).count();
  }
  // The wall clock alone steps (forward or back); the monotonic clock does not notice.
  void Jump(std::chrono::milliseconds by) { wall_ms_ += by.count(); }
  // All SleepFor asked for.
  std::chrono::microseconds slept() const { return slept_; }

  // --- This host and this process.
  Result<std::string> Hostname() override { return hostname_; }
  std::vector<std::string> Environment() override { return environment_; }
  std::string ExecutablePath() override { return executable_; }
  pid_t ProcessId() override { return pid_; }
  // Recorded, never done: the test process stays as it was.
  Status BecomeChildSubreaper() override {
    ++subreaper_calls_;
    return subreaper_status_;
  }
  int subreaper_calls() const { return subreaper_calls_; }
  void set_subreaper_status(Status status) { subreaper_status_ = std::move(status); }
  void set_hostname(std::string name) { hostname_ = std::move(name); }
  void set_environment(std::vector<std::string> env) { environment_ = std::move(env); }
  void set_executable_path(std::string path) { executable_ = std::move(path); }

  // --- Files: real, with injected failures. Each Fail* applies to the next call only.
  void FailNextWrite(Status status) { next_write_error_ = std::move(status); }
  void FailNextCreateDirectories(Status status) { next_mkdir_error_ = std::move(status); }
  void FailNextLock(Status status) { next_lock_error_ = std::move(status); }
  void FailNextRead(Status status) { next_read_error_ = std::move(status); }
  // "disk full", as a full file system reports it.
  static Status DiskFull(const std::string& path) {
    return IoError(path + ": No space left on device");
  }

  Status CreateDirectories(const std::string& path) override {
    if (next_mkdir_error_) return std::exchange(next_mkdir_error_, std::nullopt).value();
    return PosixEnv::CreateDirectories(path);
  }
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    if (next_read_error_) return std::exchange(next_read_error_, std::nullopt).value();
    return PosixEnv::ReadFile(path, max_bytes);
  }
  Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) override {
    if (next_write_error_) return std::exchange(next_write_error_, std::nullopt).value();
    return PosixEnv::WriteFileAtomically(path, data, mode);
  }
  Result<std::unique_ptr<platform::FileLock>> LockFile(const std::string& path) override {
    if (next_lock_error_) return std::exchange(next_lock_error_, std::nullopt).value();
    return PosixEnv::LockFile(path);  // a real flock; its retries sleep on the fake clock
  }

  // --- Processes.
  platform::ProcessSpawner& processes() override { return spawner_; }
  FakeSpawner& spawner() { return spawner_; }

 private:
  std::chrono::steady_clock::time_point steady_;
  int64_t wall_ms_;
  std::chrono::microseconds slept_{0};
  std::string hostname_ = "fake-host";
  std::vector<std::string> environment_ = {"PATH=/usr/bin:/bin", "HOME=/nonexistent"};
  std::string executable_ = "/opt/trainlet/bin/fake";
  pid_t pid_ = 4242;
  int subreaper_calls_ = 0;
  Status subreaper_status_ = Status::Ok();
  std::optional<Status> next_write_error_;
  std::optional<Status> next_mkdir_error_;
  std::optional<Status> next_lock_error_;
  std::optional<Status> next_read_error_;
  FakeSpawner spawner_;
};

}  // namespace trainlet::testing
