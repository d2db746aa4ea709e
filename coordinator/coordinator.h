// Coordinator: the event loop that ties the agent endpoint, the operator endpoint and the ZAP
// handler to the NodeRegistry, JobController and OperatorService.
//
// Threading: one platform::EventLoop runs everything; its sources are the ZAP handler, the
// operations endpoint (metrics, watchdog), a SignalWatch and the agent, operator and exec
// sockets, registered in that order, which is the order their callbacks run when several are
// ready (so a SIGTERM is seen before more requests are read), then the ApplyParser's notices.
// The tick reads the queued agent messages before it judges liveness. Applied files are parsed
// on the ApplyParser's thread (the one thread besides the loop's) and stored on the loop. Every
// other member is owned by the thread that calls Run (or RunOnce). The caller prepares
// SIGTERM/SIGINT/SIGHUP first (PrepareCoordinatorSignals).
//
// High availability (`store: etcd`): the coordinator binds its endpoints and campaigns for
// leadership (EtcdLeaderCampaign, on the campaign's own thread) at start. Until it leads it is a
// follower: it loads nothing, schedules and writes nothing, answers every operator request with
// error code NotLeader and the leader's operator endpoint, and refuses agents' registrations
// with the leader's agent endpoint. When it wins, it sets the store's write fence (the campaign
// key's create revision: every store write is a txn that compares it) and loads the store, as a
// restarted coordinator does; agents then re-register and are reconciled. A leader that loses its
// lease (etcd unreachable, a pause past the TTL) or sees a write refused by the fence steps down
// by ending Run with an error: the process exits (status 1) and its supervisor (systemd, k8s)
// starts it again as a follower. The loop never waits for the election: it reads the campaign's
// latest view, aged by the monotonic clock.
//
// OS access goes through the platform::Env given to Create: the clocks (liveness and deadlines
// use the monotonic clock only; the wall clock stamps records), the host name, the pid and the
// endpoints file. Tests give a fake one (tests/coordinator/coordinator_test.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/envelope.h"
#include "common/log_rate_limit.h"
#include "common/platform/env.h"
#include "common/platform/event_loop.h"
#include "common/platform/signal_watch.h"
#include "common/zap_authenticator.h"
#include "common/zmq_sockets.h"
#include "coordinator/apply_parser.h"
#include "coordinator/coordinator_ops.h"
#include "coordinator/etcd_job_store.h"
#include "coordinator/etcd_leader_campaign.h"
#include "coordinator/exec_relay.h"
#include "coordinator/fence_table.h"
#include "coordinator/job_controller.h"
#include "coordinator/job_store.h"
#include "coordinator/job_store_config.h"
#include "coordinator/node_registry.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {

struct CoordinatorConfig {
  std::string state_dir;  // SQLite store lives here
  JobStoreConfig store;   // store: sqlite (the default, under state_dir) or etcd
  // Initialise a store that holds nothing (a new cluster id) instead of refusing it
  // (cluster_identity.h). trainlet-coordinator's --init-store does it and exits; tests set it.
  bool init_store = false;
  std::string agent_listen = "tcp://0.0.0.0:7070";
  std::string operator_listen = "tcp://127.0.0.1:7071";
  std::string exec_listen = "tcp://0.0.0.0:7072";  // trainlet-exec (MPI launchers) connect here
  std::string exec_advertise;                      // exec endpoint as nodes reach it; "" derives it
  // The other coordinators' exec endpoints (an HA set), comma-separated: a launcher gets them
  // after this one's, and its trainlet-exec moves to the new leader after a failover.
  std::string exec_peers;
  // store: etcd: the agent and operator endpoints as others reach them, published to the other
  // coordinators in the campaign key so followers can name the leader; "" derives them as exec.
  std::string agent_advertise;
  std::string operator_advertise;
  // store: etcd: the leader's lease TTL. A leader cut off from etcd steps down within it, and a
  // follower takes over within about it after the leader dies.
  std::chrono::seconds lease_ttl{3};
  std::string key_file;            // the coordinator's CURVE key pair
  std::string agent_allowlist;     // public keys allowed to act as agents
  std::string operator_allowlist;  // public keys allowed to act as operators
  std::string runtimes_dir;        // shipped ClusterTrainingRuntimes; "" for none
  std::string endpoints_file;      // when set, the bound endpoints are written here (JSON)
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds lost_timeout{3000};
  // How long an agent that cannot hear the coordinator keeps its ranks; no restart of their job
  // is placed before it has passed since the node was last heard.
  std::chrono::milliseconds partition_grace{10000};
  // SIGTERM to SIGKILL for ranks that are stopped (delete, suspend, a failed gang, a partition).
  // A job is not restarted before a silent node's partition grace and this have both passed.
  std::chrono::milliseconds stop_grace{kDefaultStopGraceMs};
  // Warning signal to SIGTERM of a preemption or drain --force (JobControllerOptions).
  std::chrono::milliseconds preemption_grace{kDefaultPreemptionGraceSeconds * 1000};
  // Whether a job with an activeDeadlineSeconds is warned its grace before it, unless its
  // trainlet.io/deadline-warning annotation says (JobControllerOptions).
  bool deadline_warning = true;
  // A Starting attempt with ranks not yet started this long after placement fails (StartTimeout).
  std::chrono::milliseconds start_timeout{60000};
  // The first restart of a failed attempt waits restart_backoff; each further one twice as long,
  // up to max_restart_backoff.
  std::chrono::milliseconds restart_backoff{250};
  std::chrono::milliseconds max_restart_backoff{60000};
  // How long a finished job is kept when its runtime sets no ttlSecondsAfterFinished; nullopt:
  // until an operator deletes it (JobControllerOptions::finished_job_ttl).
  std::optional<std::chrono::seconds> finished_job_ttl;
  // Where TrainJobs without a kueue.x-k8s.io/queue-name label wait once queue objects exist
  // (a LocalQueue name in the job's namespace); "" admits them at once, without quota.
  std::string default_queue;
  std::string metrics_address = "127.0.0.1:9465";  // /metrics, /healthz, /readyz; "" for none
  bool metrics_best_effort = false;                // a busy port only warns (the default address)
};

