// The end-of-attempt sweep (agent/process_sweep.h) over real processes: it finds a process whose
// environment holds every tag, and not one that holds some of them, even twice over.
#include "agent/process_sweep.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/platform/process_info.h"

namespace trainlet::agent {
namespace {

using namespace std::chrono_literals;

pid_t Spawn(std::vector<std::string> env) {
  std::vector<std::string> argv = {"/bin/sleep", "30"};
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), envp.data()), 0);
  return pid;
}

// Until `pid` has exec'd (its environment is the one given).
void WaitExec(pid_t pid, const std::string& entry) {
  std::string block;
  for (int i = 0; i < 300; ++i) {
    if (platform::ReadProcessEnvironment(pid, &block) &&
        block.find(entry + '\0') != std::string::npos)
      return;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "pid " << pid << " never showed " << entry;
}

TEST(ProcessSweep, FindsEveryTagNotSomeOfThemTwice) {
  const std::string job = "sweep-" + std::to_string(getpid());
  const pid_t all = Spawn({"PATH=/bin", "TRAINLET_JOB=" + job, "TRAINLET_ATTEMPT=2"});
  // The job's tag twice, the attempt's not at all: a count of matching entries would take it.
  const pid_t some = Spawn({"TRAINLET_JOB=" + job, "TRAINLET_JOB=" + job, "TRAINLET_ATTEMPT=3"});
  WaitExec(all, "TRAINLET_ATTEMPT=2");
  WaitExec(some, "TRAINLET_ATTEMPT=3");
  const auto found = FindTaggedProcesses({{"TRAINLET_JOB", job}, {"TRAINLET_ATTEMPT", "2"}});
  EXPECT_EQ(found, std::vector<pid_t>{all});
  EXPECT_EQ(KillTaggedProcesses({{"TRAINLET_JOB", job}, {"TRAINLET_ATTEMPT", "2"}}), 1u);
  int status = 0;
  ASSERT_EQ(waitpid(all, &status, 0), all);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  kill(some, SIGKILL);
  waitpid(some, nullptr, 0);
  EXPECT_TRUE(FindTaggedProcesses({{"TRAINLET_JOB", job}}).empty());
}

}  // namespace
}  // namespace trainlet::agent
