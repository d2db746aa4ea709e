// The node agent: registers this node with the coordinator, heartbeats, starts and supervises the
// node's workers, reports their events and serves their logs.
//
// Threading: one platform::EventLoop (Run) calls everything: a tick for the timers, and one
// callback per registered source (the coordinator link, coordinator_link.h; signals; the
// supervisor's wake-ups; the ranks' rendezvous socket; metrics). Nothing else runs on its own
// thread, so no member needs a lock. The caller must have prepared SIGCHLD, SIGTERM, SIGINT,
// SIGHUP and SIGUSR2 before creating any thread (PrepareLoopSignals does it).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <zmq.hpp>

#include "agent/agent_ops.h"
#include "agent/coordinator_link.h"
#include "agent/cpu_allotment.h"
#include "agent/exec_sessions.h"
#include "agent/health_checker.h"
#include "agent/job_data_purge.h"
#include "agent/leftover_sweeps.h"
#include "agent/node_attempt.h"
#include "agent/poll_item_source.h"
#include "agent/port_reservations.h"
#include "agent/process_spawner.h"
#include "agent/progress_endpoint.h"
#include "agent/progress_live_attempts.h"
#include "agent/rank_binding.h"
#include "agent/rank_reports.h"
#include "agent/rendezvous_server.h"
#include "agent/worker_supervisor.h"
#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/platform/env.h"
#include "common/platform/event_loop.h"
#include "common/platform/signal_watch.h"
#include "common/status.h"
#include "trainlet/accelerator_plugin.h"

namespace trainlet::agent {

struct AgentConfig {
  std::string name;                  // node name, unique in the cluster
  std::string address;               // address other nodes' ranks reach this node at
  std::string coordinator;           // coordinator's agent endpoint, tcp://host:port
  std::string coordinator_key_file;  // the coordinator's public key (.pub file)
  std::string key_file;              // this agent's key pair
  std::string state_dir;             // logs and worker dirs live here
  std::string topology_xml;          // "" discovers this machine; else impersonates that XML
  std::string apple_fixture;         // testing aid: "" or a Mac capture prefix (apple_fixture.h)
  uint32_t slots = 0;                // ranks accepted at once; 0 means one per PU
  std::map<std::string, std::string> labels;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds register_retry{2000};
  std::string metrics_address = "127.0.0.1:9464";  // /metrics, /healthz, /readyz; "" for none
  bool metrics_best_effort = false;                // a busy port only warns (the default address)
  std::string taints;                        // "key=value:Effect,...", sent in NodeInfo.taints
  HealthCheckConfig health;                  // program, interval, timeout, disk threshold
  std::string worker_ports = "20000-29999";  // LOW-HIGH: ports reserved for ranks (ReservePorts)
  int32_t progress_port = 0;  // HTTPS progress endpoint on `address`; 0: any (kept), -1: off
  // The progress thread's rest between wake-ups while ranks post in a stream (0: none); key
  // progress_gather_ms (agent/http_server_thread.h).
  std::chrono::milliseconds progress_gather = HttpServerThread::kDefaultGather;
  // A directory on storage every node mounts at this same path (NFS, Lustre, ...); jobs annotated
  // trainlet.io/working-dir: shared run in <shared_dir>/<job>. "": none (working_dirs.h).
  std::string shared_dir;
  // Each rank's log is cut past this many bytes, its earlier output kept in <log>.1 (issue 19,
  // defect 9; agent/step/log_rotation.h). 0: never. Config key rank_log_max_mb.
  uint64_t rank_log_max_bytes = uint64_t{100} << 20;
  // The initializers' cache (<state dir>/cache) is cut to this many bytes, least recently used
  // entries first, never one in use (python/initializer). 0: no cap. Key initializer_cache_max_gb.
  uint64_t initializer_cache_max_bytes = uint64_t{100} << 30;
  // Who ranks run as (agent/step/rank_identity.h): "user[:group]" or "uid[:gid]"; "": the agent's
  // own user.
  std::string run_as;
  // Keep one trainlet-step started ahead of the next launch, in its ranks' cgroup already
  // (agent/standby_step.h). Config key step_standby, "on" by default in trainlet-agent; off here
  // so that an Agent made in a test spawns only what the test asks for.
  bool step_standby = false;
};

// Prepares the signals the loop reads through its SignalWatch (blocks them on Linux, installs the
// self-pipe handlers on macOS) and ignores SIGPIPE. Call first thing in main().
void PrepareLoopSignals();

// About 32 methods, over the usual 25: the start-up steps and one handler per coordinator message.
// The per-attempt handlers (plans, stops, ports) are the ones to move out next.
class Agent {
 public:
  // Loads keys and discovers the topology. Errors name the flag or file at fault. The agent
  // reaches the OS through `env` (clocks, hostname, environment, its lock, process spawning),
  // which must outlive it; the first overload uses the real one.
  static Result<std::unique_ptr<Agent>> Create(AgentConfig config);
  static Result<std::unique_ptr<Agent>> Create(AgentConfig config, platform::Env& env);
  ~Agent();

