#include "common/platform/process_spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include "common/platform/backend.h"
#include "common/platform/cpu_affinity.h"
#include "common/platform/errno_status.h"
#include "common/platform/process_control.h"
#include "common/platform/vfork_spawn.h"

namespace trainlet::platform {
namespace {

// Internal for what is not a missing program or a refusal (the Spawn contract).
Status ErrnoStatus(int err, std::string message) {
  return platform::ErrnoStatus(err, std::move(message), ErrorCode::kInternal);
}

// The PATH of the child's environment; execvp's default when it has none.
std::string PathOf(const std::vector<std::string>& envp) {
  for (const std::string& kv : envp) {
    if (kv.starts_with("PATH=")) return kv.substr(5);
  }
  return "/bin:/usr/bin";
}

bool IsExecutableFile(const std::string& path, bool* exists) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *exists = true;
  return access(path.c_str(), X_OK) == 0;
}

// Resolves a bare program name against the child's PATH, as execvp would in the child: glibc's
// posix_spawnp searches the agent's own PATH, which is the wrong one for a worker.
Result<std::string> ResolveProgram(const std::string& name, const std::vector<std::string>& envp,
                                   const std::string& cwd) {
  if (name.find('/') != std::string::npos) return name;
  const std::string path = PathOf(envp);
  bool seen_not_executable = false;
  std::string_view rest = path;
  while (true) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (dir.empty()) dir = ".";  // an empty PATH entry means the current directory
    if (dir[0] != '/' && !cwd.empty()) dir = cwd + "/" + dir;
    std::string candidate = dir + "/" + name;
    if (IsExecutableFile(candidate, &seen_not_executable)) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return ErrnoStatus(seen_not_executable ? EACCES : ENOENT,
                     "spawn " + name + " (searched PATH=" + path + ")");
}

// posix_spawn reports a failed chdir with the same errno as a missing program: this says which.
// The error when `cwd` is missing or not a directory; nullopt when it is one.
std::optional<Status> CwdError(const std::string& program, const std::string& cwd) {
  struct stat st;
  if (stat(cwd.c_str(), &st) != 0) return ErrnoStatus(errno, "spawn " + program + ": cwd " + cwd);
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus(ENOTDIR, "spawn " + program + ": cwd " + cwd);
  return std::nullopt;
}

}  // namespace

// O_CLOEXEC, so only the dup2'd copies reach the child.
Result<int> OpenWorkerLog(const std::string& log_path, bool create_parent) {
  if (log_path.empty()) {
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open /dev/null");
    return fd;
  }
  std::filesystem::path parent = std::filesystem::path(log_path).parent_path();
  if (create_parent && !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) return IoError("log dir " + parent.string() + ": " + ec.message());
  }
  // 0600: a rank's output may hold what its env held (tokens, paths); only the agent's user reads
  // it, and trainletctl logs through the agent.
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) return IoError("log file " + log_path + ": " + std::strerror(errno));
  if (fd <= STDERR_FILENO) {
    // The agent runs with a closed stdio slot: keep the log off 0-2 so dup2 below cannot collide.
    int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    int err = errno;
    close(fd);
    if (high < 0) return IoError("log file " + log_path + ": " + std::strerror(err));
    fd = high;
  }
  return fd;
}

namespace {

class PosixProcessSpawner final : public ProcessSpawner {
 public:
  Result<pid_t> Spawn(const Request& request) override {
    if (request.argv.empty() || request.argv[0].empty()) {
      return InvalidError("spawn: argv is empty");
    }
    const std::string& program = request.argv[0];
    // A cwd that is missing or not a directory fails the spawn with the errno a missing program
    // gives: checked before a search that would look in it, else only once posix_spawn has failed
    // (CwdError), so that a launch does not pay a stat per rank for the message.
    if (!request.cwd.empty() && program.find('/') == std::string::npos) {
      if (std::optional<Status> bad = CwdError(program, request.cwd)) return *bad;
    }
    TRAINLET_ASSIGN_OR_RETURN(std::string path, ResolveProgram(program, request.envp, request.cwd));
    // Opened only when a stream goes there: not when the caller redirected both.
    int log_fd = -1;
    if (request.stdout_fd < 0 || (request.stderr_fd < 0 && request.stderr_path.empty())) {
      TRAINLET_ASSIGN_OR_RETURN(log_fd, OpenWorkerLog(request.log_path));
    }
    int err_fd = log_fd;
    if (request.stderr_fd < 0 && !request.stderr_path.empty()) {
      Result<int> opened = OpenWorkerLog(request.stderr_path);
      if (!opened.ok()) {
        if (log_fd >= 0) close(log_fd);
        return opened.status();
      }
      err_fd = *opened;
    }
    // Closes the stderr file when it is not the log (every return below).
    struct CloseErr {
      int fd, log;
      ~CloseErr() {
        if (fd != log) close(fd);
      }
    } close_err{err_fd, log_fd};

    std::vector<char*> argv;
    argv.reserve(request.argv.size() + 1);
    for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    envp.reserve(request.envp.size() + 1);
    for (const std::string& e : request.envp) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    const int out_fd = request.stdout_fd >= 0 ? request.stdout_fd : log_fd;
    const int error_fd = request.stderr_fd >= 0 ? request.stderr_fd : err_fd;
#if TRAINLET_NATIVE_LINUX
    Result<pid_t> pid = SpawnByClone(request, path, argv, envp, out_fd, error_fd);
#else
    Result<pid_t> pid = SpawnByPosixSpawn(request, path, argv, envp, out_fd, error_fd);
#endif
    if (log_fd >= 0) close(log_fd);
    return pid;
  }

