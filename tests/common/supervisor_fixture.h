// What every test of WorkerSupervisor and of the things built on it (steps, exec sessions) sets up
// the way the agent does: the signals the agent's loop reads from its SignalWatch are blocked, so
// SIGCHLD waits for Reap() instead of killing nothing and being lost.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "agent/worker_supervisor.h"
#include "common/platform/process_info.h"

namespace trainlet::testing {

// For a fixture's SetUpTestSuite: blocks SIGCHLD, SIGTERM and SIGINT as the agent does, and
// quiets the supervisor, which logs every start and exit.
inline void BlockAgentSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ASSERT_EQ(sigprocmask(SIG_BLOCK, &set, nullptr), 0);
  spdlog::set_level(spdlog::level::warn);
}

// True while `pid` runs: it exists and is not a zombie waiting to be reaped.
inline bool Alive(pid_t pid) { return kill(pid, 0) == 0 && !platform::IsZombie(pid); }

// Supervisor options for steps under `dir`/steps, run by the trainlet-step of this build.
inline agent::WorkerSupervisor::Options StepOptionsUnder(const std::filesystem::path& dir) {
  agent::WorkerSupervisor::Options options;
  options.steps_dir = (dir / "steps").string();
  options.step_binary = std::string(TRAINLET_BINARY_DIR) + "/bin/trainlet-step";
  options.step_start_timeout = std::chrono::seconds(10);
  EXPECT_TRUE(std::filesystem::exists(options.step_binary)) << options.step_binary;
  return options;
}

}  // namespace trainlet::testing
