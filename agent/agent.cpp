#include "common/wall_clock.h"
#include "agent/agent.h"
#include "agent/node_taints.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <utility>

#include "agent/launch_planning.h"
#include "agent/process_sweep.h"
#include "agent/rank_binding.h"
#include "agent/topology.h"
#include "common/logging.h"
#include "common/platform/cpu_affinity.h"
#include "common/platform/directory_spread.h"
#include "common/platform/process_control.h"
#include "common/platform/process_info.h"
#include "common/rendezvous/fence_message.h"
#include "common/zmq_sockets.h"

extern char** environ;

namespace trainlet::agent {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// SIGUSR2: stop the workers too, then exit (see Run).
constexpr std::initializer_list<int> kLoopSignals = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR2};

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

void PrepareLoopSignals() {
  if (const std::string why = platform::PrepareSignals(kLoopSignals); !why.empty()) {
    spdlog::error("signals: {}", why);  // Init's SignalWatch::Open fails the same way
  }
  signal(SIGPIPE, SIG_IGN);
}

Agent::Agent(AgentConfig config) : config_(std::move(config)) {}

std::chrono::milliseconds Agent::OrphanGrace() const {
  // The coordinator places no restart before the node's last heartbeat + partition grace (+0.5 s);
  // this agent may have died up to one heartbeat after that beat, and its steps notice within
  // 0.2 s. So they stop their ranks that much earlier than the grace.
  const auto early = config_.heartbeat_interval + std::chrono::milliseconds(750);
  return std::max(std::chrono::milliseconds(100), partition_grace_ - early);
}

Agent::~Agent() = default;

Result<std::unique_ptr<Agent>> Agent::Create(AgentConfig config) {
  std::unique_ptr<Agent> agent(new Agent(std::move(config)));
  TRAINLET_RETURN_IF_ERROR(agent->Init());
  return agent;
}