  int Kill(pid_t pgid_or_pid, int sig) override { return kill(pgid_or_pid, sig) == 0 ? 0 : errno; }

 private:
  static Status CannotBind(const std::string& program, const std::vector<unsigned>& cpus, int err) {
    std::string list;
    for (unsigned c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
    return InvalidError("spawn " + program + ": cannot bind to CPUs " + list + ": " +
                        std::strerror(err));
  }

  // The error of a spawn that failed with `err`: a missing or non-directory cwd is named as
  // such (the errno alone reads like a missing program), else the program (and its resolved
  // path).
  static Status SpawnError(const Request& request, const std::string& path, int err) {
    const std::string& program = request.argv[0];
    if (!request.cwd.empty()) {
      if (std::optional<Status> bad = CwdError(program, request.cwd)) return *bad;
    }
    std::string what = "spawn " + program;
    if (path != program) what += " (" + path + ")";
    return ErrnoStatus(err, std::move(what));
  }

#if TRAINLET_NATIVE_LINUX
  // vfork_spawn.h: the child binds its own CPUs; this thread never moves.
  static Result<pid_t> SpawnByClone(const Request& request, const std::string& path,
                                    std::vector<char*>& argv, std::vector<char*>& envp, int out_fd,
                                    int error_fd) {
    cpu_set_t cpus;
    VforkSpawnPlan plan;
    plan.path = path.c_str();
    plan.argv = argv.data();
    plan.envp = envp.data();
    plan.stdout_fd = out_fd;
    plan.stderr_fd = error_fd;
    plan.cwd = request.cwd.empty() ? nullptr : request.cwd.c_str();
    plan.new_session = request.new_session;
    if (!request.cpus.empty()) {
      CPU_ZERO(&cpus);
      for (unsigned c : request.cpus) {
        if (c < CPU_SETSIZE) CPU_SET(c, &cpus);
      }
      // Bound to those already (every rank of a job that has the whole machine): the child
      // inherits them, and makes no call that takes the scheduler's locks.
      cpu_set_t mine;
      if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_EQUAL(&mine, &cpus)) {
        plan.cpus = &cpus;
      }
    }
    const VforkSpawnResult r = VforkSpawn(plan);
    if (r.pid > 0) return r.pid;
    if (r.stage == VforkSpawnStage::kAffinity) {
      return CannotBind(request.argv[0], request.cpus, r.err);
    }
    return SpawnError(request, path, r.err);
  }
#else
  static Result<pid_t> SpawnByPosixSpawn(const Request& request, const std::string& path,
                                         std::vector<char*>& argv, std::vector<char*>& envp,
                                         int out_fd, int error_fd) {
    const std::string& program = request.argv[0];
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    int rc = 0;
    auto step = [&rc](int r) {
      if (rc == 0) rc = r;
    };
    step(posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0));
    step(posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO));
    step(posix_spawn_file_actions_adddup2(&actions, error_fd, STDERR_FILENO));
    // The agent's sockets, signal descriptor and logs are no business of a worker, CLOEXEC or
    // not.
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    step(CloseOtherDescriptorsOnSpawn(&actions, &flags));
    if (!request.cwd.empty()) step(ChdirOnSpawn(&actions, request.cwd));
    sigset_t empty_mask, all_signals;
    sigemptyset(&empty_mask);
    sigfillset(&all_signals);
    step(posix_spawnattr_setsigmask(&attr, &empty_mask));
    step(posix_spawnattr_setsigdefault(&attr, &all_signals));
    if (request.new_session) {
      flags |= POSIX_SPAWN_SETSID;
    } else {
      step(posix_spawnattr_setpgroup(&attr, 0));
      flags |= POSIX_SPAWN_SETPGROUP;
    }
    step(posix_spawnattr_setflags(&attr, flags));
    pid_t pid = -1;
    // posix_spawn has no affinity attribute: bind this thread, spawn, restore. The loop is the
    // only thread that spawns, so nothing else runs on the borrowed mask meanwhile. Where the
    // platform has no affinity (macOS) this binds nothing; the agent has said so once.
    SavedAffinity saved;
    const bool bind = rc == 0 && !request.cpus.empty() && CpuAffinitySupported();
    if (bind) {
      if (const int err = BindThisThread(request.cpus, &saved); err != 0) {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
        return CannotBind(program, request.cpus, err);
      }
    }
    if (rc == 0) {
      rc = posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
    }
    if (bind) RestoreThisThread(saved);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return SpawnError(request, path, rc);
    return pid;
  }
#endif
};

}  // namespace

std::unique_ptr<ProcessSpawner> MakePosixProcessSpawner() {
  return std::make_unique<PosixProcessSpawner>();
}

}  // namespace trainlet::platform
