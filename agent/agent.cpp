#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <set>
#include <utility>

#include "agent/launch_planning.h"
#include "agent/log_tail.h"
#include "agent/node_taints.h"
#include "agent/process_sweep.h"
#include "agent/rank_binding.h"
#include "agent/topology.h"
#include "agent/work_dir_state.h"
#include "agent/working_dirs.h"
#include "common/platform/cpu_affinity.h"
#include "common/platform/directory_spread.h"
#include "common/platform/process_control.h"
#include "common/platform/process_info.h"
#include "common/wall_clock.h"
#include "common/zmq_sockets.h"

namespace trainlet::agent {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// SIGUSR2: stop the workers too, then exit (see Run).
constexpr std::initializer_list<int> kLoopSignals = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR2};

std::string Hostname(platform::Env& env) {
  Result<std::string> name = env.Hostname();
  return name.ok() ? *name : "localhost";
}

// Creates the state dir and takes its lock: one agent per state dir, and the steps' proof that an
// agent lives. The lock is held until the agent ends, however it ends (the kernel drops it on
// kill -9 too), and kept out of the steps and ranks (close-on-exec). A step checking whether an
// agent lives holds the lock shared for a moment: Env::LockFile retries briefly.
// The state dir and the job directories' parents are made 0700 (search kept for ranks of another
// user: MakeStateDirPrivate) whatever the umask or the dir given (issue 19): ranks' files.
Result<std::unique_ptr<platform::FileLock>> LockStateDir(platform::Env& env,
                                                         const std::string& state_dir,
                                                         const std::string& lock_path) {
  for (const char* sub : {"", "/logs", "/work", "/steps", "/exec"}) {
    bool tightened = false;
    const std::string dir = state_dir + sub;
    if (Status s = MakeStateDirPrivate(dir, &tightened); !s.ok()) {
      return Status(s.code(), "--state-dir " + state_dir + ": " + s.message());
    }
    if (tightened) spdlog::warn("{}: made private (mode 0700): it holds jobs' files", dir);
  }
  auto lock = env.LockFile(lock_path);
  if (!lock.ok() && lock.status().code() == ErrorCode::kExists) {
    return Status(ErrorCode::kExists, "--state-dir " + state_dir +
                                          ": another trainlet-agent is running with it (" +
                                          lock_path + " is locked)");
  }
  return lock;
}

// What the node tells the coordinator about itself at registration, less the version fields:
// its hardware (this machine, or the XML it impersonates), labels, taints and accelerators.
// The live machine's topology is also published for trainlet-pmix (PublishTopologyXml).
Result<v1::NodeInfo> DescribeNode(const AgentConfig& config, platform::Env& env,
                                  const std::vector<std::unique_ptr<AcceleratorPlugin>>& plugins) {
  TRAINLET_ASSIGN_OR_RETURN(NodeHardware hw,
                            DiscoverNodeHardware(config.topology_xml, config.apple_fixture));
  if (Status s = PublishTopologyXml(env, config.state_dir, hw.live_xml); !s.ok())
    spdlog::warn("{}: trainlet-pmix will discover the machine itself", s.message());
  const std::string hostname = Hostname(env);
  v1::Topology topo = std::move(hw.topology);
  spdlog::info("node {}: {}", config.name, SummarizeTopology(topo));
  v1::NodeInfo info;
  info.set_name(config.name);
  info.set_address(config.address);
  info.set_hostname(hostname);
  info.set_slots(config.slots != 0 ? config.slots : std::max<uint32_t>(1, topo.pus()));
  *info.mutable_topology() = std::move(topo);
  for (const auto& [k, v] : config.labels) (*info.mutable_labels())[k] = v;
  auto taints = ParseTaintList(config.taints);
  if (!taints.ok()) return InvalidError("--taints: " + taints.status().message());
  for (auto& t : *taints) *info.add_taints() = std::move(t);
  const NodeAccelerators found =
      DiscoverNodeAccelerators(plugins, info.topology(), hw.accelerator_env);
  for (const auto& note : found.notes) spdlog::info("accelerators: {}", note);
  AddAccelerators(found, &info);
  if (!config.shared_dir.empty()) {  // shared jobs are placed on such nodes only
    (*info.mutable_discovered_labels())[kSharedDirLabel] = "true";
    info.mutable_labels()->insert({kSharedDirLabel, "true"});
  }
  return info;
}

// The worker ports of --worker-ports on --address, with what a previous agent reserved or handed
// over.
Result<std::unique_ptr<PortReservations>> OpenPortReservations(const AgentConfig& config,
                                                               Clock::time_point now) {
  TRAINLET_ASSIGN_OR_RETURN(PortRange range, ParsePortRange(config.worker_ports));
  auto ports = PortReservations::Create(config.address, range, std::chrono::seconds(60),
                                        config.state_dir + "/ports");
  if (!ports.ok()) return InvalidError("--address: " + ports.status().message());
  auto reservations = std::make_unique<PortReservations>(std::move(ports).value());
  reservations->Restore(now);
  return reservations;
}