Status Agent::Init() {
  if (config_.name.empty()) config_.name = Hostname();
  if (config_.address.empty()) config_.address = "127.0.0.1";
  if (config_.coordinator.empty()) return InvalidError("--coordinator: required");
  if (config_.state_dir.empty()) return InvalidError("--state-dir: required");
  std::error_code ec;
  fs::create_directories(config_.state_dir, ec);
  if (ec) return IoError("--state-dir " + config_.state_dir + ": " + ec.message());
  // One agent per state dir, and the steps' proof that an agent lives: an exclusive flock held
  // until this process ends, however it ends (the kernel drops it on kill -9 too). O_CLOEXEC
  // keeps it out of the steps and ranks.
  lock_path_ = config_.state_dir + "/agent.lock";
  lock_fd_ = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return IoError(lock_path_ + ": " + std::strerror(errno));
  // A step checking whether an agent lives holds the lock shared for a moment: retry briefly.
  bool locked = false;
  for (int i = 0; i < 50 && !locked; ++i) {
    locked = flock(lock_fd_, LOCK_EX | LOCK_NB) == 0;
    if (!locked) usleep(20000);
  }
  if (!locked) {
    return Status(ErrorCode::kExists, "--state-dir " + config_.state_dir +
                                          ": another trainlet-agent is running with it (" +
                                          lock_path_ + " is locked)");
  }

  TRAINLET_ASSIGN_OR_RETURN(keys_, ReadKeyPair(config_.key_file));
  if (keys_.secret_z85.empty()) {
    return InvalidError("--key " + config_.key_file + ": holds no secret-key");
  }
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair server, ReadKeyPair(config_.coordinator_key_file));
  coordinator_public_ = server.public_z85;

  TRAINLET_ASSIGN_OR_RETURN(NodeHardware hw,
                            DiscoverNodeHardware(config_.topology_xml, config_.apple_fixture));
  v1::Topology topo = std::move(hw.topology);
  spdlog::info("node {}: {}", config_.name, SummarizeTopology(topo));
  info_.set_name(config_.name);
  info_.set_address(config_.address);
  info_.set_hostname(Hostname());
  info_.set_slots(config_.slots != 0 ? config_.slots : std::max<uint32_t>(1, topo.pus()));
  *info_.mutable_topology() = std::move(topo);
  for (const auto& [k, v] : config_.labels) (*info_.mutable_labels())[k] = v;
  {
    auto taints = ParseTaintList(config_.taints);
    if (!taints.ok()) return InvalidError("--taints: " + taints.status().message());
    for (auto& t : *taints) *info_.add_taints() = std::move(t);
  }
  accelerator_plugins_ = MakeAcceleratorPlugins();
  const NodeAccelerators found = DiscoverNodeAccelerators(
      accelerator_plugins_, info_.topology(), hw.accelerator_env);
  for (const auto& note : found.notes) spdlog::info("accelerators: {}", note);
  AddAccelerators(found, &info_);
  {
    TRAINLET_ASSIGN_OR_RETURN(PortRange range, ParsePortRange(config_.worker_ports));
    auto ports = PortReservations::Create(config_.address, range, std::chrono::seconds(60),
                                          config_.state_dir + "/ports");
    if (!ports.ok()) return InvalidError("--address: " + ports.status().message());
    ports_ = std::make_unique<PortReservations>(std::move(ports).value());
    ports_->Restore(Clock::now());  // what a previous agent reserved or handed over
  }
  info_.set_agent_version(TRAINLET_VERSION);
  info_.set_boot_id_hash(static_cast<uint64_t>(NowUnixMs()));

  TRAINLET_ASSIGN_OR_RETURN(
      socket_, ConnectCurveDealer(ctx_, config_.coordinator, coordinator_public_, keys_));
  handshakes_ = HandshakeMonitor(ctx_, socket_, "agent-coordinator-monitor");

  std::string signal_error;
  signals_ = platform::SignalWatch::Open(kLoopSignals, &signal_error);
  if (!signals_) return InternalError(signal_error);
  TRAINLET_ASSIGN_OR_RETURN(ops_, AgentOps::Create(config_.metrics_address,
                                                   config_.metrics_best_effort, config_.name,
                                                   MakeSystemdNotifier(), &drops_));

  // Orphans of a worker (a daemonising helper that left its process group) are re-parented to
  // the agent rather than to init, so Reap() collects them: no zombies, and none escapes notice.
  // Where there is no subreaper (macOS), launchd reaps them; the group kill still finds them.
  if (const std::string why = platform::BecomeChildSubreaper(); !why.empty()) {
    spdlog::warn("orphans of workers go to init, not to the agent: {}", why);
  }
  const fs::path bin_dir = fs::path(platform::ExecutablePath()).parent_path();
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) base_env.emplace_back(*e);
  spawner_ = MakePosixProcessSpawner();
  WorkerSupervisor::Options steps;
  steps.steps_dir = config_.state_dir + "/steps";
  steps.agent_lock = lock_path_;
  steps.orphan_grace = OrphanGrace();
  // A step starting hundreds of ranks on a busy machine can take seconds; the node keeps beating
  // meanwhile, so neither side takes the wait for a hang or a partition.
  steps.keepalive = [this] {
    SendHeartbeat();
    next_heartbeat_ = Clock::now() + config_.heartbeat_interval;
  };
  steps.step_binary = (bin_dir / "trainlet-step").string();
  supervisor_ =
      std::make_unique<WorkerSupervisor>(spawner_.get(), std::move(base_env), std::move(steps));
  // Ranks a previous agent started on this node ran on under their steps: take them back before
  // registering, so the registration lists them and the coordinator keeps their attempts.
  std::set<PortReservations::AttemptKey> adopted_attempts;
  for (const auto& adopted : supervisor_->AdoptSteps()) {
    adopted_attempts.insert({adopted.job, adopted.attempt});
    attempts_.Adopt(adopted.job, adopted.attempt, adopted.stop_grace_ms);
    // Partition grace counts from now: a silent coordinator still stops adopted ranks.
    if (adopted.running != 0) last_heard_ = Clock::now();
  }
  // An attempt whose step is gone ended while no agent ran: nothing else would give back its
  // ports. Adopted ones give theirs back when their exits are reported.
  ports_->ReleaseHandedOverExcept(adopted_attempts);
  // The GPU check counts this machine's GPUs, also when impersonating another: only a change
  // since start counts, so the baseline and the checks see the same machine.
  config_.health.state_dir = config_.state_dir;
  std::vector<std::string> health_env = {"TRAINLET_NODE=" + config_.name,
                                         "TRAINLET_STATE_DIR=" + config_.state_dir};
  for (char** e = environ; *e != nullptr; ++e) health_env.emplace_back(*e);
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
  health_ = std::make_unique<HealthChecker>(config_.health, spawner_.get(), std::move(health_env),
                                            HealthChecker::GpuCounter{},
                                            HealthChecker::FreeSpace{}, accelerator_health);
  // Exec sessions run under steps too: take back those a previous agent left, before the first
  // Reap() reports the exits recorded while no agent ran.
  exec_sessions_ = std::make_unique<ExecSessions>(supervisor_.get(), config_.state_dir + "/exec",
                                                  [this](v1::Envelope e) { Send(std::move(e)); });
  exec_sessions_->Restore();
  // One subdirectory per job comes and goes under each of these: spread them over the disk so
  // that a new job's files are not allocated among the last job's freed inodes
  // (platform/directory_spread.h).
  fs::create_directories(config_.state_dir + "/logs", ec);
  for (const char* sub : {"/logs", "/steps", "/exec"}) {
    if (const std::string why = platform::SpreadSubdirectories(config_.state_dir + sub);
        !why.empty()) {
      spdlog::debug("job directories are not spread over the disk: {}", why);
    }
  }
  rendezvous_ = std::make_unique<RendezvousServer>(config_.name, config_.state_dir,
                                                   [this](v1::Envelope e) { Send(std::move(e)); });
  TRAINLET_RETURN_IF_ERROR(rendezvous_->Bind(ctx_));
  attempts_.Attach({ports_.get(), rendezvous_.get(), supervisor_.get()});
  exec_binary_ = (bin_dir / "trainlet-exec").string();
  return Status::Ok();
}

