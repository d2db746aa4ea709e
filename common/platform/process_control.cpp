#include "common/platform/process_control.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/platform/backend.h"
#include "common/platform/process_info.h"

#if defined(TRAINLET_NATIVE_LINUX)
#include <sys/prctl.h>
#endif

namespace trainlet::platform {

Status BecomeChildSubreaper() {
#if defined(TRAINLET_NATIVE_LINUX)
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return InternalError(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno));
  }
  return Status::Ok();
#else
  return UnavailableError("this platform has no child subreaper");
#endif
}

pid_t PeekExitedChild() {
  // A few rounds at most: each skipped round consumes one stop or continue notification.
  for (int round = 0; round < 64; ++round) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    const bool exited =
        info.si_code == CLD_EXITED || info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    if (info.si_pid == 0 || exited) return info.si_pid;
    siginfo_t drain;  // macOS: a stopped or continued child; Linux never gets here
    std::memset(&drain, 0, sizeof drain);
    waitid(P_PID, static_cast<id_t>(info.si_pid), &drain, WSTOPPED | WCONTINUED | WNOHANG);
  }
  return 0;
}

int KillOrphanedChildren(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  const pid_t self = getpid();
  int killed = 0;
  while (true) {
    // Reap what has died, then look for what still runs.
    pid_t reaped;
    while ((reaped = waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (reaped < 0 && errno == ECHILD) return killed;
    int found = 0;
    for (const pid_t pid : ListProcesses()) {
      if (ParentOf(pid) != self || IsZombie(pid)) continue;
      if (kill(pid, SIGKILL) == 0) {
        ++found;
        ++killed;
      }
    }
    if (Clock::now() >= deadline) return killed;
    // Nothing to kill: the children left are exiting; give them a moment to become zombies.
    std::this_thread::sleep_for(std::chrono::milliseconds(found == 0 ? 5 : 1));
  }
}

int CloseOtherDescriptorsOnSpawn(posix_spawn_file_actions_t* actions, short* spawn_flags) {
#if defined(__linux__)
  (void)spawn_flags;
  return posix_spawn_file_actions_addclosefrom_np(actions, STDERR_FILENO + 1);
#elif defined(__APPLE__)
  // Not compiled on Linux (macOS only). Every descriptor the file actions do not name is closed;
  // the spawner names 0, 1 and 2 (addopen, adddup2).
  (void)actions;
  *spawn_flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
  return 0;
#else
  (void)actions;
  (void)spawn_flags;
  return 0;  // only close-on-exec keeps descriptors from the child here
#endif
}

int ChdirOnSpawn(posix_spawn_file_actions_t* actions, const std::string& dir) {
  return posix_spawn_file_actions_addchdir_np(actions, dir.c_str());
}

}  // namespace trainlet::platform