// One subdirectory per job comes and goes under logs/, steps/, exec/ and work/: spread them over
// the disk so that a new job's files are not allocated among the last job's freed inodes
// (platform/directory_spread.h). work/<job> holds the most of them (its workspace/, dataset/,
// model/, secrets dirs and files, attempt stamp). LockStateDir has made all four.
void SpreadJobDirectories(const std::string& state_dir) {
  for (const char* sub : {"/logs", "/steps", "/exec", "/work"}) {
    if (Status s = platform::SpreadSubdirectories(state_dir + sub); !s.ok()) {
      spdlog::debug("job directories are not spread over the disk: {}", s.message());
    }
  }
}

}  // namespace

void PrepareLoopSignals() {
  if (Status s = platform::PrepareSignals(kLoopSignals); !s.ok()) {
    spdlog::error("signals: {}", s.message());  // Init's SignalWatch::Open fails the same way
  }
  signal(SIGPIPE, SIG_IGN);
}

Agent::Agent(AgentConfig config, platform::Env& env)
    : env_(env), config_(std::move(config)), loop_(env) {}

std::chrono::milliseconds Agent::OrphanGrace() const {
  // The coordinator places no restart before the node's last heartbeat + partition grace (+0.5 s);
  // this agent may have died up to one heartbeat after that beat, and its steps notice within
  // 0.2 s. So they stop their ranks that much earlier than the grace.
  const auto early = config_.heartbeat_interval + std::chrono::milliseconds(750);
  return std::max(std::chrono::milliseconds(100), link_->partition_grace() - early);
}

Agent::~Agent() = default;

Result<std::unique_ptr<Agent>> Agent::Create(AgentConfig config) {
  return Create(std::move(config), platform::RealEnv());
}

Result<std::unique_ptr<Agent>> Agent::Create(AgentConfig config, platform::Env& env) {
  std::unique_ptr<Agent> agent(new Agent(std::move(config), env));
  TRAINLET_RETURN_IF_ERROR(agent->Init());
  return agent;
}

Status Agent::Init() {
  if (config_.name.empty()) config_.name = Hostname(env_);
  if (config_.address.empty()) config_.address = "127.0.0.1";
  if (config_.coordinator.empty()) return InvalidError("--coordinator: required");
  if (config_.state_dir.empty()) return InvalidError("--state-dir: required");
  lock_path_ = config_.state_dir + "/agent.lock";
  TRAINLET_ASSIGN_OR_RETURN(lock_, LockStateDir(env_, config_.state_dir, lock_path_));

  if (!config_.shared_dir.empty() && !fs::is_directory(config_.shared_dir)) {
    return InvalidError("--shared-dir " + config_.shared_dir +
                        ": not a directory (is it mounted?)");
  }
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair keys, ReadKeyPair(env_, config_.key_file));
  if (keys.secret_z85.empty()) {
    return InvalidError("--key " + config_.key_file + ": holds no secret-key");
  }
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair server, ReadKeyPair(env_, config_.coordinator_key_file));

  accelerator_plugins_ = MakeAcceleratorPlugins();
  TRAINLET_ASSIGN_OR_RETURN(info_, DescribeNode(config_, env_, accelerator_plugins_));
  TRAINLET_ASSIGN_OR_RETURN(ports_, OpenPortReservations(config_, env_.MonotonicNow()));
  info_.set_agent_version(TRAINLET_VERSION);
  info_.set_boot_id_hash(static_cast<uint64_t>(env_.WallUnixMs()));
  const std::vector<unsigned> pool = TopologyCpus(info_.topology());
  cpus_.SetPool(pool, FirstCpuIndex(config_.name, pool.size()));

  TRAINLET_RETURN_IF_ERROR(ConnectToCoordinator(std::move(keys), server.public_z85));
  TRAINLET_ASSIGN_OR_RETURN(signals_, platform::SignalWatch::Open(kLoopSignals));
  TRAINLET_ASSIGN_OR_RETURN(
      ops_, AgentOps::Create(config_.metrics_address, config_.metrics_best_effort, config_.name,
                             MakeSystemdNotifier(), &drops_));
  bin_dir_ = fs::path(env_.ExecutablePath()).parent_path().string();
  StartSupervisor();
  StartHealthChecks();
  TRAINLET_RETURN_IF_ERROR(StartExecAndRendezvous());
  TRAINLET_RETURN_IF_ERROR(StartProgressEndpoint());
  RegisterLoopSources();
  return Status::Ok();
}

