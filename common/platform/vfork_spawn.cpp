#include "common/platform/vfork_spawn.h"

#if defined(__linux__)

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <utility>

#include "common/platform/raw_syscall.h"

namespace trainlet::platform {
namespace {

constexpr size_t kChildStackBytes = 32 * 1024;

// What the child reads and reports back: it shares the caller's memory, and the caller reads the
// report only once the child has exec'ed or exited.
struct ChildState {
  const VforkSpawnPlan* plan = nullptr;
  // The signals whose disposition the child sets back to the default: bit sig - 1. Exec itself
  // does that for every caught signal; an ignored one stays ignored through it.
  uint64_t to_default = ~uint64_t{0};
  int dev_null = -1;  // the caller's /dev/null (read-only, above 2), or -1: the child opens it
  int err = 0;
  int stage = static_cast<int>(VforkSpawnStage::kNone);
};

// The kernel's struct sigaction (x86-64 and AArch64 alike), for the raw rt_sigaction.
struct KernelSigaction {
  unsigned long handler = 0;  // SIG_DFL
  unsigned long flags = 0;
  unsigned long restorer = 0;
  unsigned long mask = 0;
};

// Every signal, glibc's internal ones too (hence not sigfillset): nothing is delivered to a child
// while it runs on the caller's memory with the caller's handlers.
long BlockAllSignals(sigset_t* old) {
  sigset_t all;
  std::memset(&all, 0xff, sizeof all);
  return RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&all),
                    reinterpret_cast<long>(old), _NSIG / 8);
}

void RestoreSignals(const sigset_t* old) {
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(old), 0, _NSIG / 8);
}

[[noreturn]] __attribute__((always_inline)) inline void ChildFails(ChildState* state,
                                                                   VforkSpawnStage stage,
                                                                   long result) {
  state->err = static_cast<int>(-result);
  __atomic_store_n(&state->stage, static_cast<int>(stage), __ATOMIC_RELEASE);
  for (;;) RawSyscall(SYS_exit_group, 127);
}

// The child, on a stack of its own (VforkSpawn's frame, or a SpawnBatch slot). Raw system calls
// only: it shares the caller's memory, and with SpawnBatch the caller runs on meanwhile, so it
// writes nothing but its ChildState (not even errno), allocates nothing, takes no lock and never
// returns (exit or exec).
__attribute__((no_sanitize_address)) int Child(void* arg) {
  auto* state = static_cast<ChildState*>(arg);
  const VforkSpawnPlan& plan = *state->plan;
  // Every signal is still blocked: no handler of the caller can run here. The dispositions
  // asked for go back to the default (an ignored one too) before the mask opens at the exec.
  const KernelSigaction dfl;
  for (long sig = 1; sig < _NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP && (state->to_default >> (sig - 1) & 1) != 0) {
      RawSyscall(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, sizeof dfl.mask);
    }
  }
  long r = plan.new_session ? RawSyscall(SYS_setsid) : RawSyscall(SYS_setpgid, 0, 0);
  if (r < 0) ChildFails(state, VforkSpawnStage::kSetup, r);
  // A source descriptor among 0-2 would be replaced before it is copied: moved to 3 or above.
  long out = plan.stdout_fd;
  if (out <= STDERR_FILENO) out = RawSyscall(SYS_fcntl, out, F_DUPFD, STDERR_FILENO + 1);
  long err = out;
  if (plan.stderr_fd != plan.stdout_fd) {
    err = plan.stderr_fd;
    if (err <= STDERR_FILENO) err = RawSyscall(SYS_fcntl, err, F_DUPFD, STDERR_FILENO + 1);
  }
  if (out < 0) ChildFails(state, VforkSpawnStage::kSetup, out);
  if (err < 0) ChildFails(state, VforkSpawnStage::kSetup, err);
  // /dev/null: the caller's open one (above 2, closed below with the rest), else opened here.
  const long in = state->dev_null >= 0 ? state->dev_null
                                       : RawSyscall(SYS_openat, AT_FDCWD,
                                                    reinterpret_cast<long>("/dev/null"), O_RDONLY);
  if (in < 0) ChildFails(state, VforkSpawnStage::kSetup, in);
  if (in != STDIN_FILENO) {
    if ((r = RawSyscall(SYS_dup3, in, STDIN_FILENO, 0)) < 0) {
      ChildFails(state, VforkSpawnStage::kSetup, r);
    }
    if (state->dev_null < 0) RawSyscall(SYS_close, in);
  }
  if ((r = RawSyscall(SYS_dup3, out, STDOUT_FILENO, 0)) < 0 ||
      (r = RawSyscall(SYS_dup3, err, STDERR_FILENO, 0)) < 0) {
    ChildFails(state, VforkSpawnStage::kSetup, r);
  }
  // Descriptors 3 and up, however many: close_range, or one by one where the kernel lacks it.
  if (RawSyscall(SYS_close_range, 3, ~0u, 0) != 0) {
    struct rlimit limit;
    const bool known =
        RawSyscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&limit)) == 0 &&
        limit.rlim_cur != RLIM_INFINITY;
    const long top = known ? static_cast<long>(limit.rlim_cur) : 65536;
    for (long fd = 3; fd < top; ++fd) RawSyscall(SYS_close, fd);
  }
  if (plan.cpus != nullptr && (r = RawSyscall(SYS_sched_setaffinity, 0, sizeof(cpu_set_t),
                                              reinterpret_cast<long>(plan.cpus))) != 0) {
    ChildFails(state, VforkSpawnStage::kAffinity, r);
  }
  if (plan.cwd != nullptr && (r = RawSyscall(SYS_chdir, reinterpret_cast<long>(plan.cwd))) != 0) {
    ChildFails(state, VforkSpawnStage::kChdir, r);
  }
  const unsigned long none[_NSIG / (8 * sizeof(unsigned long))] = {};
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(none), 0, _NSIG / 8);
  r = RawSyscall(SYS_execve, reinterpret_cast<long>(plan.path), reinterpret_cast<long>(plan.argv),
                 reinterpret_cast<long>(plan.envp));
  ChildFails(state, VforkSpawnStage::kExec, r);
}