void Agent::Send(v1::Envelope env) {
  outbox_.push_back(std::move(env));
  FlushOutbox();
}

void Agent::FlushOutbox() {
  while (!outbox_.empty()) {
    if (!SendOnDealer(socket_, outbox_.front())) return;  // not connected: keep, retry later
    outbox_.pop_front();
  }
}

void Agent::SendEvent(v1::Envelope env) {
  events_.Add(std::move(env));
  FlushEvents(false);
}

void Agent::FlushEvents(bool everything) {
  // Events wait for a registration: a coordinator that does not know this node drops them.
  if (!registered_) return;
  auto due = events_.Due(Clock::now(), everything);
  for (size_t i = 0; i < due.size(); ++i) {
    if (!SendOnDealer(socket_, *due[i])) {
      events_.Unsent(due, i);
      return;
    }
  }
}

void Agent::ReadCoordinator(int at_most) {
  for (int i = 0; i < at_most; ++i) {
    auto env = ReceiveFromDealer(socket_, drops_);
    if (!env) {
      if (!(socket_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      continue;
    }
    OnMessage(*env);
  }
}

void Agent::CheckPartition(Clock::time_point now) {
  if (last_heard_ == Clock::time_point{} || partition_stopped_) return;
  if (now - last_heard_ < partition_grace_ || supervisor_->running() == 0) return;
  // After a long stall of our own loop (starting hundreds of ranks on a busy machine) the
  // coordinator's answers to the beats sent meanwhile are waiting unread: read them first.
  ReadCoordinator(1024);
  if (now - last_heard_ < partition_grace_ || partition_stopped_) return;
  // The coordinator has failed these attempts by now and may run them elsewhere; two attempts of
  // a job must never run at once.
  spdlog::error("no word from the coordinator for {} ms: stopping {} workers",
                std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard_).count(),
                supervisor_->running());
  std::set<std::string> jobs;
  for (const auto& w : supervisor_->Running()) jobs.insert(w.job);
  for (const auto& job : jobs) attempts_.StopRanks(job, now);
  partition_stopped_ = true;
}

void Agent::SendRegister() {
  v1::Envelope env;
  *env.mutable_register_() = info_;
  for (const auto& w : supervisor_->Running()) {
    auto* r = env.mutable_register_()->add_running();
    r->set_job(w.job);
    r->set_attempt(w.attempt);
    r->set_rank(w.rank);
    r->set_pid(w.pid);
  }
  env.mutable_register_()->set_events_acked_through(events_.acked_through());
  exec_sessions_->Report(env.mutable_register_()->mutable_exec_sessions());
  exec_sessions_->Hold();  // until the ack: a restarted coordinator resumes from the report
  // Registration is resent on a timer, so it never waits in the outbox behind itself.
  SendOnDealer(socket_, env);
  next_register_ = Clock::now() + config_.register_retry;
}

void Agent::SendHeartbeat() {
  v1::Envelope env;
  auto* hb = env.mutable_heartbeat();
  hb->set_node(config_.name);
  hb->set_seq(++heartbeat_seq_);
  hb->set_sent_unix_ms(NowUnixMs());
  hb->set_running_workers(static_cast<uint32_t>(supervisor_->running()));
  hb->set_healthy(health_->healthy());
  hb->set_health_reason(health_->reason());
  // A heartbeat that cannot go now is worthless later: never queue it.
  if (SendOnDealer(socket_, env)) ops_->OnHeartbeatSent();
}

std::string Agent::LogPath(const std::string& job, uint32_t attempt, uint32_t rank) const {
  return RankLogPath(config_.state_dir, job, attempt, rank);
}

void Agent::OnLaunchPlan(const v1::LaunchPlan& plan) {
  std::string why;
  bool refused = false;
  NodeAttempt* attempt = attempts_.BeginPlan(plan, &why, &refused);
  if (attempt == nullptr) {
    spdlog::warn("ignoring plan for {} attempt {}: {}", plan.job(), plan.attempt(), why);
    // A plan the attempt table refuses (its attempt is being launched): its ranks fail, should
    // anyone wait for them. An older attempt's plan is only ignored.
    if (refused) {
      for (const auto& w : plan.workers()) {
        ReportStart(plan, w.rank(), std::nullopt, Result<pid_t>(InvalidError(why)));
      }
    }
    return;
  }
  const std::string work_dir = WorkDir(plan.job());
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  Status blocked = WritePlanFiles(plan, work_dir);
  if (Status s = attempt->HandOverPorts(); !s.ok() && blocked.ok()) {
    blocked = s;  // every rank fails to start: the attempt fails and is retried
  }
  spdlog::info("starting {} workers of {} attempt {}", plan.workers_size(), plan.job(),
               plan.attempt());
  NodeLaunchContext node;
  node.node = config_.name;
  node.state_dir = config_.state_dir;
  node.exec_binary = exec_binary_;
  node.node_info = &info_;
  node.plugins = &accelerator_plugins_;
  std::vector<uint32_t> local_ranks;
  for (const auto& w : plan.workers()) {
    local_ranks.push_back(w.rank());
    if (supervisor_->IsRunning(plan.job(), plan.attempt(), w.rank())) node.running.insert(w.rank());
  }
  node.rendezvous_env = attempt->JoinRendezvous(local_ranks);
  node.cpu_affinity = platform::CpuAffinitySupported();
  node.cpus_available = CpusAvailableHere;
  const PlannedLaunches planned = PlanLaunches(plan, node);
  if (planned.cpus_unsupported) {
    static bool told_unsupported = false;  // once per agent; only the loop gets here
    if (!std::exchange(told_unsupported, true)) {
      spdlog::info(
          "CPU bindings are given to ranks (TRAINLET_CPUSET) but not applied: this "
          "platform has no CPU affinity API");
    }
  }
  if (!planned.cpus_unavailable.empty()) spdlog::info("{}", planned.cpus_unavailable);
  // Every rank of the plan starts under one step process (WorkerSupervisor::StartStep).
  const std::vector<Result<pid_t>> started = attempt->Launch(planned.launches, blocked);
  for (size_t i = 0; i < planned.launches.size(); ++i) {
    ReportStart(plan, planned.launches[i].rank, planned.bindings[i], started[i]);
  }
}

void Agent::ReportStart(const v1::LaunchPlan& plan, uint32_t rank,
                        const std::optional<RankBinding>& binding, const Result<pid_t>& pid) {
  ScopedLogFields log_fields(plan.job(), rank);  // journal: TRAINLET_JOB, TRAINLET_RANK
  v1::Envelope env;
  auto* ev = env.mutable_worker_event();
  ev->set_job(plan.job());
  ev->set_attempt(plan.attempt());
  ev->set_rank(rank);
  ev->set_node(config_.name);
  ev->set_unix_ms(NowUnixMs());
  if (pid.ok()) {
    ev->set_kind(v1::WorkerEvent::KIND_STARTED);
    ops_->OnWorkerStarted();
    ev->set_pid(*pid);
    if (binding) {
      ev->set_cpuset(binding->CpuList());
      ev->set_devices(binding->DeviceList());
    }
  } else {
    ev->set_kind(v1::WorkerEvent::KIND_START_FAILED);
    ops_->OnWorkerStartFailed();
    ev->set_message(pid.status().message());
    spdlog::error("rank {} of {}: {}", rank, plan.job(), pid.status().message());
  }
  SendEvent(std::move(env));
}

std::string Agent::WorkDir(const std::string& job) const {
  return JobWorkDir(config_.state_dir, job);
}

std::map<std::string, std::string> Agent::NodeEnv(const std::string& job) const {
  return NodeEnvFor(config_.name, WorkDir(job), exec_binary_);
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
  std::error_code ec;
  fs::create_directories(WorkDir(start.job()), ec);
  exec_sessions_->Start(start, NodeEnv(start.job()), WorkDir(start.job()));
}

void Agent::OnStopWorkers(const v1::StopWorkers& stop) {
  spdlog::info("stopping {} attempt {}: {}", stop.job(), stop.attempt(), stop.reason());
  attempts_.Stop(stop.job(), stop.attempt(), stop.reason(), Clock::now());
}

void Agent::OnReservePorts(const v1::ReservePorts& request) {
  v1::Envelope env;
  *env.mutable_ports_reserved() = attempts_.ReservePorts(request, Clock::now());
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    chunk->set_error("no log for rank " + std::to_string(read.rank()) + " of " + read.job() +
                     " attempt " + std::to_string(read.attempt()) + " on node " + config_.name);
  } else {
    const uint32_t max = std::min<uint32_t>(read.max_bytes() == 0 ? 256 << 10 : read.max_bytes(),
                                            1 << 20);
    in.seekg(static_cast<std::streamoff>(read.offset()));
    std::string data(max, '\0');
    in.read(data.data(), max);
    data.resize(static_cast<size_t>(in.gcount()));
    chunk->set_next_offset(read.offset() + data.size());
    chunk->set_eof(data.size() < max);
    chunk->set_data(std::move(data));
  }
  Send(std::move(env));
}

