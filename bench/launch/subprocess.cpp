#include "launch/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

extern char** environ;

namespace trainlet::bench {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnStopSignal(int) { g_stop = 1; }

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// environ with `extra` ("K=V") replacing or adding entries. The strings live in `storage`.
std::vector<char*> BuildEnv(const std::vector<std::string>& extra,
                            std::vector<std::string>* storage) {
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : extra) replaced |= x.substr(0, x.find('=')) == key;
    if (!replaced) storage->push_back(std::move(entry));
  }
  for (const auto& x : extra) storage->push_back(x);
  std::vector<char*> envp;
  for (auto& s : *storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  return envp;
}

// Waits for `pid` to exit, at most until `deadline`; kills it (by pid) on timeout or stop request.
Result<int> WaitWithDeadline(pid_t pid, Clock::time_point deadline, const std::string& name) {
  // glibc 2.36 declares pidfd_open without C linkage for C++; use the raw syscall.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {  // kernels before 5.3: block in waitpid, no deadline
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return InternalError(Errno("waitpid " + name));
    }
    return DecodeWaitStatus(status);
  }
  while (true) {
    // A signal landing between this check and poll() is only seen at the deadline; acceptable
    // here, since every wait has one.
    if (g_stop) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(pidfd);
      return UnavailableError("interrupted while running " + name);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd pfd{pidfd, POLLIN, 0};
    int n = poll(&pfd, 1, left.count() > 0 ? static_cast<int>(left.count()) : 0);
    if (n > 0) break;
    if (n == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(pidfd);
      return UnavailableError(name + ": still running at its timeout; killed pid " +
                              std::to_string(pid));
    }
    if (errno != EINTR) {
      close(pidfd);
      return InternalError(Errno("poll on pidfd of " + name));
    }
  }
  close(pidfd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return InternalError(Errno("waitpid " + name));
  }
  return DecodeWaitStatus(status);
}

}  // namespace

void InstallStopHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll must return EINTR and notice the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop != 0; }

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& extra_env,
                                 std::chrono::milliseconds timeout, bool capture) {
  TRAINLET_CHECK(!argv.empty());
  std::string name = argv[0];
  std::string path = FindInPath(argv[0]);
  if (path.empty()) return NotFoundError(name + ": not found in PATH");

  char out_path[] = "/tmp/trainlet-launch-bench-out-XXXXXX";
  int out_fd = capture ? mkstemp(out_path) : open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (out_fd < 0) return IoError(Errno(capture ? "mkstemp " + std::string(out_path) : "/dev/null"));
  if (capture) unlink(out_path);  // the fd keeps it readable; nothing is left behind

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);

  std::vector<std::string> arg_storage(argv);
  std::vector<char*> args;
  for (auto& a : arg_storage) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  std::vector<char*> envp = BuildEnv(extra_env, &env_storage);

  CommandResult result;
  auto start = Clock::now();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    close(out_fd);
    return InternalError("posix_spawn " + path + ": " + std::strerror(rc));
  }
  auto waited = WaitWithDeadline(pid, start + timeout, name);
  result.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!waited.ok()) {
    close(out_fd);
    return waited.status();
  }
  result.exit_code = *waited;
  if (capture) {
    lseek(out_fd, 0, SEEK_SET);
    char buf[4096];
    ssize_t n;
    while ((n = read(out_fd, buf, sizeof buf)) > 0) result.output.append(buf, n);
  }
  close(out_fd);
  return result;
}

Result<double> SpawnLoop(const std::string& worker, int count) {
  std::string path = FindInPath(worker);
  if (path.empty()) return NotFoundError("floor worker " + worker + ": not found");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string arg0 = path;
  char* argv[] = {arg0.data(), nullptr};

  std::vector<pid_t> pids;
  pids.reserve(count);
  Status failure;
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
    if (rc != 0) {
      failure = InternalError("floor: posix_spawn copy " + std::to_string(i) + " of " + path +
                              ": " + std::strerror(rc));
      break;
    }
    pids.push_back(pid);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    while (waitpid(pids[i], &status, 0) < 0) {
      if (errno != EINTR) {
        status = -1;
        break;
      }
    }
    if (failure.ok() && DecodeWaitStatus(status) != 0) {
      failure = InternalError("floor: copy " + std::to_string(i) + " of " + path + " exited " +
                              std::to_string(DecodeWaitStatus(status)));
    }
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  posix_spawn_file_actions_destroy(&actions);
  if (!failure.ok()) return failure;
  return ms;
}

}  // namespace trainlet::bench