Status Agent::ConnectToCoordinator(CurveKeyPair keys, std::string coordinator_public) {
  CoordinatorLink::Options options;
  options.endpoint = config_.coordinator;
  options.coordinator_public = std::move(coordinator_public);
  options.keys = std::move(keys);
  options.heartbeat_interval = config_.heartbeat_interval;
  options.register_retry = config_.register_retry;
  options.now = [this] { return env_.MonotonicNow(); };
  CoordinatorLink::Hooks hooks;
  hooks.registration = [this] { return Registration(); };
  hooks.heartbeat = [this] { return Heartbeat(); };
  hooks.heartbeat_sent = [this] { ops_->OnHeartbeatSent(); };
  hooks.message = [this](const v1::Envelope& env) { OnMessage(env); };
  hooks.cluster_bound = [this](const std::string& id) {
    const std::string path = ClusterIdPath();
    if (Status s = env_.WriteFileAtomically(path, id + "\n", 0600); !s.ok()) {
      spdlog::error("cannot keep the cluster id {} in {}: {}", id, path, s.message());
      return;
    }
    spdlog::info("this agent belongs to cluster {} (kept in {})", id, path);
  };
  TRAINLET_ASSIGN_OR_RETURN(
      link_, CoordinatorLink::Connect(ctx_, std::move(options), std::move(hooks), &drops_));
  return Status::Ok();
}

void Agent::StartSupervisor() {
  // Orphans of a worker (a daemonising helper that left its process group) are re-parented to
  // the agent rather than to init, so Reap() collects them: no zombies, and none escapes notice.
  // Where there is no subreaper (macOS), launchd reaps them; the group kill still finds them.
  if (Status s = env_.BecomeChildSubreaper(); !s.ok()) {
    spdlog::warn("orphans of workers go to init, not to the agent: {}", s.message());
  }
  std::vector<std::string> base_env = env_.Environment();
  spawner_ = &env_.processes();
  WorkerSupervisor::Options steps;
  steps.steps_dir = config_.state_dir + "/steps";
  steps.agent_lock = lock_path_;
  steps.orphan_grace = OrphanGrace();
  steps.agent_stamps = true;  // StampLock, from every tick
  steps.log_max_bytes = config_.rank_log_max_bytes;
  steps.run_as = config_.run_as;
  steps.step_standby = config_.step_standby;
  // A step starting hundreds of ranks on a busy machine can take seconds; the node keeps beating
  // meanwhile, so neither side takes the wait for a hang or a partition.
  steps.keepalive = [this] {
    link_->HeartbeatNow();
    StampLock(env_.MonotonicNow());
  };
  steps.step_binary = (fs::path(bin_dir_) / "trainlet-step").string();
  supervisor_ = std::make_unique<WorkerSupervisor>(spawner_, std::move(base_env), std::move(steps));
  // Asked on every tick while a purge or a moved-aside copy waits: counted in place, not copied.
  purge_ = std::make_unique<JobDataPurge>(config_.state_dir, config_.shared_dir, [this](auto& j) {
    return sweeps_->Waiting(j) || supervisor_->RunningOf(j, 0) > 0;
  });
  sweeps_ = std::make_unique<LeftoverSweeps>(
      [this](const std::string& job, uint32_t attempt) {
        return supervisor_->LeftoversOf(job, attempt);
      },
      [this](const std::string& job, uint32_t attempt) {
        // The work dir names this agent's state dir: other agents on this machine (test
        // clusters) use the same node and job names.
        const size_t swept = KillTaggedProcesses({{"TRAINLET_NODE", config_.name},
                                                  {"TRAINLET_JOB", job},
                                                  {"TRAINLET_WORK_DIR", WorkDir(job)},
                                                  {"TRAINLET_ATTEMPT", std::to_string(attempt)}});
        if (swept > 0) {
          spdlog::warn("killed {} leftover processes of {} attempt {}", swept, job, attempt);
        }
      });
  // Ranks a previous agent started on this node ran on under their steps: take them back before
  // registering, so the registration lists them and the coordinator keeps their attempts.
  std::set<PortReservations::AttemptKey> adopted_attempts;
  for (const auto& adopted : supervisor_->AdoptSteps()) {
    adopted_attempts.insert({adopted.job, adopted.attempt});
    attempts_.Adopt(adopted.job, adopted.attempt, adopted.stop_grace_ms, adopted.ranks,
                    adopted.rendezvous);
    cpus_.Restore({adopted.job, adopted.attempt}, adopted.cpus);  // what its ranks were given
    // Partition grace counts from now: a silent coordinator still stops adopted ranks.
    if (adopted.running != 0) link_->CountSilenceFrom(env_.MonotonicNow());
  }
  // An attempt whose step is gone ended while no agent ran: nothing else would give back its
  // ports. Adopted ones give theirs back when their exits are reported.
  ports_->ReleaseHandedOverExcept(adopted_attempts);
}