void Agent::OnChildExits() {
  std::set<std::pair<std::string, uint32_t>> ended;
  health_->Reap();  // first: the supervisor reaps every child, and logs those it does not know
  for (const WorkerExit& e : supervisor_->Reap()) {
    ended.insert({e.job, e.attempt});
    if (exec_sessions_->OnWorkerExit(e)) continue;
    rendezvous_->OnRankExited(e.job, e.attempt, e.rank,
                              rendezvous::DescribeRankExit(e.exit_code, e.signal));
    v1::Envelope env;
    auto* ev = env.mutable_worker_event();
    ev->set_job(e.job);
    ev->set_attempt(e.attempt);
    ev->set_rank(e.rank);
    ev->set_node(config_.name);
    ev->set_kind(v1::WorkerEvent::KIND_EXITED);
    ScopedLogFields log_fields(e.job, e.rank);
    ops_->OnWorkerExited(e.exit_code, e.signal);
    ev->set_pid(e.pid);
    ev->set_exit_code(e.exit_code);
    ev->set_signal(e.signal);
    ev->set_message(e.message);
    ev->set_unix_ms(NowUnixMs());
    // A rank that failed is worth a line at info; the thousands that end well are not.
    spdlog::log(e.exit_code != 0 || e.signal != 0 ? spdlog::level::info : spdlog::level::debug,
                "rank {} of {} attempt {} exited: code {} signal {}", e.rank, e.job, e.attempt,
                e.exit_code, e.signal);
    SendEvent(std::move(env));
    supervisor_->ExitReported(e, events_.last_seq());  // its step record goes once acked
  }
  // Once nothing of an attempt runs here any more, whatever it left outside its process groups
  // (an orted's ranks, say) goes too.
  for (const auto& [job, attempt] : ended) {
    if (supervisor_->running(job) != 0) continue;
    attempts_.RanksEnded(job, attempt);
    // The work dir names this agent's state dir: other agents on this machine (test clusters)
    // use the same node and job names.
    const size_t swept = KillTaggedProcesses({{"TRAINLET_NODE", config_.name},
                                              {"TRAINLET_JOB", job},
                                              {"TRAINLET_WORK_DIR", WorkDir(job)},
                                              {"TRAINLET_ATTEMPT", std::to_string(attempt)}});
    if (swept > 0) spdlog::warn("killed {} leftover processes of {} attempt {}", swept, job, attempt);
  }
}