// Prepares the signals the loop reads (platform::PrepareSignals) and ignores SIGPIPE. Call first
// thing in main(), before any thread exists.
void PrepareCoordinatorSignals();

// About 36 methods, over the usual 25: the public ones are the daemon's whole surface; most
// private ones are one handler per socket and message kind, which is what a loop is; the eight
// of high availability (StartCampaign to RefuseAgentAsFollower) are kept in
// coordinator_election.cpp. They read and gate the same sockets and members as the rest, so a
// class of their own would take most of Coordinator's members by reference.
class Coordinator : public NodeSink {
 public:
  // Binds the endpoints, loads the store and writes the endpoints file. Errors name the flag or
  // file at fault. The first form uses the real OS (platform::RealEnv()); `env` must outlive the
  // coordinator.
  static Result<std::unique_ptr<Coordinator>> Create(CoordinatorConfig config);
  static Result<std::unique_ptr<Coordinator>> Create(CoordinatorConfig config, platform::Env& env);
  ~Coordinator() override;

  // Serves until SIGTERM or SIGINT, then says it is stopping (sd_notify), flushes the store and
  // (store: etcd) resigns, so a successor leads at once. An error when the loop itself fails
  // (zmq_poll), and kUnavailable when this coordinator stepped down as leader (see above).
  Status Run();
  // One iteration of Run's loop, waiting at most `max_wait`: for a test that drives the
  // coordinator on its own thread with a fake clock. A SIGTERM seen here only stops the loop.
  Status RunOnce(std::chrono::milliseconds max_wait) { return loop_.RunOnce(max_wait); }

  // The bound endpoints (a port 0 in the configuration is resolved here).
  const std::string& agent_endpoint() const { return agent_endpoint_; }
  const std::string& operator_endpoint() const { return operator_endpoint_; }
  // Whether this coordinator leads (always, with store: sqlite); the loop's thread only.
  bool leading() const { return leading_; }
  // The nodes as the loop sees them; for tests and the loop's thread only.
  const NodeRegistry& registry() const { return *registry_; }
  // Metrics and sd_notify; for tests and the loop's thread only.
  CoordinatorOps& ops() { return *ops_; }

  void SendToNode(const std::string& node, v1::Envelope env) override;