// The answer for a child whose set-up is over: exec'ed, or failed and reaped here (as
// posix_spawn does, so that no caller sees it).
VforkSpawnResult Outcome(pid_t pid, const ChildState& state) {
  VforkSpawnResult result;
  const int stage = __atomic_load_n(&state.stage, __ATOMIC_ACQUIRE);
  if (stage == static_cast<int>(VforkSpawnStage::kNone)) {
    result.pid = pid;
    return result;
  }
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  result.err = state.err;
  result.stage = static_cast<VforkSpawnStage>(stage);
  return result;
}

// The signals this process ignores now: those a child must set back to the default itself.
uint64_t IgnoredSignals() {
  uint64_t ignored = 0;
  for (long sig = 1; sig < _NSIG && sig <= 64; ++sig) {
    KernelSigaction now;
    if (RawSyscall(SYS_rt_sigaction, sig, 0, reinterpret_cast<long>(&now), sizeof now.mask) == 0 &&
        now.handler == reinterpret_cast<unsigned long>(SIG_IGN)) {
      ignored |= uint64_t{1} << (sig - 1);
    }
  }
  return ignored;
}

// CLOCK_BOOTTIME in /proc's clock ticks (USER_HZ), as the kernel turns a task's start into the
// stat file's field 22 (in this time namespace, as /proc applies the reader's).
uint64_t BootTicksNow() {
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  static const uint64_t kNsPerTick = 1000000000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  return (static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec)) /
         kNsPerTick;
}

// The start time of a child cloned between the two reads, when both fell in one tick.
uint64_t StartTicks(uint64_t before, uint64_t after) { return before == after ? before : 0; }

VforkSpawnResult CloneFailed(int err) {
  VforkSpawnResult result;
  result.err = err;
  result.stage = VforkSpawnStage::kSetup;
  return result;
}

}  // namespace

VforkSpawnResult VforkSpawn(const VforkSpawnPlan& plan) {
  ChildState state;
  state.plan = &plan;
  sigset_t old;
  BlockAllSignals(&old);
  alignas(64) char stack[kChildStackBytes];
  const pid_t pid = clone(Child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &state);
  const int clone_err = errno;
  RestoreSignals(&old);
  if (pid < 0) return CloneFailed(clone_err);
  return Outcome(pid, state);
}