void Agent::OnMessage(const v1::Envelope& env) {
  switch (env.body_case()) {
    case v1::Envelope::kRegisterAck:
      if (env.register_ack().accepted()) {
        if (!registered_) spdlog::info("registered with {}", config_.coordinator);
        registered_ = true;
        last_heard_ = Clock::now();
        partition_stopped_ = false;
        if (env.register_ack().partition_grace_ms() != 0) {
          partition_grace_ = std::chrono::milliseconds(env.register_ack().partition_grace_ms());
          supervisor_->set_orphan_grace(OrphanGrace());
        }
        FlushEvents(true);  // a new coordinator has seen none of the unacknowledged events
        exec_sessions_->Resend();  // nor the sessions' unacknowledged output and exits
      } else {
        spdlog::warn("coordinator asks to register again: {}", env.register_ack().reason());
        registered_ = false;
        SendRegister();
      }
      break;
    case v1::Envelope::kHeartbeatAck:
      last_heard_ = Clock::now();
      partition_stopped_ = false;
      // Before this agent's registration is accepted, an ack counts the events of a previous
      // agent on this node (a restart): applying it would drop this agent's unsent events.
      if (registered_) {
        events_.Ack(env.heartbeat_ack().acked_event_seq());
        supervisor_->ReportsAcked(env.heartbeat_ack().acked_event_seq());
      }
      // The exec sessions the coordinator relays for this node stand whoever registered.
      exec_sessions_->OnDelivered(env.heartbeat_ack().exec_sessions(), Clock::now());
      break;
    case v1::Envelope::kLaunchPlan: OnLaunchPlan(env.launch_plan()); break;
    case v1::Envelope::kStopWorkers: OnStopWorkers(env.stop_workers()); break;
    case v1::Envelope::kReservePorts: OnReservePorts(env.reserve_ports()); break;
    case v1::Envelope::kLogRead: OnLogRead(env.log_read()); break;
    case v1::Envelope::kFenceResult: rendezvous_->OnFenceResult(env.fence_result()); break;
    case v1::Envelope::kExecStart: OnExecStart(env.exec_start()); break;
    case v1::Envelope::kExecCancel:
      exec_sessions_->Cancel(env.exec_cancel().exec_id(), Clock::now());
      break;
    default:
      drops_.Add(DropReason::kUnexpected);
      spdlog::warn("dropped an unexpected {} from the coordinator",
                   v1::MessageType_Name(env.type()));
  }
}

