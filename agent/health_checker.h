// HealthChecker: the node's own health, reported in every heartbeat (Heartbeat.healthy and
// health_reason). An unhealthy node takes no new ranks; what runs there keeps running (see
// docs/operations.md, "Node health").
//
// Every `interval` it runs:
//  - the operator's health check program (like Slurm's HealthCheckProgram), when configured:
//    started through the agent's ProcessSpawner with stdout and stderr on a pipe the agent's loop
//    polls, so the loop never waits for it. A non-zero exit, death by a signal, or running past
//    `timeout` (its process group is then killed) makes the node unhealthy, with the program's
//    output (truncated) as the reason. The program keeps that verdict until its next run.
//  - built-in checks, cheap enough for the loop: free space of the state dir's file system
//    (statvfs) under a threshold, and the number of GPUs the kernel shows differing from the
//    number at start (a GPU fell off the bus, or a driver reload lost one).
//
// The program's exit status travels on the pipe, written by a /bin/sh wrapper after the program
// ends: the agent's WorkerSupervisor reaps every child of the agent, so waitpid cannot be relied on
// for it (Reap() below takes it first when it can, to keep the supervisor's log quiet).
//
// Owned by the agent's loop; no locks.
#pragma once

#include <sys/types.h>
#include <zmq.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "agent/process_spawner.h"

namespace trainlet::agent {

struct HealthCheckConfig {
  std::string program;  // "" for none; an absolute path (it runs with the agent's environment)
  std::chrono::milliseconds interval{30000};
  std::chrono::milliseconds timeout{10000};
  std::string state_dir;             // free space checked here
  uint64_t min_free_disk_bytes = 0;  // 0: no disk check
  bool check_gpu_count = true;       // off when the agent impersonates another machine
};

class HealthChecker {
 public:
  using Clock = std::chrono::steady_clock;
  // Counts the GPUs the kernel shows now, or -1 when it cannot tell. Must be cheap (no hwloc).
  using GpuCounter = std::function<int()>;
  // Free bytes of the file system holding a path, or -1 when it cannot tell.
  using FreeSpace = std::function<int64_t(const std::string&)>;
  // Rechecks the accelerators found at registration; "" while all are healthy, else why not
  // ("GPU 0000:17:00.0: unhealthy: XID 79"). Optional.
  using AcceleratorHealth = std::function<std::string()>;

  // `spawner` is not owned and must outlive the checker. `env` ("K=V") is the program's whole
  // environment. Counters default to the real ones (sysfs/procfs and statvfs); the GPU baseline
  // is taken here.
  HealthChecker(HealthCheckConfig config, ProcessSpawner* spawner, std::vector<std::string> env,
                GpuCounter count_gpus = {}, FreeSpace free_space = {},
                AcceleratorHealth accelerator_health = {});
  // Kills a check still running.
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Runs the checks when they are due and kills a program past its timeout. Returns how long
  // until it next needs to be called.
  std::chrono::milliseconds Tick(Clock::time_point now);
  // The program's output pipe, while one runs.
  void AddPollItems(std::vector<zmq_pollitem_t>& items) const;
  void OnPolled(const std::vector<zmq_pollitem_t>& items, Clock::time_point now);
  // Reaps the program's process if it has exited (call on SIGCHLD, before the supervisor).
  void Reap();

  bool healthy() const { return reason_.empty(); }
  // "" when healthy, else the failing check: "health check program /x exited 1: <output>".
  const std::string& reason() const { return reason_; }
  bool running() const { return pid_ > 0; }

  // At most this much of the program's output is kept for the reason.
  static constexpr size_t kMaxOutput = 512;

 private:
  void StartProgram(Clock::time_point now);
  void ReadOutput(Clock::time_point now);
  void FinishProgram(const std::string& verdict);  // "" for a pass
  void Recompute();

  // Constant after construction.
  const HealthCheckConfig config_;
  ProcessSpawner* const spawner_;
  const std::vector<std::string> env_;
  const GpuCounter count_gpus_;
  const FreeSpace free_space_;
  const AcceleratorHealth accelerator_health_;
  const int baseline_gpus_;

  // Owned by the loop.
  Clock::time_point next_run_{};
  pid_t pid_ = -1;  // the running program's pid (and pgid), -1 when none
  int fd_ = -1;     // read end of its output pipe
  Clock::time_point deadline_{};
  std::string output_;
  bool output_truncated_ = false;
  bool pid_reaped_ = false;      // the running program's shell has exited and been reaped
  std::vector<pid_t> unreaped_;  // finished programs whose exit Reap() has not collected yet
  std::string program_verdict_;  // the last finished run's failure, "" when it passed
  std::string builtin_verdict_;  // the built-in checks' failure, "" when they pass
  std::string reason_;
};

// The real counters: GPUs from /proc/driver/nvidia/gpus and /sys/class/drm (AMD), free space
// from statvfs.
int CountGpusFromSysfs();
int64_t FreeBytes(const std::string& path);

}  // namespace trainlet::agent
