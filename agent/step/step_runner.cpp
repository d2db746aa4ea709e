#include "agent/step/step_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/step/log_rotation.h"
#include "agent/step/rank_cgroup.h"
#include "agent/step/rank_files.h"
#include "agent/step/rank_identity.h"
#include "agent/step/spare_files.h"
#include "agent/step/step_gate.h"
#include "agent/step/step_launch.h"
#include "agent/step/step_records.h"
#include "agent/step/step_stop.h"
#include "agent/step/step_users.h"
#include "agent/step/workspace_mount.h"
#include "common/platform/descriptors.h"
#include "common/platform/process_cgroup.h"
#include "common/platform/process_control.h"
#include "common/platform/process_info.h"
#include "common/platform/signal_watch.h"
#include "common/pmix/node_topology_xml.h"
#include "common/pmix/pmix_job_map.h"

namespace trainlet::step {
namespace {

using Clock = std::chrono::steady_clock;

void Say(const std::string& dir, const std::string& what) {
  std::fprintf(stderr, "trainlet-step %s: %s\n", dir.c_str(), what.c_str());
}

// One step's whole life on its one thread (the cgroup move aside): the pieces of Run, its spawns
// and its signals. Past 25 methods because each is one of those pieces, private to this file; the
// parts that stand alone are their own types (StepGate, LogRotation, RankCgroup, the records).
class Step {
 public:
  Step(std::string dir, std::unique_ptr<platform::ProcessCgroup> entered)
      : dir_(std::move(dir)),
        cgroup_(std::move(entered), [this](const std::string& what) { Say(dir_, what); }) {}

