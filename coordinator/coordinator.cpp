#include "coordinator/coordinator.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "common/curve_keys.h"
#include "common/platform/signal_watch.h"
#include "common/zmq_sockets.h"
#include "coordinator/access_policy_run_as.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/cluster_identity.h"
#include "coordinator/lifecycle_rules.h"

namespace trainlet::coordinator {
namespace {

using TimePoint = platform::EventLoop::TimePoint;

constexpr std::initializer_list<int> kLoopSignals = {SIGTERM, SIGINT, SIGHUP};

}  // namespace

void PrepareCoordinatorSignals() {
  if (Status s = platform::PrepareSignals(kLoopSignals); !s.ok()) {
    spdlog::error("signals: {}", s.message());  // Init's SignalWatch::Open fails the same way
  }
  signal(SIGPIPE, SIG_IGN);
}

Coordinator::Coordinator(CoordinatorConfig config, platform::Env& env)
    : config_(std::move(config)), env_(env), loop_(env) {}

Coordinator::~Coordinator() = default;

Result<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorConfig config) {
  return Create(std::move(config), platform::RealEnv());
}

Result<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorConfig config,
                                                         platform::Env& env) {
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(config), env));
  TRAINLET_RETURN_IF_ERROR(c->Init());
  return c;
}

Status Coordinator::Init() {
  if (config_.state_dir.empty()) return InvalidError("--state-dir: required");
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair keys, ReadKeyPair(config_.key_file));
  if (keys.secret_z85.empty())
    return InvalidError("--key " + config_.key_file + ": holds no secret-key");
  JobStoreConfig store_config = config_.store;
  store_config.state_dir = config_.state_dir;
  TRAINLET_ASSIGN_OR_RETURN(store_, OpenJobStore(store_config));
  // A store that holds nothing is refused unless initialised: a lost store must not become a new
  // cluster that stops every agent's ranks (issue 19, defect 3).
  TRAINLET_ASSIGN_OR_RETURN(cluster_id_, EstablishClusterId(*store_, config_.init_store));
  spdlog::info("cluster id {}", cluster_id_);

  // The ZAP handler must exist before a CURVE server socket can admit anyone.
  TRAINLET_ASSIGN_OR_RETURN(zap_, ZapAuthenticator::Create(ctx_));
  if (Status s = zap_->AddDomain("agent", config_.agent_allowlist); !s.ok()) {
    return Status(s.code(), "--agent-allowlist: " + s.message());
  }
  if (Status s = zap_->AddDomain("operator", config_.operator_allowlist); !s.ok()) {
    return Status(s.code(), "--operator-allowlist: " + s.message());
  }
  zap_->SetAllowlist("exec", {});  // launcher keys of live attempts, kept current by the loop
  TRAINLET_ASSIGN_OR_RETURN(
      agents_, BindCurveRouter(ctx_, config_.agent_listen, keys, "agent", &agent_endpoint_));
  TRAINLET_ASSIGN_OR_RETURN(operators_, BindCurveRouter(ctx_, config_.operator_listen, keys,
                                                        "operator", &operator_endpoint_));
  std::string exec_bound;
  TRAINLET_ASSIGN_OR_RETURN(execs_,
                            BindCurveRouter(ctx_, config_.exec_listen, keys, "exec", &exec_bound));
  exec_endpoint_ = Advertised(exec_bound, config_.exec_advertise);

  registry_ = std::make_unique<NodeRegistry>(config_.heartbeat_interval, config_.lost_timeout);
  registry_->BindNamesToKeys([this] { return zap_->KeysOf("agent"); });  // issue 19, defect 7
  registry_->SetFullDisruptionRule(true);  // issue 19, defect 1: all silent at once is ours
  JobControllerOptions options;
  options.exec_endpoint = exec_endpoint_;  // then the HA set's others, for trainlet-exec
  for (const std::string& peer : SplitEndpointList(config_.exec_peers)) {
    if (peer != exec_endpoint_) options.exec_endpoint += "," + peer;
  }
  options.start_timeout = config_.start_timeout;
  options.restart_backoff = config_.restart_backoff;
  options.max_restart_backoff = config_.max_restart_backoff;
  options.finished_job_ttl = config_.finished_job_ttl;
  options.stop_grace_ms = static_cast<uint32_t>(config_.stop_grace.count());
  options.preemption_grace = config_.preemption_grace;
  options.deadline_warning = config_.deadline_warning;
  options.server_public_key = keys.public_z85;
  options.admission.default_local_queue = config_.default_queue;
  options.check_run_as = [this](const JobEntry& job, const std::string& user) {
    return policy_ ? CheckJobRunAs(policy_->Current(), job, user) : Status::Ok();
  };
  jobs_ = std::make_unique<JobController>(store_.get(), registry_.get(), this, options);
  // With etcd, the store is loaded once this coordinator wins the election (FollowElection).
  etcd_store_ = dynamic_cast<EtcdJobStore*>(store_.get());
  TRAINLET_RETURN_IF_ERROR(etcd_store_ == nullptr ? Lead() : StartCampaign());
  operator_service_ = std::make_unique<OperatorService>(
      jobs_.get(), registry_.get(), this, [this](const std::string& rid, v1::Envelope env) {
        if (!SendToRouterPeer(operators_, rid, env)) spdlog::debug("operator went away");
      });
  apply_parser_ = std::make_unique<ApplyParser>(ctx_);
  operator_service_->ParseAppliesOn(apply_parser_.get());
  // Who may do what: policy.yaml next to the operator allowlist (access_policy.h).
  std::filesystem::path allow_dir = std::filesystem::path(config_.operator_allowlist).parent_path();
  TRAINLET_ASSIGN_OR_RETURN(
      AccessPolicyFile policy,
      AccessPolicyFile::Open(((allow_dir.empty() ? "." : allow_dir) / "policy.yaml").string()));
  policy_ = std::make_unique<AccessPolicyFile>(std::move(policy));
  if (policy_->Current().enforced()) {
    spdlog::info("access policy {}: {} users", policy_->path(), policy_->Current().users());
  }
  operator_service_->EnforcePolicy([this]() -> const AccessPolicy& { return policy_->Current(); });
  exec_relay_ = std::make_unique<ExecRelay>(jobs_.get(), this,
                                            [this](const std::string& rid, v1::Envelope env) {
                                              if (!SendToRouterPeer(execs_, rid, env))
                                                spdlog::debug("trainlet-exec went away");
                                            });
  fences_ = std::make_unique<FenceTable>(
      [this](const std::string& job, uint32_t attempt) -> std::optional<std::vector<std::string>> {
        const v1::JobStatus* st = jobs_->Find(job);
        if (st == nullptr || !jobs_->exec().AttemptActive(job, attempt)) return std::nullopt;
        return std::vector<std::string>(st->placement().begin(), st->placement().end());
      });
  TRAINLET_ASSIGN_OR_RETURN(signals_, platform::SignalWatch::Open(kLoopSignals));
  TRAINLET_ASSIGN_OR_RETURN(
      ops_, CoordinatorOps::Create(config_.metrics_address, config_.metrics_best_effort,
                                   MakeSystemdNotifier(), registry_.get(), jobs_.get(), &drops_));
  ops_->CountHandshakes(zap_.get());
  AddLoopSources();
  return WriteEndpoints();
}

