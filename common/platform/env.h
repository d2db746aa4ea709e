// Env: the one seam between the daemons and the operating system, as leveldb's Env is (STYLE.md):
// the clocks, the host's name, this process's environment and executable, the few file
// operations the daemons' own state needs (directories, small files written atomically, an
// exclusive lock), and process creation (ProcessSpawner). Code that takes an Env& instead of
// calling the OS can be tested with a fake one (tests/common/fake_env.h): a clock that a test
// moves by hand, a wall clock that jumps, a disk that is full, a spawn that fails.
//
// Ownership: an Env outlives everything that was given it; RealEnv() lives for the process.
// Threads: the real Env has no state of its own and any thread may use it. A fake belongs to the
// test's thread unless it says otherwise.
// Errors: failures the OS reports are returned as Status (common/status.h), whose message names
// the path and the system's reason: kNotFound (no such file), kPermission, kExists (a lock held
// elsewhere), kInvalid (a file larger than the caller allows), kIo (anything else the file
// system refused).
//
// Plain libc and the header-only parts of common/status.h, like the rest of trainlet_platform.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/platform/process_spawner.h"
#include "common/status.h"

namespace trainlet::platform {

// An exclusive lock on a file, held from Env::LockFile until this object is destroyed (or the
// process ends, however it ends: the kernel drops it on kill -9 too).
class FileLock {
 public:
  virtual ~FileLock() = default;
  // The locked file, as given to LockFile.
  virtual const std::string& path() const = 0;
  // Sets the locked file's modification time to now. A process can hold a lock while it is
  // stopped (SIGSTOP) or hung, so the holder stamps it on a schedule, and a watcher that sees the
  // stamp stand still knows the holder is not running (trainlet-step, agent/step/step_runner.h).
  virtual Status Touch() = 0;
};

class Env {
 public:
  // LockFile's patience: a process that checks whether the holder lives may hold the lock shared
  // for a moment (trainlet-step does, agent/step/step_runner.cpp), so a busy lock is retried
  // this many times, this far apart (about 1 s in all), before it counts as held elsewhere.
  static constexpr int kLockAttempts = 50;
  static constexpr std::chrono::milliseconds kLockRetryInterval{20};

  virtual ~Env() = default;

  // --- Clocks. Timeouts and liveness use the monotonic clock only; the wall clock is for
  // records (event times, ages) and may jump either way at any time.
  virtual std::chrono::steady_clock::time_point MonotonicNow() = 0;
  // Milliseconds since the Unix epoch.
  virtual int64_t WallUnixMs() = 0;
  // Blocks the calling thread (a fake advances its clock instead).
  virtual void SleepFor(std::chrono::microseconds duration) = 0;

  // --- This host and this process.
  // The host's name (gethostname); an error when the system has none to give.
  virtual Result<std::string> Hostname() = 0;
  // The process environment, each entry "K=V", in the order the process holds them.
  virtual std::vector<std::string> Environment() = 0;
  // This program's own executable, absolute; "" when it cannot be told.
  virtual std::string ExecutablePath() = 0;
  virtual pid_t ProcessId() = 0;
  // Orphaned descendants come to this process to be reaped, not to init (process_control.h,
  // BecomeChildSubreaper). kUnavailable where the system has no such thing; callers log it.
  virtual Status BecomeChildSubreaper() = 0;

  // --- Files.
  // mkdir -p: OK when `path` exists as a directory afterwards.
  virtual Status CreateDirectories(const std::string& path) = 0;
  // The whole of a regular file. kInvalid when it holds more than `max_bytes`.
  virtual Result<std::string> ReadFile(const std::string& path, size_t max_bytes) = 0;
  // Replaces `path` with `data` so that a reader sees the old contents or the new, never part:
  // written to `path`.tmp, made durable, given `mode` (exactly: the umask does not apply) and
  // renamed over `path`. One writer per path at a time.
  virtual Status WriteFileAtomically(const std::string& path, std::string_view data,
                                     mode_t mode) = 0;
  // Opens (creating it 0600) and locks `path` exclusively: flock(LOCK_EX), retried as
  // kLockAttempts/kLockRetryInterval say, sleeping with SleepFor. The descriptor is close-on-exec,
  // so no child inherits the lock. kExists when another open file description holds it still.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;

  // --- Processes: spawning and signalling (process_spawner.h). Owned by the Env.
  virtual ProcessSpawner& processes() = 0;
};

// The real Env over the operating system. Public so that a test's Env can derive from it and
// replace only some of it (tests/common/fake_env.h keeps the real files, for instance).
class PosixEnv : public Env {
 public:
  PosixEnv();
  ~PosixEnv() override;

  std::chrono::steady_clock::time_point MonotonicNow() override;
  int64_t WallUnixMs() override;
  void SleepFor(std::chrono::microseconds duration) override;
  Result<std::string> Hostname() override;
  std::vector<std::string> Environment() override;
  std::string ExecutablePath() override;
  pid_t ProcessId() override;
  Status BecomeChildSubreaper() override;
  Status CreateDirectories(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override;
  Status WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  ProcessSpawner& processes() override;

 private:
  std::unique_ptr<ProcessSpawner> spawner_;  // MakePosixProcessSpawner(): stateless
};

// The process-wide real Env (a PosixEnv), created on first use and never destroyed.
Env& RealEnv();

// Makes `path` a directory that only its owner may enter: mode 0700 exactly, whatever the umask
// and whatever mode it had. Missing parents are created as mkdir -p does (with the umask's mode);
// only `path` itself is made private. Daemons keep secrets under their state dirs (job env in the
// coordinator's database, rank output in the agent's logs), so a directory they were given with
// looser bits is tightened, and *tightened (when given) says so for the caller to log; a
// directory this call created does not count. Errors as Env's: kPermission when `path` belongs to
// another user, kIo when it exists and is not a directory.
Status MakePrivateDirectory(const std::string& path, bool* tightened = nullptr);

}  // namespace trainlet::platform