 private:
  Coordinator(CoordinatorConfig config, platform::Env& env);
  Status Init();
  // The endpoint `bound` as others reach it: `advertise` when set, else `bound` with this host's
  // name in place of a wildcard address.
  std::string Advertised(const std::string& bound, const std::string& advertise) const;
  // Starts the campaign (store: etcd).
  Status StartCampaign();
  // Takes the lead: the fence, then the store's cordons, runtimes and jobs.
  Status Lead();
  // store: etcd, each tick: takes the lead once won, steps down once lost. False while this
  // coordinator does not lead (the tick then does nothing else).
  bool FollowElection(platform::EventLoop::TimePoint now);
  // Whether this coordinator may act as leader now: checked again at each request, because a
  // process resumed after a pause reads its sockets before its next tick.
  bool LeadingNow();
  void StepDown(const std::string& why);
  // A follower's answers: NotLeader with the leader's endpoint.
  void RefuseOperatorAsFollower(const RouterMessage& msg);
  void RefuseAgentAsFollower(const RouterMessage& msg);
  // Registers the sockets and descriptors with loop_, in the order the header comment gives.
  void AddLoopSources();
  // The loop's work each iteration (liveness, scheduling, flushing the store, deadlines);
  // returns when the loop must wake next.
  std::optional<platform::EventLoop::TimePoint> Tick(platform::EventLoop::TimePoint now);
  // When the job of a node last heard at `last_heard_ms` may restart (RestartHoldMs).
  int64_t HoldAfterSilence(int64_t last_heard_ms) const;
  void OnSignals();
  Status WriteEndpoints() const;
  // Reads up to one batch of agent messages (bounded, so one busy endpoint cannot starve the
  // others); Tick also calls it before judging liveness.
  void ReadAgentMessages();
  void OnAgentMessage(RouterMessage& msg);
  void OnOperatorMessage(RouterMessage& msg);
  void RefreshExecAllowlist();
  void OnRegister(const RouterMessage& msg, std::chrono::steady_clock::time_point now,
                  int64_t now_ms);
  void OnHeartbeat(const RouterMessage& msg, std::chrono::steady_clock::time_point now,
                   int64_t now_ms);
  // `name` is a copy: the handlers may change the registry entry it came from.
  void OnNodeMessage(std::string name, v1::Envelope& env, std::chrono::steady_clock::time_point now,
                     int64_t now_ms);
  void OnWorkerEvent(const std::string& name, const v1::WorkerEvent& event, int64_t now_ms);
  void OnFenceContribute(const std::string& name, const v1::FenceContribute& contribution,
                         std::chrono::steady_clock::time_point now);
  // The same for pairs a rank published outside a fence (FenceTable::OnPublish).
  void OnFenceContribute(const std::string& name, const v1::RendezvousPublish& publish,
                         std::chrono::steady_clock::time_point now);
  // Sends what the fence table decided and records a completed fence's time.
  void DeliverFences(FenceTable::Outcome outcome);

  // Constant after construction.
  CoordinatorConfig config_;
  platform::Env& env_;
  // Owned by the loop.
  platform::EventLoop loop_;
  zmq::context_t ctx_;
  // Parses applied files on its own thread; destroyed before ctx_ and after operator_service_.
  std::unique_ptr<ApplyParser> apply_parser_;
  std::unique_ptr<ZapAuthenticator> zap_;
  zmq::socket_t agents_;
  zmq::socket_t operators_;
  zmq::socket_t execs_;
  std::string exec_endpoint_;  // advertised
  uint64_t exec_allowlist_generation_ = UINT64_MAX;
  // The first tick (or taking the lead): the lost timeout for nodes that never come back counts
  // from here. Unset before (a clock's zero is a time like any other, on a fake clock).
  std::optional<std::chrono::steady_clock::time_point> started_;
  bool checked_unregistered_ = false;  // placed nodes that never came back after a restart
  std::string agent_endpoint_;
  std::string operator_endpoint_;
  std::unique_ptr<platform::SignalWatch> signals_;
  DropCounters drops_;
  std::unique_ptr<JobStore> store_;
  std::string cluster_id_;  // the store's (cluster_identity.h), in every RegisterAck
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<JobController> jobs_;
  std::unique_ptr<OperatorService> operator_service_;
  std::unique_ptr<AccessPolicyFile> policy_;  // <operator allowlist dir>/policy.yaml
  std::unique_ptr<CoordinatorOps> ops_;       // metrics and sd_notify (coordinator_ops.h)
  std::unique_ptr<ExecRelay> exec_relay_;
  std::unique_ptr<FenceTable> fences_;  // rendezvous fences (fence_table.h)
  // A refused agent may retry often: one warning per node name and key per 10 s, with a count.
  LogRateLimiter refusal_log_{std::chrono::seconds(10)};
  uint64_t fence_generation_ = UINT64_MAX;  // jobs_->generation() at the last Sweep
  // High availability (store: etcd): the campaign, the store it fences, and whether this
  // coordinator leads. With store: sqlite there is no campaign and leading_ is true from Init.
  std::unique_ptr<EtcdLeaderCampaign> campaign_;
  EtcdJobStore* etcd_store_ = nullptr;  // store_, when it is etcd's
  bool leading_ = false;
  Status stepped_down_;  // why Run ends with an error; OK while leading or following
};

}  // namespace trainlet::coordinator