void Agent::OnHandshakeEvents() {
  while (auto event = handshakes_.Read()) {
    // The first registration at start-up, and one after a partition, is sent once the connection
    // is usable rather than at the next register_retry tick (ZMQ_IMMEDIATE drops earlier sends).
    if (*event == HandshakeEvent::kSucceeded && !registered_) SendRegister();
    if (*event == HandshakeEvent::kRefusedKey) {
      spdlog::error("the coordinator at {} refused this agent's key: add its public key to the "
                    "coordinator's agent allowlist", config_.coordinator);
    }
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

Status Agent::Run() {
  spdlog::info("agent {} ({}) connecting to {}", config_.name, config_.address, config_.coordinator);
  SendRegister();
  next_heartbeat_ = Clock::now();
  while (true) {
    const auto now = Clock::now();
    ops_->Tick(registered_, config_.coordinator, supervisor_->running());  // READY=1, STATUS=
    if (now >= next_heartbeat_) {
      SendHeartbeat();
      next_heartbeat_ = now + config_.heartbeat_interval;
    }
    if (!registered_ && now >= next_register_) SendRegister();
    FlushOutbox();
    FlushEvents(false);
    CheckPartition(now);
    for (const auto& [job, attempt] : ports_->Expire(now)) {
      spdlog::warn("{} attempt {}: no launch plan came within the port hold timeout; its ports "
                   "are given back", job, attempt);
    }
    auto wake = std::min(next_heartbeat_, registered_ ? next_heartbeat_ : next_register_);
    if (auto expiry = ports_->NextExpiry()) wake = std::min(wake, *expiry);
    if (auto t = supervisor_->Tick(now)) wake = std::min(wake, now + *t);
    wake = std::min(wake, now + health_->Tick(now));
    if (auto t = rendezvous_->Tick(now)) wake = std::min(wake, now + *t);
    if (!outbox_.empty()) wake = std::min(wake, now + std::chrono::milliseconds(50));
    if (auto due = events_.NextDue(); due && registered_) {
      wake = std::min(wake, std::max(*due, now + std::chrono::milliseconds(50)));
    }
    if (last_heard_ != Clock::time_point{} && !partition_stopped_ && supervisor_->running() != 0) {
      wake = std::min(wake, std::max(last_heard_ + partition_grace_, now));
    }
    const auto timeout =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count());

    std::vector<zmq_pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                         {nullptr, signals_->fd(), ZMQ_POLLIN, 0},
                                         {nullptr, ops_->fd(), ZMQ_POLLIN, 0},
                                         {nullptr, supervisor_->wake_fd(), ZMQ_POLLIN, 0},
                                         {handshakes_.handle(), -1, ZMQ_POLLIN, 0}};
    exec_sessions_->AddPollItems(items);
    health_->AddPollItems(items);
    rendezvous_->AddPollItems(items);
    if (zmq_poll(items.data(), static_cast<int>(items.size()), static_cast<long>(timeout)) < 0) {
      if (zmq_errno() == EINTR) continue;
      return InternalError(std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
    }
    exec_sessions_->OnPolled(items);
    health_->OnPolled(items, Clock::now());
    rendezvous_->OnPolled(items, Clock::now());
    if (items[2].revents & ZMQ_POLLIN) ops_->OnReadable();  // metrics HTTP, watchdog
    if (items[3].revents & ZMQ_POLLIN) OnChildExits();      // a step recorded exits
    if (items[4].revents & ZMQ_POLLIN) OnHandshakeEvents();
    if (items[1].revents & ZMQ_POLLIN) {
      if (!OnSignals()) break;
    }
    if (items[0].revents & ZMQ_POLLIN) ReadCoordinator(64);
  }
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