void Agent::StartHealthChecks() {
  // The GPU check counts this machine's GPUs, also when impersonating another: only a change
  // since start counts, so the baseline and the checks see the same machine.
  config_.health.state_dir = config_.state_dir;
  std::vector<std::string> health_env = {"TRAINLET_NODE=" + config_.name,
                                         "TRAINLET_STATE_DIR=" + config_.state_dir};
  for (std::string& e : env_.Environment()) health_env.push_back(std::move(e));
  // GPU health (XID events, ECC) changing since registration makes the node unhealthy too.
  auto accelerator_health = [this]() -> std::string {
    std::vector<v1::Accelerator> now(info_.accelerators().begin(), info_.accelerators().end());
    for (auto& plugin : accelerator_plugins_) plugin->RefreshHealth(&now);
    for (const auto& a : now) {
      if (a.health().rfind("unhealthy", 0) == 0) {
        return a.vendor() + " GPU " + a.pci_bus_id() + ": " + a.health();
      }
    }
    return "";
  };
  health_ = std::make_unique<HealthChecker>(config_.health, spawner_, std::move(health_env),
                                            HealthChecker::GpuCounter{}, HealthChecker::FreeSpace{},
                                            accelerator_health);
}

Status Agent::StartExecAndRendezvous() {
  // Exec sessions run under steps too: take back those a previous agent left, before the first
  // Reap() reports the exits recorded while no agent ran.
  exec_sessions_ = std::make_unique<ExecSessions>(supervisor_.get(), config_.state_dir + "/exec",
                                                  [this](v1::Envelope e) { Send(std::move(e)); });
  exec_sessions_->Restore();
  SpreadJobDirectories(config_.state_dir);
  rendezvous_ = std::make_unique<RendezvousServer>(config_.name, config_.state_dir,
                                                   [this](v1::Envelope e) { Send(std::move(e)); });
  TRAINLET_RETURN_IF_ERROR(rendezvous_->Bind(ctx_));
  attempts_.Attach({ports_.get(), rendezvous_.get(), supervisor_.get()});
  exec_binary_ = (fs::path(bin_dir_) / "trainlet-exec").string();
  reports_ = std::make_unique<RankReports>(
      RankReports::Deps{config_.name, &env_, ops_.get(), supervisor_.get(), rendezvous_.get(),
                        &cpus_, [this](v1::Envelope e) { SendEvent(std::move(e)); },
                        [this](const std::string& job, uint32_t attempt, uint32_t rank) {
                          return LogPath(job, attempt, rank);
                        }});
  return Status::Ok();
}

void Agent::Send(v1::Envelope env) { link_->Send(std::move(env)); }

void Agent::SendEvent(v1::Envelope env) { link_->SendEvent(std::move(env)); }

void Agent::CheckPartition(Clock::time_point now) {
  if (!link_->CheckPartition(now, supervisor_->running())) return;
  // The coordinator has failed these attempts by now and may run them elsewhere; two attempts of
  // a job must never run at once.
  const auto late = link_->PastGrace(now);
  spdlog::error("no word from the coordinator for {} ms: stopping {} workers{}",
                link_->SilentFor(now).count(), supervisor_->running(),
                late.count() < 100 ? std::string()
                                   : fmt::format(" ({} ms past the grace, taken off their stop "
                                                 "grace: their SIGKILL comes when it was due)",
                                                 late.count()));
  std::set<std::string> jobs;
  for (const auto& w : supervisor_->Running()) jobs.insert(w.job);
  for (const auto& job : jobs) attempts_.StopRanks(job, now, late);
}

v1::Envelope Agent::Registration() {
  v1::Envelope env;
  *env.mutable_register_() = info_;
  // Read at every registration: deleting the file re-points the agent without a restart.
  if (auto id = env_.ReadFile(ClusterIdPath(), 256); id.ok()) {
    std::string text = std::move(id).value();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    env.mutable_register_()->set_cluster_id(text);
  }
  for (const auto& w : supervisor_->Running()) {
    auto* r = env.mutable_register_()->add_running();
    r->set_job(w.job);
    r->set_attempt(w.attempt);
    r->set_rank(w.rank);
    r->set_pid(w.pid);
  }
  // And every attempt held, with or without a plan: the coordinator resends a plan it placed
  // here that is not among them (issue 19, defect 4).
  env.mutable_register_()->set_reports_attempts(true);
  for (auto& held : attempts_.Report()) *env.mutable_register_()->add_attempts() = std::move(held);
  exec_sessions_->Report(env.mutable_register_()->mutable_exec_sessions());
  exec_sessions_->Hold();  // until the ack: a restarted coordinator resumes from the report
  return env;
}

v1::Heartbeat Agent::Heartbeat() {
  v1::Heartbeat hb;
  hb.set_node(config_.name);
  hb.set_sent_unix_ms(env_.WallUnixMs());
  hb.set_running_workers(static_cast<uint32_t>(supervisor_->running()));
  hb.set_healthy(health_->healthy());
  hb.set_health_reason(health_->reason());
  hb.set_reports_attempts(true);
  for (auto& held : attempts_.Report(/*with_ended=*/false)) *hb.add_attempts() = std::move(held);
  return hb;
}

std::string Agent::ClusterIdPath() const { return config_.state_dir + "/cluster-id"; }

std::string Agent::LogPath(const std::string& job, uint32_t attempt, uint32_t rank) const {
  return RankLogPath(config_.state_dir, job, attempt, rank);
}

