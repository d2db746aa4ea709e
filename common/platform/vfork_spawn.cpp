#include "common/platform/vfork_spawn.h"

#if defined(__linux__)

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainlet::platform {
namespace {

// What the child reports back: it shares the caller's memory, and the caller reads this only
// once the child has exec'ed or exited.
struct ChildState {
  const VforkSpawnPlan* plan = nullptr;
  volatile int err = 0;
  volatile int stage = static_cast<int>(VforkSpawnStage::kNone);
};

// The raw call: glibc's wrappers leave its own two internal signals out of any mask.
int SetSignalMask(const sigset_t* mask, sigset_t* old) {
  return static_cast<int>(syscall(SYS_rt_sigprocmask, SIG_SETMASK, mask, old, _NSIG / 8));
}

[[noreturn]] void ChildFails(ChildState* state, VforkSpawnStage stage) {
  state->err = errno;
  state->stage = static_cast<int>(stage);
  _exit(127);
}

// Descriptors 3 and up, however many: close_range, or one by one where the kernel lacks it.
void CloseFromThree() {
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
  struct rlimit limit;
  const rlim_t top = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                         ? limit.rlim_cur
                         : 65536;
  for (rlim_t fd = 3; fd < top; ++fd) syscall(SYS_close, static_cast<long>(fd));
}

// A source descriptor among 0-2 would be replaced before it is copied: moved to 3 or above.
int AboveStdio(int fd) { return fd > STDERR_FILENO ? fd : fcntl(fd, F_DUPFD, STDERR_FILENO + 1); }

// The child, on a stack in VforkSpawn's frame while the caller is suspended. Only system calls:
// it shares the caller's memory (no allocation, no lock, no return: _exit or exec).
__attribute__((no_sanitize_address)) int Child(void* arg) {
  auto* state = static_cast<ChildState*>(arg);
  const VforkSpawnPlan& plan = *state->plan;
  // Every signal is still blocked: no handler of the caller can run here. Each disposition goes
  // back to the default (an ignored one too) before the mask opens at the exec.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < _NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // glibc's own: EINVAL
  }
  if (plan.new_session ? setsid() < 0 : setpgid(0, 0) != 0) {
    ChildFails(state, VforkSpawnStage::kSetup);
  }
  const int out = AboveStdio(plan.stdout_fd);
  const int err = plan.stderr_fd == plan.stdout_fd ? out : AboveStdio(plan.stderr_fd);
  if (out < 0 || err < 0) ChildFails(state, VforkSpawnStage::kSetup);
  // Raw calls: glibc's open and close are cancellation points, which read the state of the
  // caller's thread (shared here).
  const int in = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY));
  if (in < 0) ChildFails(state, VforkSpawnStage::kSetup);
  if (in != STDIN_FILENO) {
    if (dup2(in, STDIN_FILENO) < 0) ChildFails(state, VforkSpawnStage::kSetup);
    syscall(SYS_close, in);
  }
  if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0) {
    ChildFails(state, VforkSpawnStage::kSetup);
  }
  CloseFromThree();
  if (plan.cpus != nullptr && sched_setaffinity(0, sizeof(cpu_set_t), plan.cpus) != 0) {
    ChildFails(state, VforkSpawnStage::kAffinity);
  }
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) ChildFails(state, VforkSpawnStage::kChdir);
  sigset_t none;
  sigemptyset(&none);
  SetSignalMask(&none, nullptr);
  execve(plan.path, plan.argv, plan.envp);
  ChildFails(state, VforkSpawnStage::kExec);
}

}  // namespace

VforkSpawnResult VforkSpawn(const VforkSpawnPlan& plan) {
  ChildState state;
  state.plan = &plan;
  // All of them, glibc's internal ones too (hence not sigfillset): nothing is delivered to the
  // child while it runs on the caller's memory with the caller's handlers.
  sigset_t all, old;
  std::memset(&all, 0xff, sizeof all);
  SetSignalMask(&all, &old);
  alignas(64) char stack[32 * 1024];
  const pid_t pid = clone(Child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &state);
  const int clone_err = errno;
  SetSignalMask(&old, nullptr);
  VforkSpawnResult result;
  if (pid < 0) {
    result.err = clone_err;
    result.stage = VforkSpawnStage::kSetup;
    return result;
  }
  if (state.stage != static_cast<int>(VforkSpawnStage::kNone)) {
    // The child exited without exec: reaped here, as posix_spawn does, so no caller sees it.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    result.err = state.err;
    result.stage = static_cast<VforkSpawnStage>(state.stage);
    return result;
  }
  result.pid = pid;
  return result;
}

}  // namespace trainlet::platform

#endif
