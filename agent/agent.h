// The node agent: registers this node with the coordinator, heartbeats, starts and supervises the
// node's workers, reports their events and serves their logs.
//
// Threading: one event loop (Run) polls the coordinator socket and a SignalWatch; nothing else
// runs on its own thread, so no member needs a lock. The caller must have prepared SIGCHLD,
// SIGTERM, SIGINT, SIGHUP and SIGUSR2 before creating any thread (PrepareLoopSignals does it).
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "agent/event_outbox.h"
#include "agent/exec_sessions.h"
#include "agent/health_checker.h"
#include "agent/node_attempt.h"
#include "agent/port_reservations.h"
#include "agent/agent_ops.h"
#include "agent/process_spawner.h"
#include "agent/rank_binding.h"
#include "agent/rendezvous_server.h"
#include "agent/worker_supervisor.h"
#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/handshake_monitor.h"
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
  bool metrics_best_effort = false;  // a busy port only warns (the default address)
  std::string taints;                // "key=value:Effect,...", sent in NodeInfo.taints
  HealthCheckConfig health;          // program, interval, timeout, disk threshold
  std::string worker_ports = "20000-29999";  // LOW-HIGH: ports reserved for ranks (ReservePorts)
};

// Prepares the signals the loop reads through its SignalWatch (blocks them on Linux, installs the
// self-pipe handlers on macOS) and ignores SIGPIPE. Call first thing in main().
void PrepareLoopSignals();

class Agent {
 public:
  // Loads keys and discovers the topology. Errors name the flag or file at fault.
  static Result<std::unique_ptr<Agent>> Create(AgentConfig config);
  ~Agent();

  // Runs until SIGTERM, SIGINT or SIGUSR2. On SIGTERM and SIGINT (a restart) the ranks and exec
  // sessions run on under their step processes, for the next agent on this state dir to adopt.
  // On SIGUSR2 every worker is stopped first (`trainletctl local down`).
  Status Run();

 private:
  explicit Agent(AgentConfig config);
  Status Init();
  void SendRegister();
  void SendHeartbeat();
  void Send(v1::Envelope env);  // queued and retried while the coordinator is unreachable
  void SendEvent(v1::Envelope env);  // a worker event: kept until the coordinator acks it
  void FlushEvents(bool everything);
  void CheckPartition(std::chrono::steady_clock::time_point now);
  // How long a step keeps its ranks once no agent runs (WorkerSupervisor::Options::orphan_grace).
  std::chrono::milliseconds OrphanGrace() const;
  void FlushOutbox();
  void OnMessage(const v1::Envelope& env);
  void OnLaunchPlan(const v1::LaunchPlan& plan);
  // A Started or StartFailed event for `rank` of the plan, with its binding when it has one.
  void ReportStart(const v1::LaunchPlan& plan, uint32_t rank,
                   const std::optional<RankBinding>& binding, const Result<pid_t>& pid);
  void OnStopWorkers(const v1::StopWorkers& stop);
  void OnReservePorts(const v1::ReservePorts& request);
  void OnLogRead(const v1::LogRead& read);
  void OnExecStart(const v1::ExecStart& start);
  // The env every process of `job` gets from this node: TRAINLET_NODE, TRAINLET_WORK_DIR, ...
  std::map<std::string, std::string> NodeEnv(const std::string& job) const;
  std::string WorkDir(const std::string& job) const;
  void OnChildExits();
  std::string LogPath(const std::string& job, uint32_t attempt, uint32_t rank) const;
  bool OnSignals();  // false when asked to stop
  void OnHandshakeEvents();
  void ReadCoordinator(int at_most);  // handles up to `at_most` waiting messages, without blocking

  // Constant after construction.
  AgentConfig config_;
  // Owned by the loop.
  zmq::context_t ctx_;
  zmq::socket_t socket_;
  HandshakeMonitor handshakes_;  // registers the moment the CURVE handshake completes
  std::unique_ptr<platform::SignalWatch> signals_;
  int lock_fd_ = -1;       // flock'd <state_dir>/agent.lock, held for the process's life
  std::string lock_path_;
  CurveKeyPair keys_;
  std::string coordinator_public_;
  v1::NodeInfo info_;
  std::unique_ptr<ProcessSpawner> spawner_;
  std::unique_ptr<WorkerSupervisor> supervisor_;
  std::unique_ptr<ExecSessions> exec_sessions_;
  std::unique_ptr<HealthChecker> health_;  // reported in every heartbeat
  std::unique_ptr<PortReservations> ports_;  // held for attempts until their ranks start
  std::unique_ptr<RendezvousServer> rendezvous_;  // the ranks' local rendezvous endpoint
  std::vector<std::unique_ptr<AcceleratorPlugin>> accelerator_plugins_;  // table order
  std::string exec_binary_;  // trainlet-exec beside this agent
  DropCounters drops_;
  std::unique_ptr<AgentOps> ops_;  // metrics and sd_notify (agent_ops.h)
  std::deque<v1::Envelope> outbox_;
  EventOutbox events_;
  std::chrono::steady_clock::time_point last_heard_{};  // last message from the coordinator
  std::chrono::milliseconds partition_grace_{10000};     // set by the coordinator at registration
  bool partition_stopped_ = false;  // workers were stopped because the coordinator was silent
  NodeAttempts attempts_;  // every (job, attempt) on this node: ports, rendezvous, step, grace
  bool registered_ = false;
  bool stop_workers_on_exit_ = false;  // SIGUSR2: end the ranks too, not only the agent
  uint64_t heartbeat_seq_ = 0;
  std::chrono::steady_clock::time_point next_heartbeat_{};
  std::chrono::steady_clock::time_point next_register_{};
};

}  // namespace trainlet::agent