void Agent::OnLaunchPlan(const v1::LaunchPlan& plan) {
  // The launch's new dirs are spares renamed into place where the filler left some.
  step::SpareFiles spares(supervisor_->spare_dir());
  // Logged there; the plan goes on either way (job_data_purge.h).
  (void)purge_->OnPlan(plan.job(), plan.job_uid(), UsesSharedDir(plan), &spares);
  std::string why;
  bool refused = false;
  NodeAttempt* attempt = attempts_.BeginPlan(plan, env_.MonotonicNow(), &why, &refused);
  if (attempt == nullptr) {
    if (refused) {
      spdlog::warn("ignoring plan for {} attempt {}: {}", plan.job(), plan.attempt(), why);
    } else {
      spdlog::info("ignoring plan for {} attempt {}: {}", plan.job(), plan.attempt(), why);
    }
    // A plan the attempt table refuses (its attempt is being launched): its ranks fail, should
    // anyone wait for them. An older attempt's plan is only ignored.
    if (refused) {
      for (const auto& w : plan.workers()) {
        reports_->Started(plan.job(), plan.attempt(), w.rank(), "", std::nullopt,
                          Result<pid_t>(InvalidError(why)));
      }
    }
    return;
  }
  const std::string work_dir = WorkDir(plan.job());
  // The ranks run as this user.
  Status blocked = step::MakePrivateDirectoryFromSpare(work_dir, &spares);
  if (blocked.ok()) blocked = MakeJobWorkspace(config_.state_dir, plan.job(), &spares);
  if (blocked.ok()) blocked = WritePlanFiles(plan, work_dir);
  if (Status s = StampAttempt(work_dir, plan.job(), plan.attempt(), config_.name); !s.ok())
    spdlog::warn("{}: {}", plan.job(), s.message());  // the next attempt's report lacks it
  if (Status s = attempt->HandOverPorts(); !s.ok() && blocked.ok()) {
    blocked = s;  // every rank fails to start: the attempt fails and is retried
  }
  spdlog::info("starting {} workers of {} attempt {}", plan.workers_size(), plan.job(),
               plan.attempt());
  NodeLaunchContext node;
  node.node = config_.name;
  node.state_dir = config_.state_dir;
  node.exec_binary = exec_binary_;
  node.shared_dir = config_.shared_dir;
  node.initializer_binary = (fs::path(bin_dir_) / kInitializerName).string();
  node.cache_max_bytes = config_.initializer_cache_max_bytes;
  node.node_info = &info_;
  node.plugins = &accelerator_plugins_;
  std::vector<uint32_t> local_ranks;
  for (const auto& w : plan.workers()) {
    // A replicated job's workers (an initializer) take no part in the training's fences.
    if (w.step().empty()) local_ranks.push_back(w.rank());
    if (supervisor_->IsRunning(plan.job(), plan.attempt(), w.rank())) node.running.insert(w.rank());
  }
  node.rendezvous_env = attempt->JoinRendezvous(local_ranks, TrainingUser(plan, config_.run_as));
  if (progress_) {
    auto token_file = progress_->WriteTokenFile(plan.job(), plan.attempt());
    if (token_file.ok()) {
      node.progress_env = progress_->RankEnv(plan.job(), *token_file);
    } else {
      spdlog::warn("{} attempt {}: no progress reporting: {}", plan.job(), plan.attempt(),
                   token_file.status().message());
    }
  }
  node.cpu_affinity = platform::CpuAffinitySupported();
  // The agent's CPUs, read once for the plan (not once per rank, CpusAvailableHere).
  node.cpus_available = [mine = platform::ThisThreadCpus()](const std::vector<unsigned>& cpus) {
    return CpusAvailableIn(mine, cpus);
  };
  node.cpu_grant = GrantForPlan(cpus_, plan, info_).cpus;
  reports_->CpusTaken(plan.job(), plan.attempt());  // describe says when they must share
  PlannedLaunches planned = PlanLaunches(plan, node);
  LogUnappliedCpus(planned);
  if (blocked.ok()) blocked = PrepareCwds(plan.job(), planned.launches);
  std::vector<uint32_t> ranks;
  for (const WorkerLaunch& l : planned.launches) ranks.push_back(l.rank);
  // Every rank of the plan starts under one step process (WorkerSupervisor::StartStep).
  // The launches move into the step (their env is not copied); their ranks are kept above.
  const std::vector<Result<pid_t>> started = attempt->Launch(std::move(planned.launches), blocked);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const uint32_t rank = ranks[i];
    // pid 0: held by its step until its replicated job's dependencies are met; its start is
    // reported when it comes (OnChildExits).
    if (started[i].ok() && *started[i] == 0) {
      reports_->Hold(plan.job(), plan.attempt(), rank, WorkerCwd(plan, rank), planned.bindings[i]);
      continue;
    }
    reports_->Started(plan.job(), plan.attempt(), rank, WorkerCwd(plan, rank), planned.bindings[i],
                      started[i]);
  }
}

