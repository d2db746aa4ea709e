#include "common/platform/process_spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

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

Status CannotBind(const std::string& program, const std::vector<unsigned>& cpus, int err) {
  std::string list;
  for (unsigned c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
  return InvalidError("spawn " + program + ": cannot bind to CPUs " + list + ": " +
                      std::strerror(err));
}

// The error of a spawn that failed with `err`: a missing or non-directory cwd is named as such
// (the errno alone reads like a missing program), else the program (and its resolved path).
Status SpawnError(const ProcessSpawner::Request& request, const std::string& path, int err) {
  const std::string& program = request.argv[0];
  if (!request.cwd.empty()) {
    if (std::optional<Status> bad = CwdError(program, request.cwd)) return *bad;
  }
  std::string what = "spawn " + program;
  if (path != program) what += " (" + path + ")";
  return ErrnoStatus(err, std::move(what));
}

// A request made ready for the child: its program found, its log files open, argv and envp as
// the exec takes them (pointing into the request, which must outlive this).
struct PreparedSpawn {
  const ProcessSpawner::Request* request = nullptr;
  std::string path;
  std::vector<char*> argv;
  std::vector<char*> envp;
  int log_fd = -1;  // opened here (only when a stream goes there)
  int err_fd = -1;  // the stderr file opened here, when not the log
  int out = -1;     // what the child gets as 1 and 2
  int error = -1;

  PreparedSpawn() = default;
  PreparedSpawn(const PreparedSpawn&) = delete;
  PreparedSpawn& operator=(const PreparedSpawn&) = delete;
  ~PreparedSpawn() { CloseFiles(); }

  // Once the child exists (it has its own copies) or failed.
  void CloseFiles() {
    if (err_fd >= 0 && err_fd != log_fd) close(err_fd);
    if (log_fd >= 0) close(log_fd);
    log_fd = err_fd = -1;
  }
};

// Spawn's checks and opens, in its order; its errors.
Status Prepare(const ProcessSpawner::Request& request, PreparedSpawn& p) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return InvalidError("spawn: argv is empty");
  }
  p.request = &request;
  const std::string& program = request.argv[0];
  // A cwd that is missing or not a directory fails the spawn with the errno a missing program
  // gives: checked before a search that would look in it, else only once the child has failed
  // (CwdError), so that a launch does not pay a stat per rank for the message.
  if (!request.cwd.empty() && program.find('/') == std::string::npos) {
    if (std::optional<Status> bad = CwdError(program, request.cwd)) return *bad;
  }
  TRAINLET_ASSIGN_OR_RETURN(p.path, ResolveProgram(program, request.envp, request.cwd));
  // Opened only when a stream goes there: not when the caller redirected both.
  if (request.stdout_fd < 0 || (request.stderr_fd < 0 && request.stderr_path.empty())) {
    TRAINLET_ASSIGN_OR_RETURN(p.log_fd, OpenWorkerLog(request.log_path));
  }
  p.err_fd = p.log_fd;
  if (request.stderr_fd < 0 && !request.stderr_path.empty()) {
    TRAINLET_ASSIGN_OR_RETURN(p.err_fd, OpenWorkerLog(request.stderr_path));
  }
  p.argv.reserve(request.argv.size() + 1);
  for (const std::string& a : request.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  p.envp.reserve(request.envp.size() + 1);
  for (const std::string& e : request.envp) p.envp.push_back(const_cast<char*>(e.c_str()));
  p.envp.push_back(nullptr);
  p.out = request.stdout_fd >= 0 ? request.stdout_fd : p.log_fd;
  p.error = request.stderr_fd >= 0 ? request.stderr_fd : p.err_fd;
  return Status::Ok();
}

#if TRAINLET_NATIVE_LINUX
// The calling thread's CPUs into `mine`; false when they cannot be read.
bool ReadThreadMask(cpu_set_t* mine) { return sched_getaffinity(0, sizeof *mine, mine) == 0; }

// vfork_spawn.h's plan for `p`; `cpus` receives the CPUs when the child must bind itself.
// `mine`: the spawning thread's CPUs (read once by the caller), null when unknown.
VforkSpawnPlan PlanFor(const PreparedSpawn& p, cpu_set_t* cpus, const cpu_set_t* mine) {
  const ProcessSpawner::Request& request = *p.request;
  VforkSpawnPlan plan;
  plan.path = p.path.c_str();
  plan.argv = p.argv.data();
  plan.envp = p.envp.data();
  plan.stdout_fd = p.out;
  plan.stderr_fd = p.error;
  plan.cwd = request.cwd.empty() ? nullptr : request.cwd.c_str();
  plan.new_session = request.new_session;
  if (!request.cpus.empty()) {
    CPU_ZERO(cpus);
    for (unsigned c : request.cpus) {
      if (c < CPU_SETSIZE) CPU_SET(c, cpus);
    }
    // Bound to those already (every rank of a job that has the whole machine): the child
    // inherits them, and makes no call that takes the scheduler's locks.
    if (mine == nullptr || !CPU_EQUAL(mine, cpus)) plan.cpus = cpus;
  }
  return plan;
}