  int Run() {
    // No thread runs yet: the signals are prepared before they can come.
    std::string why;
    signals_ =
        platform::SignalWatch::Open({SIGCHLD, SIGTERM, SIGUSR1, SIGUSR2, SIGINT, SIGHUP}, &why);
    signal(SIGPIPE, SIG_IGN);
    if (!signals_) return Fail(why);
    // Orphans of a rank (a daemonising helper) come to the step, not to init: they are reaped
    // here and the rank's group kill still finds what stayed in the group. Without a subreaper
    // (macOS) they go to launchd, and the group kill still finds them.
    if (Status no = platform::BecomeChildSubreaper(); !no.ok()) Say(dir_, no.message());
    events_fd_ = open((dir_ + "/events").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (events_fd_ < 0) return Fail("events file: " + std::string(std::strerror(errno)));
    StepRecord header;
    header.kind = StepRecord::Kind::kHeader;
    header.pid = getpid();
    header.start_time = platform::ProcessStartTime(header.pid).value_or(0);
    Append(EncodeRecord(header), false);

    auto launch = ReadLaunchFile(dir_ + "/launch.json");
    if (!launch.ok()) return Fail(launch.status().message());
    launch_ = std::move(*launch);
    spares_ = SpareFiles(launch_.spare_dir);
    secret_links_.UseSpares(&spares_);  // the first secret file and dirs: renamed spares
    if (std::string why; !ApplyWorkspace(dir_, launch_, &why, &spares_).empty() && !why.empty())
      Say(dir_, "the ranks get their workspace by env only: " + why);
    if (!launch_.agent_lock.empty() && launch_.orphan_grace_ms != 0) {
      lock_fd_ = open(launch_.agent_lock.c_str(), O_RDONLY | O_CLOEXEC);
      if (lock_fd_ < 0) {
        Say(dir_, "agent lock " + launch_.agent_lock + ": " + std::strerror(errno) +
                      "; the ranks will not be stopped if the agent dies");
      }
    }
    cgroup_.Open(launch_.cgroup);
    logs_ = LogRotation(launch_.log_max_bytes);
    std::vector<RunAsRequest> asks;  // no_new_privs unless a container allows escalation
    for (const StepRank& r : launch_.ranks) {
      logs_.Watch(r.log_path);
      asks.push_back(r.run_as);
    }
    if (auto nnp = EnterNoNewPrivs(asks); !nnp.ok()) return Fail(nnp.status().message());
    std::vector<std::string> steps_of;
    for (const StepRank& r : launch_.ranks) steps_of.push_back(r.step);
    gate_.emplace(std::move(steps_of), launch_.steps);
    Advance();  // every worker that waits for nothing, and what that meets at once
    SignalReady();
    while (!live_.empty() || gate_->holding()) {
      // Nothing runs that could meet a held worker's dependencies: it never will (StepGate
      // resolves every chain it can; this is the net under it).
      if (live_.empty()) DropHeld("not started: its dependencies can never be met on this node");
      if (!live_.empty()) Wait();
    }
    CheckLogs();  // what the last ranks wrote before they exited
    StepRecord done;
    done.kind = StepRecord::Kind::kDone;
    done.contained = EndStrays();
    Append(EncodeRecord(done), true);
    return 0;
  }

 private:
  struct Rank {
    uint32_t rank = 0;
    size_t index = 0;  // in launch_.ranks, for the gate
  };

  int Fail(const std::string& why) {
    Say(dir_, why);
    SignalReady();
    return 2;
  }

  // What starts rank `r` (or a process started like one), with stdout and stderr in `log_fd`
  // unless `stdout_fd` takes stdout. `as`: the rank's own user, started through `trainlet-step
  // --as` (rank_identity.h), its env in a file named in `env_file`, removed if the start fails.
  Result<agent::ProcessSpawner::Request> RequestFor(const StepRank& r,
                                                    std::vector<std::string> envp, int log_fd,
                                                    int stdout_fd,
                                                    const std::optional<RankIdentity>& as,
                                                    std::string* env_file) {
    agent::ProcessSpawner::Request request;
    if (as) {
      // The helper that drops to the rank's user starts as root: with an empty env, the rank's
      // given to it in a file (rank_identity.h).
      *env_file = dir_ + "/env-" + std::to_string(r.rank) + "-" + std::to_string(++env_files_);
      TRAINLET_RETURN_IF_ERROR(WriteEnvFile(*env_file, envp));
      request.argv = RunAsArgv(SelfPath(), *as, *env_file, r.argv);
    } else {
      request.argv = r.argv;
      request.envp = std::move(envp);
    }
    request.cwd = r.cwd;
    request.stdout_fd = stdout_fd >= 0 ? stdout_fd : log_fd;
    if (r.stderr_path.empty()) {
      request.stderr_fd = log_fd;
    } else {
      request.stderr_path = r.stderr_path;  // an exec session's stderr, kept apart
    }
    request.cpus = r.cpus;
    cgroup_.NoteSpawn();  // what it starts outside is out of the cgroup's reach
    return request;
  }

  // Every rank has exited: what they started and left behind (a daemon, a setsid'd or
  // double-forked child, one that cleared its env) goes too, before the step reports itself done,
  // so that a deleted job runs nothing afterwards. True when all of it was in the ranks' cgroup
  // and that is empty now (the D record's C: the agent then skips its env sweep).
  bool EndStrays() {
    if (pmix_server_ > 0) EndPmixServer();
    const bool contained = cgroup_.End(std::chrono::seconds(5));
    if (const int n = platform::KillOrphanedChildren(std::chrono::seconds(5)); n > 0) {
      Say(dir_, "killed " + std::to_string(n) + " process(es) the ranks left behind");
    }
    RemoveSecretFiles(secret_files_);
    return contained;
  }

  // Starts the workers the gate lets start (held ones whose dependencies became met, a Ready one
  // perhaps meeting another's at once: repeated until none is left), then records as never
  // started those whose dependencies can no longer be met. Nothing starts once a stop began.
  void Advance() {
    if (term_sent_ || term_at_) return;
    for (std::vector<size_t> now = gate_->TakeStartable(); !now.empty();
         now = gate_->TakeStartable()) {
      StartRanks(now);
    }
    RecordNeverStarted(gate_->TakeDoomed());
  }

  // A stop (or an end with nothing left to meet them): the held workers never start. Each gets
  // an F record, so the agent reports it and the step can end.
  void DropHeld(const std::string& reason) {
    if (gate_) RecordNeverStarted(gate_->ReleaseHeld(reason));
  }

  void RecordNeverStarted(const std::vector<std::pair<size_t, std::string>>& workers) {
    std::string batch;
    for (const auto& [index, reason] : workers) {
      StepRecord rec;
      rec.kind = StepRecord::Kind::kStartFailed;
      rec.rank = launch_.ranks[index].rank;
      rec.message = reason;
      batch += EncodeRecord(rec);
    }
    Append(batch, true);
  }

  // A rank made ready to spawn: its log open (closed after the spawn), its env built and its
  // secrets in files; or why it cannot start.
  struct PreparedRank {
    size_t index = 0;  // in launch_.ranks
    int log_fd = -1;
    std::vector<std::string> envp;
    std::optional<RankIdentity> as;
    Status error = Status::Ok();
    std::optional<size_t> started;  // its answer's index in the batch
    std::string env_file;           // `as`'s env, removed if the start fails
  };

  // Starts the ranks `which` (indices into launch_.ranks), takes their start times (from the
  // spawn, or a /proc read each, which cannot change before the step reaps them) once all of them
  // run, and appends one batch of S and F records. While the step's move into the ranks' cgroup
  // waits for its RCU grace period (RankCgroup::BeginEnter), the first ranks are prepared (logs,
  // env, secret files); none is spawned before the move is done, so every rank starts inside the
  // cgroup.
  void StartRanks(const std::vector<size_t>& which) {
    const size_t n = which.size();
    auto spawner = agent::MakePosixProcessSpawner();
    cgroup_.BeginEnter();
    // MPI ranks started directly get their node's PMIx server first, and its env on top of theirs
    // (once: later batches are workers whose replicated jobs waited).
    if (!pmix_tried_) {
      pmix_tried_ = true;
      if (launch_.ranks.empty() || launch_.ranks[0].env.contains(pmix::kJobMapEnv))
        cgroup_.FinishEnter();  // the server goes in the cgroup too, and changes the ranks' env
      pmix_ = StartPmixServer(*spawner);
    }
    std::string last_parent;
    std::vector<PreparedRank> prepared;
    prepared.reserve(n);
    size_t k = 0;
    for (; k < n && cgroup_.Entering() && k < kPrepareAhead; ++k) {
      prepared.push_back(PrepareRank(which[k], last_parent));
    }
    cgroup_.FinishEnter();
    // Each rank is started as soon as it is prepared; none is waited for until all are started.
    const std::unique_ptr<agent::ProcessSpawner::Batch> starts = spawner->NewBatch();
    for (PreparedRank& p : prepared) StartPrepared(*starts, p);
    for (; k < n; ++k) {
      prepared.push_back(PrepareRank(which[k], last_parent));
      StartPrepared(*starts, prepared.back());
    }
    const std::vector<Result<pid_t>> answers = starts->Finish();
    if (log_dir_fd_ >= 0) close(log_dir_fd_);
    log_dir_fd_ = -1;

    std::string batch;
    for (PreparedRank& p : prepared) {
      StepRecord rec;
      Settle(p, answers, rec);
      if (rec.kind == StepRecord::Kind::kStarted) {
        // Known from the spawn (nearly always), else read from /proc.
        const uint64_t known = starts->StartTime(*p.started);
        rec.start_time = known != 0 ? known : platform::ProcessStartTime(rec.pid).value_or(0);
      }
      batch += EncodeRecord(rec);
    }
    Append(batch, false);
  }

  // The rank as its own user (RankIdentity), with its secrets in files (rank_files.h): the
  // root-only setup is done here, before the spawn; the drop itself in the child. Ranks share
  // their log directory: it is created (if need be) for the first of them only (`last_parent`).
  PreparedRank PrepareRank(size_t index, std::string& last_parent) {
    PreparedRank p;
    p.index = index;
    const StepRank& r = launch_.ranks[index];
    const std::string parent = r.log_path.substr(0, r.log_path.rfind('/') + 1);
    Result<int> log = OpenRankLog(r.log_path, parent != last_parent, &spares_, &log_dir_fd_);
    if (!log.ok()) {
      p.error = pmix_.ok() ? log.status() : pmix_;
      return p;
    }
    last_parent = parent;
    p.log_fd = *log;
    if (!pmix_.ok()) {
      p.error = pmix_;
      return p;
    }
    auto as = users_.IdentityFor(r.run_as);
    if (!as.ok()) {
      p.error = as.status();
      return p;
    }
    p.as = *as;
    p.envp = BuildWorkerEnv(launch_.base_env, r.env);
    p.error = PrepareFor(p.envp, "r" + std::to_string(r.rank), p.as, p.log_fd, index);
    return p;
  }

  // Starts prepared rank `p` in `batch` (or records why it cannot start); Settle takes the
  // answer once the batch has finished.
  void StartPrepared(agent::ProcessSpawner::Batch& batch, PreparedRank& p) {
    const StepRank& r = launch_.ranks[p.index];
    Result<agent::ProcessSpawner::Request> request =
        p.error.ok() ? RequestFor(r, std::move(p.envp), p.log_fd, -1, p.as, &p.env_file)
                     : Result<agent::ProcessSpawner::Request>(p.error);
    if (request.ok()) {
      p.started = batch.Start(std::move(*request));
    } else {
      p.error = request.status();
    }
    if (p.log_fd >= 0) close(p.log_fd);
    p.log_fd = -1;
  }

  void Settle(PreparedRank& p, const std::vector<Result<pid_t>>& answers, StepRecord& rec) {
    const StepRank& r = launch_.ranks[p.index];
    rec.rank = r.rank;
    const Result<pid_t> pid = p.started ? answers[*p.started] : Result<pid_t>(p.error);
    if (pid.ok()) {
      rec.kind = StepRecord::Kind::kStarted;
      rec.pid = *pid;
      live_[*pid] = Rank{r.rank, p.index};
      gate_->Started(p.index);
    } else {
      if (!p.env_file.empty()) unlink(p.env_file.c_str());
      rec.kind = StepRecord::Kind::kStartFailed;
      rec.message = pid.status().message();
      gate_->StartFailed(p.index);
      users_.Release(p.index);
    }
  }

  // The job's dirs and the log given to `as` (rank `index` holds its work dir: StepUsers), the
  // secrets of `envp` moved into its files.
  Status PrepareFor(std::vector<std::string>& envp, const std::string& who,
                    const std::optional<RankIdentity>& as, int log_fd,
                    std::optional<size_t> index = std::nullopt) {
    if (as) {
      const std::string work_dir = EnvValue(envp, "TRAINLET_WORK_DIR");
      TRAINLET_RETURN_IF_ERROR(users_.Admit(index, work_dir, StateDir(), *as));
      TRAINLET_RETURN_IF_ERROR(GiveNodeCache(envp, StateDir(), *as));
      // The log stays the agent's to read (it is root); the rank writes it through its stdout.
      if (log_fd >= 0 && fchown(log_fd, as->uid, as->gid) != 0) {
        return IoError(as->field + ": chown of the rank's log: " + std::strerror(errno));
      }
    }
    auto written = MoveSecretsToFiles(envp, "s" + std::to_string(getpid()) + "-" + who, as,
                                      StateDir(), &secret_links_);
    if (!written.ok()) return written.status();
    secret_files_.insert(secret_files_.end(), written->begin(), written->end());
    return Status::Ok();
  }

  // The agent's state dir holds its lock (<state dir>/agent.lock); "" when unknown.
  std::string StateDir() const {
    const size_t slash = launch_.agent_lock.rfind('/');
    return slash == std::string::npos ? "" : launch_.agent_lock.substr(0, slash);
  }

  static std::string SelfPath() {
#ifdef __linux__
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) return std::string(self, static_cast<size_t>(len));
#endif
    return "trainlet-step";
  }