std::string Agent::WorkDir(const std::string& job) const {
  return JobWorkDir(config_.state_dir, job);
}

Status Agent::PrepareCwds(const std::string& job, const std::vector<WorkerLaunch>& launches) {
  std::vector<std::string> cwds;
  for (const auto& l : launches) cwds.push_back(l.cwd);
  return PrepareWorkerCwds(cwds,
                           {config_.name, WorkDir(job), SharedWorkDir(config_.shared_dir, job)});
}

std::string Agent::WorkerCwd(const v1::LaunchPlan& plan, uint32_t rank) const {
  for (const auto& w : plan.workers()) {
    if (w.rank() != rank) continue;
    return ResolveWorkerCwd(w.cwd(), WorkDir(plan.job()),
                            SharedWorkDir(config_.shared_dir, plan.job()));
  }
  return "";
}

std::map<std::string, std::string> Agent::NodeEnv(const std::string& job) const {
  return NodeEnvFor(config_.name, WorkDir(job), exec_binary_, config_.state_dir);
}

void Agent::OnExecStart(const v1::ExecStart& start) {
  const uint32_t latest = attempts_.latest(start.job());
  if (latest == 0 || latest != start.attempt()) {
    // Never run anything for an attempt this node is not running.
    v1::Envelope env;
    auto* ex = env.mutable_exec_exited();
    ex->set_exec_id(start.exec_id());
    ex->set_exit_code(255);
    ex->set_error("node " + config_.name + " is not running attempt " +
                  std::to_string(start.attempt()) + " of " + start.job());
    Send(std::move(env));
    return;
  }
  if (Status s = platform::MakePrivateDirectory(WorkDir(start.job())); !s.ok()) {
    spdlog::warn("exec in {}: {}", start.job(), s.message());  // its start fails in the cwd
  }
  exec_sessions_->Start(start, NodeEnv(start.job()), WorkDir(start.job()),
                        ExecCpus(cpus_, {start.job(), start.attempt()}));
}

void Agent::OnStopWorkers(const v1::StopWorkers& stop) {
  // Signal numbers are the coordinator's; nothing past the real-time range is a signal.
  const int signal =
      stop.warning_signal() > 0 && stop.warning_signal() <= 64 ? stop.warning_signal() : 0;
  if (stop.warn_only()) {
    spdlog::info("warning {} attempt {} with signal {}: {}", stop.job(), stop.attempt(), signal,
                 stop.reason());
    attempts_.Warn(stop.job(), stop.attempt(), signal);
    return;
  }
  spdlog::info("stopping {} attempt {}: {}", stop.job(), stop.attempt(), stop.reason());
  const StopWarning warning{signal, std::chrono::milliseconds(stop.warning_grace_ms())};
  attempts_.Stop(stop.job(), stop.attempt(), stop.reason(), env_.MonotonicNow(), warning);
}

void Agent::OnReservePorts(const v1::ReservePorts& request) {
  v1::Envelope env;
  if (request.count() > 0 || request.checkpoint_path().empty()) {
    *env.mutable_ports_reserved() = attempts_.ReservePorts(request, env_.MonotonicNow());
  } else {  // only the work dir's report: nothing to hold
    env.mutable_ports_reserved()->set_job(request.job());
    env.mutable_ports_reserved()->set_attempt(request.attempt());
  }
  if (!request.checkpoint_path().empty()) {  // work_dir_state.h: the divergence check's input
    *env.mutable_ports_reserved()->mutable_work_dir() =
        ReadWorkDirState(WorkDir(request.job()), request.checkpoint_path());
  }
  const v1::PortsReserved& answer = env.ports_reserved();
  if (answer.error().empty()) {
    spdlog::info("holding {} ports for {} attempt {}", answer.ports_size(), request.job(),
                 request.attempt());
  } else {
    spdlog::warn("cannot reserve ports for {} attempt {}: {}", request.job(), request.attempt(),
                 answer.error());
  }
  Send(std::move(env));
}

void Agent::OnLogRead(const v1::LogRead& read) {
  v1::Envelope env;
  auto* chunk = env.mutable_log_chunk();
  chunk->set_request_id(read.request_id());
  const std::string path = LogPath(read.job(), read.attempt(), read.rank());
  std::optional<LogSlice> slice = ReadLogSlice(path, read.offset(), read.max_bytes());
  if (!slice) {
    chunk->set_error("no log for rank " + std::to_string(read.rank()) + " of " + read.job() +
                     " attempt " + std::to_string(read.attempt()) + " on node " + config_.name);
  } else {
    chunk->set_next_offset(slice->next_offset);
    chunk->set_eof(slice->eof);
    chunk->set_data(std::move(slice->data));
  }
  Send(std::move(env));
}