// A child's stack and what it reads, kept until the kernel clears `running` at its exec or exit.
struct SpawnBatch::Slot {
  alignas(64) char stack[kChildStackBytes];
  VforkSpawnPlan plan;
  cpu_set_t cpus;
  ChildState state;
  pid_t running = 0;  // the CLONE_CHILD_CLEARTID word: nonzero until the exec or exit
  pid_t pid = -1;
  uint64_t start_ticks = 0;  // StartTicks around its clone
  size_t result = 0;         // index in results_
  bool busy = false;
};

SpawnBatch::SpawnBatch(size_t max_pending) : max_pending_(max_pending == 0 ? 1 : max_pending) {}

SpawnBatch::~SpawnBatch() {
  Finish();
  if (dev_null_ >= 0) close(dev_null_);
}

SpawnBatch::Slot* SpawnBatch::FreeSlot() {
  if (!slots_) {
    // Not zeroed: a child touches only the top of its stack.
    slots_ = std::make_unique_for_overwrite<Slot[]>(max_pending_);
    ignored_ = IgnoredSignals();
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    dev_null_ = fd < 0 || fd > STDERR_FILENO ? fd : fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (fd >= 0 && fd != dev_null_) close(fd);
  }
  for (size_t i = 0; i < max_pending_; ++i) {
    Slot& s = slots_[(next_ + i) % max_pending_];
    if (s.busy && __atomic_load_n(&s.running, __ATOMIC_ACQUIRE) == 0) Settle(s);
    if (!s.busy) {
      next_ = (next_ + i + 1) % max_pending_;
      return &s;
    }
  }
  // All are in use: the one at the cursor is waited for (slots are taken in turn from it, so it
  // is among the oldest).
  Slot& waited = slots_[next_];
  Settle(waited);
  next_ = (next_ + 1) % max_pending_;
  return &waited;
}

void SpawnBatch::Settle(Slot& s) {
  // The kernel wakes this word without FUTEX_PRIVATE_FLAG, so the wait is a shared one. A child
  // killed before its exec by a core-dumping signal leaves the word set: the timeout looks for
  // its exit (without reaping it) instead.
  for (pid_t v; (v = __atomic_load_n(&s.running, __ATOMIC_ACQUIRE)) != 0;) {
    const timespec patience{0, 50 * 1000 * 1000};
    syscall(SYS_futex, &s.running, FUTEX_WAIT, v, &patience, nullptr, 0);
    siginfo_t info{};
    if (__atomic_load_n(&s.running, __ATOMIC_ACQUIRE) != 0 &&
        waitid(P_PID, static_cast<id_t>(s.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == s.pid) {
      break;
    }
  }
  results_[s.result] = Outcome(s.pid, s.state);
  if (results_[s.result].pid > 0) results_[s.result].start_ticks = s.start_ticks;
  s.busy = false;
}

size_t SpawnBatch::Start(const VforkSpawnPlan& plan) {
  const size_t index = results_.size();
  results_.emplace_back();
#if TRAINLET_HAVE_RAW_SYSCALL
  Slot* s = FreeSlot();
  s->plan = plan;
  if (plan.cpus != nullptr) {
    s->cpus = *plan.cpus;
    s->plan.cpus = &s->cpus;
  }
  s->state = ChildState{};
  s->state.plan = &s->plan;
  s->state.to_default = ignored_;
  s->state.dev_null = dev_null_;
  s->running = 1;
  s->result = index;
  sigset_t old;
  BlockAllSignals(&old);
  const uint64_t before = BootTicksNow();
  const pid_t pid =
      clone(Child, s->stack + sizeof s->stack, CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD, &s->state,
            nullptr, nullptr, &s->running);
  const int clone_err = errno;
  s->start_ticks = StartTicks(before, BootTicksNow());
  RestoreSignals(&old);
  if (pid < 0) {
    results_[index] = CloneFailed(clone_err);
    return index;
  }
  s->pid = pid;
  s->busy = true;
#else
  results_[index] = VforkSpawn(plan);  // the child would write this thread's errno
#endif
  return index;
}

std::vector<VforkSpawnResult> SpawnBatch::Finish() {
  if (slots_) {
    for (size_t i = 0; i < max_pending_; ++i) {
      if (slots_[i].busy) Settle(slots_[i]);
    }
  }
  next_ = 0;
  return std::exchange(results_, {});
}

}  // namespace trainlet::platform

#endif