  // Runs until SIGTERM, SIGINT or SIGUSR2. On SIGTERM and SIGINT (a restart) the ranks and exec
  // sessions run on under their step processes, for the next agent on this state dir to adopt.
  // On SIGUSR2 every worker is stopped first (`trainletctl local down`).
  Status Run();
  // For tests: one iteration of Run's loop, waiting at most `max_wait` (real time); the first
  // call sends the first registration as Run does. Returns Run's errors; after a stop signal
  // it returns OK and does nothing more (no shutdown: the test ends the agent by destroying it).
  Status RunOnce(std::chrono::milliseconds max_wait);

 private:
  Agent(AgentConfig config, platform::Env& env);
  // Start-up, in order (Init): each step either completes or returns the error Create returns.
  Status Init();
  Status ConnectToCoordinator(CurveKeyPair keys, std::string coordinator_public);
  void StartSupervisor();  // takes back the steps (and ranks) a previous agent left
  void StartHealthChecks();
  Status StartExecAndRendezvous();
  // The progress endpoint (agent_progress.cpp). Start after the supervisor: it asks which
  // attempts run.
  Status StartProgressEndpoint();
  // Sends the progress posted since the last report, once per kProgressReportInterval.
  void ReportProgress(std::chrono::steady_clock::time_point now);
  // Tells the endpoint's thread which attempts may post now (each tick: the loop's last turn).
  void PublishLiveAttempts();
  // (job, attempt) ended here: it may post no more, and its pending post and token go.
  void ForgetProgress(const std::string& job, uint32_t attempt);
  void RegisterLoopSources();
  // The loop's tick: timers of the link, partition, port holds, supervisor, health, rendezvous.
  // Returns when the loop must wake next.
  std::chrono::steady_clock::time_point OnTick(std::chrono::steady_clock::time_point now);
  Status Shutdown();  // after the loop: what SIGTERM or SIGUSR2 asked for
  // What the coordinator link sends for this node (CoordinatorLink::Hooks).
  v1::Envelope Registration();
  v1::Heartbeat Heartbeat();
  void Send(v1::Envelope env);       // queued and retried while the coordinator is unreachable
  void SendEvent(v1::Envelope env);  // a worker event: kept until the coordinator acks it
  void CheckPartition(std::chrono::steady_clock::time_point now);
  // How long a step keeps its ranks once no agent runs (WorkerSupervisor::Options::orphan_grace).
  std::chrono::milliseconds OrphanGrace() const;
  // Stamps agent.lock (FileLock::Touch) once a heartbeat interval: steps take a stamp that
  // stands still for their orphan grace for a stopped or hung agent and stop their ranks
  // (StepLaunch::agent_stamps), as the coordinator, hearing no heartbeat, restarts them elsewhere.
  void StampLock(std::chrono::steady_clock::time_point now);
  void OnMessage(const v1::Envelope& env);
  void OnLaunchPlan(const v1::LaunchPlan& plan);
  void OnStopWorkers(const v1::StopWorkers& stop);
  void OnReservePorts(const v1::ReservePorts& request);
  void OnLogRead(const v1::LogRead& read);
  void OnExecStart(const v1::ExecStart& start);
  // The env every process of `job` gets from this node: TRAINLET_NODE, TRAINLET_WORK_DIR, ...
  std::map<std::string, std::string> NodeEnv(const std::string& job) const;
  std::string WorkDir(const std::string& job) const;
  // Makes or checks the launches' working directories (working_dirs.h); an error fails them all.
  Status PrepareCwds(const std::string& job, const std::vector<WorkerLaunch>& launches);
  // The directory `rank` of `plan` runs in, for its Started event.
  std::string WorkerCwd(const v1::LaunchPlan& plan, uint32_t rank) const;
  void OnChildExits();
  std::string LogPath(const std::string& job, uint32_t attempt, uint32_t rank) const;
  // <state_dir>/cluster-id: the cluster this agent first registered with (issue 19, defect 3).
  std::string ClusterIdPath() const;
  bool OnSignals();  // false when asked to stop