std::string Coordinator::Advertised(const std::string& bound, const std::string& advertise) const {
  if (!advertise.empty()) return advertise;
  // A wildcard bind is reached through this host's name.
  for (const std::string wildcard : {"tcp://0.0.0.0:", "tcp://*:"}) {
    if (bound.rfind(wildcard, 0) != 0) continue;
    if (Result<std::string> host = env_.Hostname(); host.ok()) {
      return "tcp://" + *host + ":" + bound.substr(wildcard.size());
    } else {
      spdlog::warn("endpoint {} advertised as bound: {}", bound, host.status().message());
    }
  }
  return bound;
}

void Coordinator::AddLoopSources() {
  using platform::EventLoop;
  loop_.AddTick([this](TimePoint now) { return Tick(now); });
  loop_.AddSocket(zap_->socket().handle(), EventLoop::kReadable,
                  [this](short) { zap_->HandleRequest(); });
  loop_.AddFd(ops_->fd(), EventLoop::kReadable,
              [this](short) { ops_->OnReadable(); });  // metrics HTTP, watchdog
  loop_.AddFd(signals_->fd(), EventLoop::kReadable, [this](short) { OnSignals(); });
  // Bounded batches keep one busy endpoint from starving the other.
  loop_.AddSocket(agents_.handle(), EventLoop::kReadable, [this](short) { ReadAgentMessages(); });
  loop_.AddSocket(operators_.handle(), EventLoop::kReadable, [this](short) {
    for (int i = 0; i < 64; ++i) {
      if (!(operators_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      if (auto msg = ReceiveFromRouter(operators_, drops_)) OnOperatorMessage(*msg);
    }
  });
  loop_.AddSocket(execs_.handle(), EventLoop::kReadable, [this](short) {
    for (int i = 0; i < 256; ++i) {
      if (!(execs_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      if (auto msg = ReceiveFromRouter(execs_, drops_)) {
        if (!LeadingNow()) continue;  // a follower knows no sessions (and admits no launcher)
        exec_relay_->OnClientMessage(*msg, env_.MonotonicNow());
      }
    }
  });
  // Applies parsed off the loop come back here to be stored and answered (apply_parser.h).
  loop_.AddSocket(apply_parser_->notify_socket(), EventLoop::kReadable,
                  [this](short) { operator_service_->OnApplyParsed(env_.WallUnixMs()); });
}

void Coordinator::ReadAgentMessages() {
  for (int i = 0; i < 256; ++i) {
    if (!(agents_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
    if (auto msg = ReceiveFromRouter(agents_, drops_)) OnAgentMessage(*msg);
  }
}

Status Coordinator::WriteEndpoints() const {
  spdlog::info("serving agents on {} and operators on {}", agent_endpoint_, operator_endpoint_);
  if (config_.endpoints_file.empty()) return Status::Ok();
  nlohmann::json j = {{"agent_endpoint", agent_endpoint_},
                      {"operator_endpoint", operator_endpoint_},
                      {"exec_endpoint", exec_endpoint_},
                      {"metrics_endpoint", ops_->metrics_address()},
                      {"pid", env_.ProcessId()}};
  // Written to a temporary and renamed, so a reader never sees half of it.
  if (Status s = env_.WriteFileAtomically(config_.endpoints_file, j.dump(2) + "\n", 0644);
      !s.ok()) {
    return IoError("--endpoints-file " + s.message());
  }
  return Status::Ok();
}

void Coordinator::SendToNode(const std::string& node, v1::Envelope env) {
  const NodeEntry* e = registry_->Find(node);
  if (e == nullptr || e->state == NodeState::kLost) {
    spdlog::warn("cannot send {} to node {}: not connected",
                 v1::MessageType_Name(TypeForBody(env.body_case())), node);
    return;
  }
  if (!SendToRouterPeer(agents_, e->routing_id, env)) {
    spdlog::warn("send to node {} failed: its connection is gone", node);
  }
}

void Coordinator::OnAgentMessage(RouterMessage& msg) {
  if (!LeadingNow()) return RefuseAgentAsFollower(msg);
  const auto now = env_.MonotonicNow();
  const int64_t now_ms = env_.WallUnixMs();
  switch (msg.envelope.body_case()) {
    case v1::Envelope::kRegister:
      OnRegister(msg, now, now_ms);
      return;
    case v1::Envelope::kHeartbeat:
      OnHeartbeat(msg, now, now_ms);
      return;
    default:
      break;
  }
  // Everything else must come from a registered node's own connection, and speaks for that node
  // only: a second agent holding the same key, refused at registration, is not heard.
  const NodeEntry* node = registry_->FindByConnection(msg.user_id, msg.routing_id);
  if (node == nullptr || node->state == NodeState::kLost) {
    drops_.Add(DropReason::kUnauthorized);
    spdlog::warn("dropped {} from an agent key or connection that did not register",
                 v1::MessageType_Name(msg.envelope.type()));
    return;
  }
  OnNodeMessage(node->info.name(), msg.envelope, now, now_ms);
}

void Coordinator::OnRegister(const RouterMessage& msg, std::chrono::steady_clock::time_point now,
                             int64_t now_ms) {
  const v1::Envelope& env = msg.envelope;
  v1::Envelope ack;
  auto* a = ack.mutable_register_ack();
  a->set_heartbeat_interval_ms(static_cast<uint32_t>(config_.heartbeat_interval.count()));
  a->set_partition_grace_ms(static_cast<uint32_t>(config_.partition_grace.count()));
  a->set_cluster_id(cluster_id_);
  const std::string& theirs = env.register_().cluster_id();
  Status s = !theirs.empty() && theirs != cluster_id_
                 ? PermissionError("this coordinator is cluster " + cluster_id_ +
                                   ", the agent belongs to cluster " + theirs +
                                   ": it keeps its ranks; to join it to this cluster, delete "
                                   "the cluster-id file in its state dir")
                 : registry_->Register(env.register_(), msg.routing_id, msg.user_id, now, now_ms);
  a->set_accepted(s.ok());
  a->set_reason(s.message());
  if (s.ok()) {
    spdlog::info("node {} registered ({} slots, address {})", env.register_().name(),
                 env.register_().slots(), env.register_().address());
  } else {
    ops_->OnRegistrationRefused();
    const std::string key = env.register_().name() + "\n" + msg.user_id;
    if (auto d = refusal_log_.Admit(key, now); d.log) {
      spdlog::warn("refused registration of {}: {}{}", env.register_().name(), s.message(),
                   LogRateLimiter::Suffix(d));
    }
  }
  SendToRouterPeer(agents_, msg.routing_id, ack);
  if (s.ok()) {
    jobs_->ReconcileNode(env.register_().name(), env.register_().running(), now_ms);
    exec_relay_->AdoptSessions(env.register_().name(), env.register_().exec_sessions(), now);
    // No pass here: Tick runs one after this batch of messages, so 1,000 agents re-registering
    // with a new leader cost one pass, not 1,000 (issue 17).
  }
}

void Coordinator::OnHeartbeat(const RouterMessage& msg, std::chrono::steady_clock::time_point now,
                              int64_t now_ms) {
  const v1::Envelope& env = msg.envelope;
  ops_->OnHeartbeat(env.heartbeat().sent_unix_ms(), now_ms);
  // Authorised by the key, like the beat itself: a node reports only its own health.
  if (const NodeEntry* e = registry_->FindByConnection(msg.user_id, msg.routing_id)) {
    registry_->SetHealth(e->info.name(), env.heartbeat().healthy(),
                         env.heartbeat().health_reason());
  }
  if (const NodeEntry* node = registry_->Heartbeat(msg.user_id, msg.routing_id, now, now_ms)) {
    registry_->RecordAttempts(node->info.name(), env.heartbeat().attempts(),
                              env.heartbeat().reports_attempts(), now_ms);
    v1::Envelope ack;
    ack.mutable_heartbeat_ack()->set_heartbeat_seq(env.heartbeat().seq());
    // Only events whose effects are stored: the agent then forgets them (node_registry.h).
    ack.mutable_heartbeat_ack()->set_acked_event_seq(node->stored_event_seq);
    exec_relay_->AddDelivered(node->info.name(), ack.mutable_heartbeat_ack());
    SendToRouterPeer(agents_, msg.routing_id, ack);
  } else {
    v1::Envelope ack;
    ack.mutable_register_ack()->set_accepted(false);
    ack.mutable_register_ack()->set_reason("unknown node: register again");
    SendToRouterPeer(agents_, msg.routing_id, ack);
  }
}

void Coordinator::OnNodeMessage(std::string name, v1::Envelope& env,
                                std::chrono::steady_clock::time_point now, int64_t now_ms) {
  switch (env.body_case()) {
    case v1::Envelope::kWorkerEvent:
      OnWorkerEvent(name, env.worker_event(), now_ms);
      break;
    case v1::Envelope::kFenceContribute:
      OnFenceContribute(name, env.fence_contribute(), now);
      break;
    case v1::Envelope::kRendezvousPublish:
      OnFenceContribute(name, env.rendezvous_publish(), now);
      break;
    case v1::Envelope::kLogChunk:
      operator_service_->OnLogChunk(env.log_chunk());
      break;
    case v1::Envelope::kPortsReserved:
      jobs_->OnPortsReserved(name, env.ports_reserved(), now_ms);
      break;
    case v1::Envelope::kProgressReport:
      ops_->OnProgressFolded(jobs_->OnProgressReport(name, env.progress_report(), now_ms));
      break;
    case v1::Envelope::kExecOutput:
    case v1::Envelope::kExecExited:
      exec_relay_->OnAgentMessage(name, env);
      break;
    default:
      drops_.Add(DropReason::kUnexpected);
      spdlog::warn("dropped unexpected {} from node {}", v1::MessageType_Name(env.type()), name);
  }
}

void Coordinator::OnWorkerEvent(const std::string& name, const v1::WorkerEvent& event,
                                int64_t now_ms) {
  // In order and once: a resend of an applied event, or one after a gap, is not applied.
  if (!registry_->AcceptEvent(name, event.seq())) return;
  // First, while the attempt is still live: a rank's exit fails the fence it missed. Not a
  // replicated job's worker's (an initializer, done before the training starts): it joins none.
  const v1::JobStatus* st = jobs_->Find(event.job());
  if (st == nullptr || !IsStepWorker(*st, event.attempt(), event.rank())) {
    DeliverFences(fences_->OnWorkerEvent(name, event));
  }
  jobs_->OnWorkerEvent(name, event, now_ms);
  ops_->AfterWorkerEvent(event, now_ms);
}

void Coordinator::OnFenceContribute(const std::string& name,
                                    const v1::FenceContribute& contribution,
                                    std::chrono::steady_clock::time_point now) {
  auto outcome = fences_->OnContribute(name, contribution, now);
  if (!outcome.rejected.ok()) {
    drops_.Add(DropReason::kUnauthorized);
    spdlog::warn("rendezvous: {}", outcome.rejected.message());
  }
  DeliverFences(std::move(outcome));
}

void Coordinator::OnFenceContribute(const std::string& name, const v1::RendezvousPublish& publish,
                                    std::chrono::steady_clock::time_point) {
  auto outcome = fences_->OnPublish(name, publish);
  if (!outcome.rejected.ok()) {
    drops_.Add(DropReason::kUnauthorized);
    spdlog::warn("rendezvous: {}", outcome.rejected.message());
  }
  DeliverFences(std::move(outcome));
}

void Coordinator::DeliverFences(FenceTable::Outcome outcome) {
  if (outcome.fence_time) ops_->OnFence(*outcome.fence_time);
  for (auto& send : outcome.sends) SendToNode(send.node, std::move(send.envelope));
}

void Coordinator::RefreshExecAllowlist() {
  if (jobs_->generation() == exec_allowlist_generation_) return;
  exec_allowlist_generation_ = jobs_->generation();
  zap_->SetAllowlist("exec", jobs_->exec().LauncherKeys());
}

void Coordinator::OnOperatorMessage(RouterMessage& msg) {
  if (msg.envelope.body_case() != v1::Envelope::kOperatorRequest) {
    drops_.Add(DropReason::kUnexpected);
    return;
  }
  // Answered here, before OperatorService: a follower has loaded nothing to answer from.
  if (!LeadingNow()) return RefuseOperatorAsFollower(msg);
  // The user is the allowlist's name for the connection's key (the key itself when unnamed).
  std::string user = msg.user_id;
  if (const Allowlist* keys = zap_->KeysOf("operator")) {
    if (auto it = keys->find(msg.user_id); it != keys->end() && !it->second.empty()) {
      user = it->second;
    }
  }
  operator_service_->Handle(msg.routing_id, msg.envelope.operator_request(), env_.MonotonicNow(),
                            env_.WallUnixMs(), user);
}

int64_t Coordinator::HoldAfterSilence(int64_t last_heard_ms) const {
  return RestartHoldMs(last_heard_ms, config_.partition_grace,
                       static_cast<uint32_t>(config_.stop_grace.count()));
}

std::optional<TimePoint> Coordinator::Tick(TimePoint now) {
  if (!started_) started_ = now;
  const int64_t now_ms = env_.WallUnixMs();
  ops_->Tick(now);  // READY=1 once, then STATUS=
  // store: etcd: a follower does nothing more than look at the election again soon.
  if (campaign_ != nullptr && !FollowElection(now)) return now + std::chrono::milliseconds(100);
  // Beats that queued while the loop was busy are read before liveness is judged: a slow
  // iteration is the coordinator's delay, not the nodes' silence (issue 19, defect 1). The
  // batches are bounded, so a flood of messages cannot hold the tick either.
  for (int batch = 0; batch < 16 && (agents_.get(zmq::sockopt::events) & ZMQ_POLLIN); ++batch) {
    ReadAgentMessages();
  }
  for (const auto& lost : registry_->Tick(env_.MonotonicNow())) {
    const NodeEntry* e = registry_->Find(lost);
    jobs_->OnNodeLost(lost, now_ms, HoldAfterSilence(e->last_beat_unix_ms));
  }
  if (!checked_unregistered_ && now - *started_ > config_.lost_timeout) {
    // After a restart, a node that held ranks and has not come back within the lost timeout is
    // as good as Lost: its ranks' attempts fail, as if it had stopped heartbeating.
    checked_unregistered_ = true;
    for (const auto& node : jobs_->Usage().placed) {
      if (registry_->Find(node) == nullptr) {
        spdlog::warn("node {} held ranks before the restart and has not registered", node);
        jobs_->OnNodeLost(node, now_ms, HoldAfterSilence(now_ms));
      }
    }
  }
  const auto pass_start = std::chrono::steady_clock::now();
  jobs_->Schedule(now_ms);
  ops_->OnSchedulePass(std::chrono::steady_clock::now() - pass_start);
  ops_->OnAdmissions(jobs_->TakeAdmissionStats());
  if (Status s = jobs_->Flush(); !s.ok()) {
    spdlog::error("store: {}", s.message());
  } else {
    registry_->EventsStored();
  }
  operator_service_->Tick(now);
  exec_relay_->Tick(now);
  RefreshExecAllowlist();
  if (jobs_->generation() != fence_generation_) {  // an attempt may have ended
    fence_generation_ = jobs_->generation();
    DeliverFences(fences_->Sweep());
  }

  auto wake = std::min({registry_->NextDeadline(now), operator_service_->NextDeadline(now),
                        exec_relay_->NextDeadline(now)});
  const int64_t job_wake = jobs_->NextWakeMs();
  if (job_wake != INT64_MAX) {
    wake = std::min(wake, now + std::chrono::milliseconds(std::max<int64_t>(0, job_wake - now_ms)));
  }
  return std::max(wake, now + std::chrono::milliseconds(1));  // the poll waits at least 1 ms
}

void Coordinator::OnSignals() {
  bool stop = false;
  for (const int sig : signals_->Take()) stop = stop || sig == SIGTERM || sig == SIGINT;
  if (stop) loop_.Stop();  // before the sockets: requests still queued are not read
}

Status Coordinator::Run() {
  TRAINLET_RETURN_IF_ERROR(loop_.Run());
  if (!stepped_down_.ok()) return stepped_down_;  // nothing to flush: the fence refuses it
  ops_->OnStopping();                             // STOPPING=1
  spdlog::info("coordinator stopping");
  const Status flushed = leading_ ? jobs_->Flush() : Status::Ok();
  if (campaign_ != nullptr) {
    // After the flush: a successor leads at once, and reads everything this one wrote.
    if (Status s = campaign_->Resign(); !s.ok()) spdlog::warn("resigning: {}", s.message());
  }
  return flushed;
}

}  // namespace trainlet::coordinator