  // When the ranks are MPI ranks started directly (their env names a PMIx job map), starts
  // trainlet-pmix from this binary's directory, with the first rank's env, its stderr in that
  // rank's log and its stdout a pipe, and reads the rank env stream (common/pmix/pmix_job_map.h)
  // into each rank's env. An error is every rank's start failure: the attempt fails with it.
  // The server is not a rank: it is killed when the ranks are gone (EndStrays), and its exit is
  // reaped like an orphan's.
  Status StartPmixServer(agent::ProcessSpawner& spawner) {
    if (launch_.ranks.empty() || !launch_.ranks[0].env.contains(pmix::kJobMapEnv))
      return Status::Ok();
    const StepRank& first = launch_.ranks[0];
    std::string path = SelfPath();  // no dir when unknown, and off Linux (no direct launch)
    if (path.find('/') == std::string::npos)
      return InternalError("PMIx server: cannot find trainlet-step's own path");
    path = path.substr(0, path.rfind('/') + 1) + "trainlet-pmix";
    int out[2];
    if (pipe(out) != 0)
      return InternalError(std::string("PMIx server: pipe: ") + std::strerror(errno));
    fcntl(out[0], F_SETFD, FD_CLOEXEC);  // the ranks must not hold either end
    fcntl(out[1], F_SETFD, FD_CLOEXEC);
    Result<int> log = agent::OpenWorkerLog(first.log_path, true);
    StepRank server;
    server.argv = {path};
    server.cwd = first.cwd;
    // The server runs as the first rank's user: its sockets are the ranks' to reach.
    auto as = users_.IdentityFor(first.run_as);
    std::vector<std::string> envp = BuildWorkerEnv(launch_.base_env, first.env);
    pmix::AddNodeTopologyXmlEnv(envp, StateDir());  // the agent's topology: not discovered again
    Status prepared = !log.ok() ? log.status()
                      : as.ok() ? PrepareFor(envp, "pmix", *as, -1)
                                : as.status();
    std::string env_file;
    Result<agent::ProcessSpawner::Request> request =
        prepared.ok() ? RequestFor(server, std::move(envp), *log, out[1], *as, &env_file)
                      : Result<agent::ProcessSpawner::Request>(prepared);
    Result<pid_t> pid = request.ok() ? spawner.Spawn(*request) : Result<pid_t>(request.status());
    if (!pid.ok() && !env_file.empty()) unlink(env_file.c_str());
    if (log.ok()) close(*log);
    close(out[1]);
    if (!pid.ok()) {
      close(out[0]);
      return InternalError("PMIx server: " + pid.status().message());
    }
    pmix_server_ = *pid;
    std::string text;
    const auto deadline = Clock::now() + std::chrono::seconds(kPmixStartSeconds);
    while (text.find("ready\n") == std::string::npos && text.find("error ") == std::string::npos) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{out[0], POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) == 0) break;
      char buf[8192];
      const ssize_t got = read(out[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      text.append(buf, static_cast<size_t>(got));
    }
    close(out[0]);
    auto envs = pmix::ParseRankEnvStream(text);
    if (!envs.ok()) {
      kill(pmix_server_, SIGKILL);
      return InternalError("PMIx server did not start: " + envs.status().message());
    }
    for (StepRank& r : launch_.ranks) {
      for (auto& [key, value] : (*envs)[r.rank]) r.env[key] = value;
    }
    return Status::Ok();
  }