  // Constant after construction.
  platform::Env& env_;
  AgentConfig config_;
  // Owned by the loop.
  zmq::context_t ctx_;  // first: destroyed last, after every socket on it
  platform::EventLoop loop_;
  bool started_ = false;                   // the first registration went (Run, RunOnce)
  std::unique_ptr<CoordinatorLink> link_;  // socket, outbox, register, heartbeat, partition
  std::unique_ptr<platform::SignalWatch> signals_;
  std::unique_ptr<platform::FileLock> lock_;  // <state_dir>/agent.lock, held for the agent's life
  std::chrono::steady_clock::time_point next_stamp_{};  // when StampLock next stamps it
  bool stamp_failed_ = false;
  std::string lock_path_;
  v1::NodeInfo info_;
  ProcessSpawner* spawner_ = nullptr;  // the Env's
  std::unique_ptr<WorkerSupervisor> supervisor_;
  std::unique_ptr<JobDataPurge> purge_;     // deleted jobs' logs and work dirs (PurgeJob)
  std::unique_ptr<LeftoverSweeps> sweeps_;  // ended attempts' strays (leftover_sweeps.h)
  std::unique_ptr<ExecSessions> exec_sessions_;
  std::unique_ptr<HealthChecker> health_;         // reported in every heartbeat
  std::unique_ptr<PortReservations> ports_;       // held for attempts until their ranks start
  std::unique_ptr<RendezvousServer> rendezvous_;  // the ranks' local rendezvous endpoint
  std::vector<std::unique_ptr<AcceleratorPlugin>> accelerator_plugins_;  // table order
  std::string exec_binary_;  // trainlet-exec beside this agent
  std::string bin_dir_;      // where this agent's binary lies: trainlet-step, trainlet-exec
  DropCounters drops_;
  std::unique_ptr<AgentOps> ops_;               // metrics and sd_notify (agent_ops.h)
  std::unique_ptr<ProgressEndpoint> progress_;  // null when progress_port is -1
  // What progress_'s thread reads for every post; shared with it (Options::live_ranks).
  std::shared_ptr<ProgressLiveAttempts> live_attempts_;
  std::chrono::steady_clock::time_point next_progress_report_{};
  NodeAttempts attempts_;  // every (job, attempt) on this node: ports, rendezvous, step, grace
  CpuAllotment cpus_;      // each attempt's CPUs on this node (cpu_allotment.h)
  std::unique_ptr<RankReports> reports_;  // the ranks' Started/Exited events (rank_reports.h)
  bool stop_workers_on_exit_ = false;     // SIGUSR2: end the ranks too, not only the agent
  // Last: removed from loop_ before anything they poll goes.
  std::unique_ptr<PollItemSource> exec_output_source_;  // exec sessions' output wake-ups
  std::unique_ptr<PollItemSource> health_source_;       // the health program's output pipe
};

}  // namespace trainlet::agent