void Agent::OnChildExits() {
  std::set<std::pair<std::string, uint32_t>> ended;
  health_->Reap();  // first: the supervisor reaps every child, and logs those it does not know
  const std::vector<WorkerExit> exits = supervisor_->Reap();
  // Held ranks their steps started late: before the exits, which may include theirs.
  for (const LateStart& l : supervisor_->TakeLateStarts()) reports_->LateStarted(l);
  for (const WorkerExit& e : exits) {
    ended.insert({e.job, e.attempt});
    if (exec_sessions_->OnWorkerExit(e)) continue;
    reports_->Exited(e);
    supervisor_->ExitReported(e, link_->last_event_seq());  // its step record goes once acked
  }
  // Once nothing of an attempt runs here any more, whatever it left outside its process groups
  // (an orted's ranks, say) goes too: with its steps' cgroups, or by the env sweep
  // (leftover_sweeps.h), once its steps are done.
  const auto now = env_.MonotonicNow();
  for (const auto& [job, attempt] : ended) {
    if (supervisor_->running(job) != 0) continue;
    attempts_.RanksEnded(job, attempt);
    cpus_.Release({job, attempt});
    ForgetProgress(job, attempt);
    sweeps_->Ended(job, attempt, now);
  }
  sweeps_->Run(now);
}

void Agent::OnMessage(const v1::Envelope& env) {
  switch (env.body_case()) {
    // The link applied the acks to itself first (registered, events acked, partition clock).
    case v1::Envelope::kRegisterAck:
      if (env.register_ack().accepted()) {
        if (env.register_ack().partition_grace_ms() != 0) {
          supervisor_->set_orphan_grace(OrphanGrace());
        }
        exec_sessions_->Resend();  // a new coordinator has seen none of their output and exits
        rendezvous_->Resync();     // nor any fence
      }
      break;
    case v1::Envelope::kHeartbeatAck:
      if (link_->registered()) supervisor_->ReportsAcked(env.heartbeat_ack().acked_event_seq());
      // The exec sessions the coordinator relays for this node stand whoever registered.
      exec_sessions_->OnDelivered(env.heartbeat_ack().exec_sessions(), env_.MonotonicNow());
      break;
    case v1::Envelope::kLaunchPlan:
      OnLaunchPlan(env.launch_plan());
      break;
    case v1::Envelope::kStopWorkers:
      OnStopWorkers(env.stop_workers());
      break;
    case v1::Envelope::kReservePorts:
      OnReservePorts(env.reserve_ports());
      break;
    case v1::Envelope::kPurgeJob:
      if (Status s = purge_->Request(env.purge_job()); !s.ok()) {
        spdlog::warn("{}", s.message());
      }
      // The name may come back, counting its attempts from 1 again.
      attempts_.Purge(env.purge_job().job(), env.purge_job().uid());
      break;
    case v1::Envelope::kLogRead:
      OnLogRead(env.log_read());
      break;
    case v1::Envelope::kFenceResult:
    case v1::Envelope::kRendezvousPublish:  // pairs a rank published outside a fence
      rendezvous_->OnCoordinatorMessage(env);
      break;
    case v1::Envelope::kExecStart:
      OnExecStart(env.exec_start());
      break;
    case v1::Envelope::kExecCancel:
      exec_sessions_->Cancel(env.exec_cancel().exec_id(), env_.MonotonicNow());
      break;
    default:
      drops_.Add(DropReason::kUnexpected);
      spdlog::warn("dropped an unexpected {} from the coordinator",
                   v1::MessageType_Name(env.type()));
  }
}

bool Agent::OnSignals() {
  bool keep_running = true;
  for (const int sig : signals_->Take()) {
    if (sig == SIGCHLD) continue;  // reaped below, whatever the count
    if (sig == SIGTERM || sig == SIGINT) keep_running = false;
    if (sig == SIGUSR2) {
      stop_workers_on_exit_ = true;
      keep_running = false;
    }
  }
  OnChildExits();
  return keep_running;
}

void Agent::RegisterLoopSources() {
  using Loop = platform::EventLoop;
  loop_.AddTick(
      [this](Clock::time_point now) -> std::optional<Clock::time_point> { return OnTick(now); });
  // Ready sources run in this order. The ranks' rendezvous requests go before their exits, so a
  // rank's last request is answered before its exit ends the attempt.
  std::vector<zmq_pollitem_t> rendezvous_items;
  rendezvous_->AddPollItems(rendezvous_items);
  for (const auto& item : rendezvous_items) {
    loop_.AddSocket(item.socket, Loop::kReadable, [this](short) {
      std::vector<zmq_pollitem_t> items;
      rendezvous_->AddPollItems(items);
      for (auto& i : items) i.revents = ZMQ_POLLIN;
      rendezvous_->OnPolled(items, env_.MonotonicNow());
    });
  }
  loop_.AddFd(ops_->fd(), Loop::kReadable, [this](short) { ops_->OnReadable(); });  // /metrics
  if (progress_) {
    loop_.AddFd(progress_->fd(), Loop::kReadable, [this](short) { progress_->OnReadable(); });
  }
  loop_.AddFd(supervisor_->wake_fd(), Loop::kReadable, [this](short) { OnChildExits(); });
  if (link_->monitor_handle() != nullptr) {
    loop_.AddSocket(link_->monitor_handle(), Loop::kReadable,
                    [this](short) { link_->OnHandshakeEvents(); });
  }
  loop_.AddFd(signals_->fd(), Loop::kReadable, [this](short) {
    if (!OnSignals()) loop_.Stop();
  });
  loop_.AddSocket(link_->socket_handle(), Loop::kReadable, [this](short) { link_->Read(64); });
  // Their descriptors come and go (a health program's pipe, the exec output watch); neither cares
  // whether it runs before or after the sources above.
  exec_output_source_ = std::make_unique<PollItemSource>(
      loop_, [this](std::vector<zmq_pollitem_t>& items) { exec_sessions_->AddPollItems(items); },
      [this](const std::vector<zmq_pollitem_t>& items) { exec_sessions_->OnPolled(items); });
  health_source_ = std::make_unique<PollItemSource>(
      loop_, [this](std::vector<zmq_pollitem_t>& items) { health_->AddPollItems(items); },
      [this](const std::vector<zmq_pollitem_t>& items) {
        health_->OnPolled(items, env_.MonotonicNow());
      });
}