  // trainlet-pmix ended while ranks run: their PMIx calls would wait for it forever. A crash, or
  // the exit it takes when a rank aborts with status 0 (which the rank's own exit would not show
  // as a failure), stops every rank now, as mpirun's daemons do when a rank aborts.
  void PmixServerEnded(int status) {
    pmix_server_ = -1;
    if (live_.empty() || term_sent_) return;
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    Say(dir_,
        std::string("trainlet-pmix ") +
            (WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                 : "exited with code " + std::to_string(WEXITSTATUS(status))) +
            (clean ? "" : ": stopping the ranks, whose PMIx server is gone"));
    if (clean) return;
    term_sent_ = true;
    SignalRanks(SIGKILL);
  }

  // The ranks are gone: SIGTERM lets trainlet-pmix finalize libpmix and remove its files;
  // SIGKILL to its group if it has not exited within a second.
  void EndPmixServer() {
    kill(pmix_server_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    pid_t reaped = 0;
    while ((reaped = waitpid(pmix_server_, nullptr, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (reaped == 0) {
      kill(-pmix_server_, SIGKILL);  // still our unreaped child: its group cannot be reused
      waitpid(pmix_server_, nullptr, 0);
    }
    pmix_server_ = -1;
  }

  // The agent waits for this line before it reads the S and F records.
  void SignalReady() {
    if (ready_sent_) return;
    ready_sent_ = true;
    static const char kReady[] = "ready\n";
    ssize_t n;
    do {
      n = write(STDOUT_FILENO, kReady, sizeof kReady - 1);
    } while (n < 0 && errno == EINTR);
    const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      close(null_fd);
    }
  }

  // One write(2) per call, so a reader never sees half of a batch written by a torn loop.
  void Append(const std::string& bytes, bool sync) {
    if (bytes.empty() || events_fd_ < 0) return;
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = write(events_fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // Nothing better to do than say so: the ranks still run and are still reaped; an agent
        // reading this file will report them as ended with an unknown status.
        Say(dir_, std::string("cannot append to the events file: ") + std::strerror(errno));
        return;
      }
      done += static_cast<size_t>(n);
    }
    if (sync && platform::SyncData(events_fd_) != 0) {
      Say(dir_, std::string("syncing the events file: ") + std::strerror(errno));
    }
  }

  // SIGKILL reaches the whole cgroup as well: a stop that has run out of grace leaves nothing.
  void SignalRanks(int sig) {
    if (sig == SIGKILL) cgroup_.Kill();
    for (const auto& [pid, r] : live_) {
      if (kill(-pid, sig) != 0 && errno != ESRCH) {
        Say(dir_, "kill(-" + std::to_string(pid) + ", " + std::to_string(sig) +
                      "): " + std::strerror(errno));
      }
    }
  }

  // True while some process (the agent) holds the agent lock exclusively.
  bool AgentAlive() const {
    if (flock(lock_fd_, LOCK_SH | LOCK_NB) == 0) {
      flock(lock_fd_, LOCK_UN);
      return false;
    }
    return errno == EWOULDBLOCK;
  }

  // Whether the agent's stamp on its lock (StepLaunch::agent_stamps) has stood still for `grace`:
  // timed on the step's own monotonic clock from when the stamp was last seen to change, so a
  // wall-clock jump never counts.
  bool AgentStampStale(Clock::time_point now, std::chrono::milliseconds grace) {
    if (!launch_.agent_stamps) return false;
    struct stat st {};
    if (fstat(lock_fd_, &st) != 0) return false;
    const int64_t stamp = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    if (!stamp_seen_at_ || stamp != last_stamp_) {
      last_stamp_ = stamp;
      stamp_seen_at_ = now;
      return false;
    }
    return now - *stamp_seen_at_ >= grace;
  }

  // An agent that died and was not started again cannot stop these ranks, and the coordinator,
  // having lost the node, restarts the job elsewhere once the partition grace has passed. So the
  // step does what a partitioned agent does: after orphan_grace_ms without an agent, it stops
  // the ranks. A restarted agent takes the lock again and re-adopts the step in time. An agent
  // that holds the lock but is stopped or hung counts as gone once its stamp has stood still
  // that long: it would stop nothing, and the coordinator treats it as dead.
  void CheckAgent() {
    if (lock_fd_ < 0 || term_sent_ || term_at_) return;
    const auto now = Clock::now();
    const std::chrono::milliseconds grace(launch_.orphan_grace_ms);
    std::string why;
    if (AgentAlive()) {
      agent_gone_since_.reset();
      if (!AgentStampStale(now, grace)) return;
      why = "the agent holds its lock but has not stamped it for " +
            std::to_string(launch_.orphan_grace_ms) + " ms (stopped or hung)";
    } else {
      if (!agent_gone_since_) agent_gone_since_ = now;
      if (now - *agent_gone_since_ < grace) return;
      why = "no agent for " + std::to_string(launch_.orphan_grace_ms) + " ms";
    }
    Say(dir_, why + ": stopping the ranks, as a partitioned agent would");
    DropHeld("not started: stopped before its dependencies were met");
    term_sent_ = true;
    SignalRanks(SIGTERM);
    const auto at = now + std::chrono::milliseconds(launch_.stop_grace_ms);
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  // SIGTERM: a stop, with the warning of <dir>/stop first when there is one (step_stop.h). A
  // stop already under way (warned or terminated) is not started again: the warning's grace was
  // promised to the ranks, and only SIGUSR1 (SIGKILL now) cuts it short.
  void OnStopAsked() {
    if (term_sent_ || term_at_) return;
    DropHeld("not started: stopped before its dependencies were met");
    auto request = ReadStopRequest(dir_ + "/stop");
    if (!request.ok() && request.status().code() != ErrorCode::kNotFound) {
      Say(dir_, request.status().message() + "; stopping without a warning");
    }
    const auto now = Clock::now();
    if (request.ok() && request->warning_signal != 0) {
      Say(dir_, "stop: signal " + std::to_string(request->warning_signal) +
                    " to the ranks, SIGTERM in " + std::to_string(request->warning_grace_ms) +
                    " ms");
      SignalRanks(request->warning_signal);
      term_at_ = now + std::chrono::milliseconds(request->warning_grace_ms);
      return;
    }
    SendTerm(now);
  }

  // SIGUSR2: the warning of <dir>/warn to every rank, and nothing stops.
  void OnWarnAsked() {
    auto request = ReadStopRequest(dir_ + "/warn");
    if (!request.ok()) {
      Say(dir_, "warning asked: " + request.status().message());
      return;
    }
    if (request->warning_signal == 0 || term_sent_) return;
    Say(dir_, "warning: signal " + std::to_string(request->warning_signal) + " to the ranks");
    SignalRanks(request->warning_signal);
  }

  void SendTerm(Clock::time_point now) {
    term_sent_ = true;
    term_at_.reset();
    SignalRanks(SIGTERM);
    const auto at = now + std::chrono::milliseconds(launch_.stop_grace_ms);
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  static int MillisUntil(std::optional<Clock::time_point> at, int timeout) {
    if (!at) return timeout;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*at - Clock::now()).count();
    const int ms = static_cast<int>(std::max<int64_t>(0, left));
    return timeout < 0 ? ms : std::min(timeout, ms);
  }

  void Wait() {
    int timeout = MillisUntil(term_at_, MillisUntil(kill_at_, -1));
    if (lock_fd_ >= 0 && !term_sent_ && !term_at_) {
      timeout = timeout < 0 ? kAgentCheckMs : std::min(timeout, kAgentCheckMs);
    }
    if (logs_.enabled()) {
      constexpr int kLogs = LogRotation::kCheckIntervalMs;
      timeout = timeout < 0 ? kLogs : std::min(timeout, kLogs);
    }
    pollfd p{signals_->fd(), POLLIN, 0};
    const int rc = poll(&p, 1, timeout);
    if (rc < 0 && errno != EINTR) {
      Say(dir_, std::string("poll: ") + std::strerror(errno));
      sleep(1);
    }
    for (const int sig : signals_->Take()) {
      if (sig == SIGTERM) {
        OnStopAsked();
      } else if (sig == SIGUSR2) {
        OnWarnAsked();
      } else if (sig == SIGUSR1) {
        DropHeld("not started: stopped before its dependencies were met");
        SignalRanks(SIGKILL);
        kill_at_.reset();
        term_at_.reset();
        term_sent_ = true;
      }
    }
    CheckAgent();
    if (term_at_ && Clock::now() >= *term_at_) SendTerm(Clock::now());
    if (kill_at_ && Clock::now() >= *kill_at_) {
      SignalRanks(SIGKILL);
      kill_at_.reset();
    }
    Reap();
    CheckLogs();  // after the reap: a rank that has exited is no longer cut (LogRotation::Unwatch)
  }

  void Reap() {
    std::string batch;
    while (true) {
      // Peeked first: the exited leader stays a zombie, so its pgid cannot be reused while the
      // rest of its group is killed. Then the real reap.
      const pid_t pid = platform::PeekExitedChild();
      if (pid <= 0) break;  // none has exited, or ECHILD
      auto it = live_.find(pid);
      if (it != live_.end()) kill(-pid, SIGKILL);
      int status = 0;
      pid_t reaped;
      do {
        reaped = waitpid(pid, &status, WNOHANG);
      } while (reaped < 0 && errno == EINTR);
      if (reaped == pid && pid == pmix_server_) PmixServerEnded(status);
      if (reaped != pid || it == live_.end()) continue;  // an orphan that came to us
      StepRecord rec;
      rec.kind = StepRecord::Kind::kExited;
      rec.rank = it->second.rank;
      rec.pid = pid;
      if (WIFEXITED(status)) {
        rec.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        rec.signal = WTERMSIG(status);
        rec.exit_code = 128 + rec.signal;
      }
      batch += EncodeRecord(rec);
      gate_->Exited(it->second.index, rec.exit_code == 0 && rec.signal == 0);
      users_.Release(it->second.index);
      logs_.Unwatch(launch_.ranks[it->second.index].log_path);
      live_.erase(it);
    }
    // The last rank's record makes the agent sweep whatever still carries the attempt's env: the
    // PMIx server ends first, cleanly, rather than by that SIGKILL. Not while workers wait.
    if (live_.empty() && !gate_->holding() && pmix_server_ > 0) EndPmixServer();
    Append(batch, true);
    if (!batch.empty()) Advance();  // an exit may have met (or failed) a held worker's dependency
  }

  // Cuts the ranks' logs past launch_.log_max_bytes (log_rotation.h).
  void CheckLogs() {
    for (const std::string& why : logs_.Check()) Say(dir_, why);
  }

  static constexpr int kAgentCheckMs = 200;
  // How long the PMIx server may take to hand over the ranks' env (it registers the namespace
  // and one client per local rank; well under a second).
  static constexpr int kPmixStartSeconds = 30;
  // At most this many ranks are prepared (their logs open) while the step enters the cgroup.
  static constexpr size_t kPrepareAhead = 256;

  // Constant after construction.
  const std::string dir_;
  // Owned by the single thread.
  StepLaunch launch_;
  std::unique_ptr<platform::SignalWatch> signals_;
  int events_fd_ = -1;
  bool ready_sent_ = false;
  bool term_sent_ = false;
  std::optional<Clock::time_point> term_at_;  // a warned stop's SIGTERM, while its grace runs
  std::optional<Clock::time_point> kill_at_;
  int lock_fd_ = -1;  // the agent lock, or -1 when the step never stops on its own
  std::optional<Clock::time_point> agent_gone_since_;
  int64_t last_stamp_ = 0;                          // the lock's mtime as last seen, ns
  std::optional<Clock::time_point> stamp_seen_at_;  // when it was seen to change
  std::map<pid_t, Rank> live_;                      // rank leaders not yet reaped
  RankCgroup cgroup_;             // the ranks' cgroup (rank_cgroup.h); one call a no-op without one
  pid_t pmix_server_ = -1;        // trainlet-pmix (leads its own group), or -1 when none runs
  bool pmix_tried_ = false;       // StartPmixServer ran (with the first batch of ranks)
  Status pmix_ = Status::Ok();    // its answer: an error fails every rank's start
  std::optional<StepGate> gate_;  // which workers may start (step_gate.h); set once launched
  LogRotation logs_{0};           // the ranks' logs, cut past their cap
  StepUsers users_;               // who the ranks run as, and which users hold each work dir
  // The secret files written for the ranks (removed once they are gone).
  std::vector<std::string> secret_files_;
  SecretFileLinks secret_links_;  // ranks with the same secret and user share its inode
  SpareFiles spares_{""};         // the rank logs' inodes, made ahead by the agent
  int log_dir_fd_ = -1;           // the ranks' log dir while StartRanks opens their logs
  int env_files_ = 0;             // env files written for `trainlet-step --as`, to name each apart
};

}  // namespace

int RunStep(const std::string& dir, std::unique_ptr<platform::ProcessCgroup> entered) {
  return Step(dir, std::move(entered)).Run();
}

}  // namespace trainlet::step