Result<pid_t> Answer(const PreparedSpawn& p, const VforkSpawnResult& r) {
  if (r.pid > 0) return r.pid;
  if (r.stage == VforkSpawnStage::kAffinity) {
    return CannotBind(p.request->argv[0], p.request->cpus, r.err);
  }
  return SpawnError(*p.request, p.path, r.err);
}

// Linux's batch: the children of a SpawnBatch (vfork_spawn.h); each request is kept until Finish,
// since its child reads it.
class CloneBatch final : public ProcessSpawner::Batch {
 public:
  // The thread's CPUs are read once for the batch (it belongs to one thread), not per child.
  CloneBatch() : mine_known_(ReadThreadMask(&mine_)) {}

  size_t Start(ProcessSpawner::Request request) override {
    Entry& e = entries_.emplace_back();
    e.request = std::move(request);
    const size_t index = answers_.size();
    answers_.emplace_back(InternalError("spawn: not finished"));
    if (Status st = Prepare(e.request, e.prepared); !st.ok()) {
      answers_[index] = std::move(st);
      return index;
    }
    cpu_set_t cpus;
    // The batch keeps its own copy of cpus.
    e.child = batch_.Start(PlanFor(e.prepared, &cpus, mine_known_ ? &mine_ : nullptr));
    e.prepared.CloseFiles();
    e.answer = index;
    return index;
  }

  std::vector<Result<pid_t>> Finish() override {
    const std::vector<VforkSpawnResult> children = batch_.Finish();
    start_ticks_.assign(answers_.size(), 0);
    for (const Entry& e : entries_) {
      if (e.child == kNoChild) continue;
      answers_[e.answer] = Answer(e.prepared, children[e.child]);
      start_ticks_[e.answer] = children[e.child].start_ticks;
    }
    entries_.clear();
    return std::exchange(answers_, {});
  }

  uint64_t StartTime(size_t index) const override {
    return index < start_ticks_.size() ? start_ticks_[index] : 0;
  }

 private:
  static constexpr size_t kNoChild = ~size_t{0};
  struct Entry {
    ProcessSpawner::Request request;
    PreparedSpawn prepared;
    size_t child = kNoChild;  // in batch_'s results
    size_t answer = 0;
  };
  std::deque<Entry> entries_;  // stable: the children read them until batch_ has finished
  std::vector<Result<pid_t>> answers_;
  std::vector<uint64_t> start_ticks_;  // the last Finish's, by answer
  cpu_set_t mine_;
  bool mine_known_;
  SpawnBatch batch_;  // last: destroyed (so waited for) before what its children read
};
#else
Result<pid_t> SpawnByPosixSpawn(const PreparedSpawn& p) {
  const ProcessSpawner::Request& request = *p.request;
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
  step(posix_spawn_file_actions_adddup2(&actions, p.out, STDOUT_FILENO));
  step(posix_spawn_file_actions_adddup2(&actions, p.error, STDERR_FILENO));
  // The agent's sockets, signal descriptor and logs are no business of a worker, CLOEXEC or not.
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
    rc = posix_spawn(&pid, p.path.c_str(), &actions, &attr, p.argv.data(), p.envp.data());
  }
  if (bind) RestoreThisThread(saved);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return SpawnError(request, p.path, rc);
  return pid;
}
#endif

class PosixProcessSpawner final : public ProcessSpawner {
 public:
  Result<pid_t> Spawn(const Request& request) override {
    PreparedSpawn p;
    TRAINLET_RETURN_IF_ERROR(Prepare(request, p));
#if TRAINLET_NATIVE_LINUX
    cpu_set_t cpus, mine;
    const bool known = !request.cpus.empty() && ReadThreadMask(&mine);
    const VforkSpawnResult r = VforkSpawn(PlanFor(p, &cpus, known ? &mine : nullptr));
    p.CloseFiles();
    return Answer(p, r);
#else
    return SpawnByPosixSpawn(p);
#endif
  }

#if TRAINLET_NATIVE_LINUX
  std::unique_ptr<Batch> NewBatch() override { return std::make_unique<CloneBatch>(); }
#endif

  int Kill(pid_t pgid_or_pid, int sig) override { return kill(pgid_or_pid, sig) == 0 ? 0 : errno; }
};

// Spawn for each request, in turn: for spawners that have no batch of their own.
class OneByOneBatch final : public ProcessSpawner::Batch {
 public:
  explicit OneByOneBatch(ProcessSpawner* spawner) : spawner_(spawner) {}
  size_t Start(ProcessSpawner::Request request) override {
    answers_.push_back(spawner_->Spawn(request));
    return answers_.size() - 1;
  }
  std::vector<Result<pid_t>> Finish() override { return std::exchange(answers_, {}); }

 private:
  ProcessSpawner* const spawner_;
  std::vector<Result<pid_t>> answers_;
};

}  // namespace

std::unique_ptr<ProcessSpawner::Batch> ProcessSpawner::NewBatch() {
  return std::make_unique<OneByOneBatch>(this);
}

std::unique_ptr<ProcessSpawner> MakePosixProcessSpawner() {
  return std::make_unique<PosixProcessSpawner>();
}

}  // namespace trainlet::platform