Clock::time_point Agent::OnTick(Clock::time_point now) {
  ops_->Tick(link_->registered(), config_.coordinator, supervisor_->running());  // READY=1
  link_->Tick(now);  // heartbeat, registration, outboxes
  StampLock(now);
  CheckPartition(now);
  for (const auto& [job, attempt] : ports_->Expire(now)) {
    spdlog::warn(
        "{} attempt {}: no launch plan came within the port hold timeout; its ports "
        "are given back",
        job, attempt);
  }
  auto wake = std::min(link_->NextWake(now, supervisor_->running() != 0), next_stamp_);
  if (auto expiry = ports_->NextExpiry()) wake = std::min(wake, *expiry);
  if (auto t = supervisor_->Tick(now)) wake = std::min(wake, now + *t);
  wake = std::min(wake, now + health_->Tick(now));
  if (auto t = rendezvous_->Tick(now)) wake = std::min(wake, now + *t);
  PublishLiveAttempts();  // which attempts the progress thread accepts posts of
  ReportProgress(now);
  if (auto t = sweeps_->Run(now)) wake = std::min(wake, *t);  // a hung step's attempt
  purge_->Poll();  // deleted jobs whose last workers have exited
  if (purge_->pending()) wake = std::min(wake, now + std::chrono::seconds(1));
  // Idle costs nothing: the loop wakes for a report only while a post waits for one.
  if (progress_ && progress_->has_pending() && link_->registered()) {
    wake = std::min(wake, std::max(now, next_progress_report_));
  }
  return wake;
}

void Agent::StampLock(Clock::time_point now) {
  if (now < next_stamp_) return;
  next_stamp_ = now + config_.heartbeat_interval;
  if (Status s = lock_->Touch(); !s.ok() && !stamp_failed_) {
    stamp_failed_ = true;  // once: it fails the same way every time
    spdlog::warn("{}; steps will take this agent for hung after their orphan grace", s.message());
  }
}

Status Agent::RunOnce(std::chrono::milliseconds max_wait) {
  if (loop_.stopped()) return Status::Ok();
  if (!std::exchange(started_, true)) link_->Start();
  return loop_.RunOnce(max_wait);
}

Status Agent::Run() {
  spdlog::info("agent {} ({}) connecting to {}", config_.name, config_.address,
               config_.coordinator);
  if (!std::exchange(started_, true)) link_->Start();
  TRAINLET_RETURN_IF_ERROR(loop_.Run());
  return Shutdown();
}

Status Agent::Shutdown() {
  ops_->OnStopping();  // STOPPING=1
  if (!stop_workers_on_exit_) {
    // SIGTERM (a restart, an upgrade): the steps and their ranks run on, exec sessions included,
    // and the next agent on this state dir adopts them. Only direct workers (none today) end.
    spdlog::info("agent {} stopping: {} ranks run on under their steps, {} of them exec sessions",
                 config_.name, supervisor_->running(), exec_sessions_->size());
    supervisor_->KillDirectAndWait(std::chrono::seconds(10));
    return Status::Ok();
  }
  spdlog::info("agent {} stopping: ending {} workers", config_.name, supervisor_->running());
  for (const auto& e : supervisor_->KillAllAndWait(std::chrono::seconds(10))) {
    spdlog::info("rank {} of {} ended at shutdown (signal {})", e.rank, e.job, e.signal);
  }
  size_t swept = 0;
  for (const auto& job : attempts_.jobs()) {
    swept += KillTaggedProcesses({{"TRAINLET_NODE", config_.name},
                                  {"TRAINLET_JOB", job},
                                  {"TRAINLET_WORK_DIR", WorkDir(job)}});
  }
  if (swept > 0) spdlog::warn("killed {} leftover processes of this node's jobs", swept);
  return Status::Ok();
}

}  // namespace trainlet::agent
