// trainlet-coordinator: node registry, job store, planner and operator API. Reads its config
// (file, then flags) and runs the Coordinator's loop. Every key is documented in docs/config.md.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/daemon_config.h"
#include "common/daemon_main.h"
#include "coordinator/cluster_identity.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_store_config.h"
#include "coordinator/store_migration.h"

int main(int argc, char** argv) {
  using trainlet::DaemonConfig;
  trainlet::coordinator::PrepareCoordinatorSignals();  // before any thread exists
  trainlet::coordinator::CoordinatorConfig config;
  trainlet::CommonDaemonKeys common;
  common.metrics_address = config.metrics_address;

  CLI::App app{
      "trainlet-coordinator: turns Kubeflow Trainer v2 TrainJobs into per-node launch plans,\n"
      "places each job as a gang on the registered agents, and answers trainletctl.\n\n"
      "Example:\n"
      "  trainlet-coordinator --config /etc/trainlet/coordinator.yaml\n"
      "  trainlet-coordinator --state-dir /var/lib/trainlet \\\n"
      "    --key /etc/trainlet/keys/coordinator.key \\\n"
      "    --agent-allowlist /etc/trainlet/keys/agents.allow \\\n"
      "    --operator-allowlist /etc/trainlet/keys/operators.allow \\\n"
      "    --runtimes-dir /usr/share/trainlet/runtimes"};
  app.set_version_flag("--version", std::string("trainlet-coordinator ") + TRAINLET_VERSION);
  DaemonConfig c("trainlet-coordinator");
  c.Path("state_dir", &config.state_dir, DaemonConfig::PathKind::kAny,
         "Directory of the job store (SQLite)", true);
  c.Enum("store", &config.store.backend, {"sqlite", "etcd"},
         "Job store: sqlite (a database under state_dir) or etcd (etcd_endpoints)");
  c.String("etcd_endpoints", &config.store.etcd_endpoints,
           "etcd client URLs, comma-separated (http:// or https://), for store: etcd");
  c.String("etcd_prefix", &config.store.etcd.prefix,
           "Prefix of every key trainlet keeps in etcd (one per trainlet cluster)");
  c.Path("etcd_ca_file", &config.store.etcd.client.ca_file, DaemonConfig::PathKind::kFile,
         "CA certificate of the etcd members (https endpoints)");
  c.Path("etcd_cert_file", &config.store.etcd.client.cert_file, DaemonConfig::PathKind::kFile,
         "Client certificate for etcd (with etcd_key_file)");
  c.Path("etcd_key_file", &config.store.etcd.client.key_file, DaemonConfig::PathKind::kFile,
         "Client key for etcd (with etcd_cert_file)");
  c.Millis("etcd_request_timeout_ms", &config.store.etcd.client.request_timeout, 100, 600000,
           "How long one etcd request may take per endpoint before the next is tried, ms");
  c.Int(
      "etcd_max_txn_ops", 4, 1000000,
      [&](int64_t v) { config.store.etcd.max_txn_ops = static_cast<size_t>(v); },
      static_cast<int64_t>(config.store.etcd.max_txn_ops),
      "The etcd members' --max-txn-ops: larger transactions are refused whole");
  c.Int(
      "etcd_lease_ttl_s", 1, 600, [&](int64_t v) { config.lease_ttl = std::chrono::seconds(v); },
      config.lease_ttl.count(),
      "store: etcd: the leader's lease, s; a leader cut off from etcd steps down within it, and "
      "a standby takes over about this long after the leader dies");
  c.String("agent_listen", &config.agent_listen,
           "Endpoint agents connect to (port 0 picks a free one)");
  c.String("operator_listen", &config.operator_listen,
           "Endpoint trainletctl connects to (port 0 picks a free one)");
  c.String("exec_listen", &config.exec_listen,
           "Endpoint trainlet-exec (MPI launchers) connects to (port 0 picks a free one)");
  c.String("exec_advertise", &config.exec_advertise,
           "The exec endpoint as nodes reach it (default: the bound one, with this host's name "
           "for a wildcard address)");
  c.String("exec_peers", &config.exec_peers,
           "store: etcd: the exec endpoints of the other coordinators of this HA set, "
           "comma-separated, as nodes reach them; MPI launchers get them after this one's, so "
           "their trainlet-exec sessions carry on after a failover");
  c.String("agent_advertise", &config.agent_advertise,
           "store: etcd: the agent endpoint as agents reach it, named by followers (default: the "
           "bound one, with this host's name for a wildcard address)");
  c.String("operator_advertise", &config.operator_advertise,
           "store: etcd: the operator endpoint as trainletctl reaches it, named by followers "
           "(default: the bound one, with this host's name for a wildcard address)");
  c.Path("key", &config.key_file, DaemonConfig::PathKind::kFile,
         "The coordinator's CURVE key pair file", true);
  c.Path("agent_allowlist", &config.agent_allowlist, DaemonConfig::PathKind::kFile,
         "Public keys of the agents allowed to connect (one per line)", true);
  c.Path("operator_allowlist", &config.operator_allowlist, DaemonConfig::PathKind::kFile,
         "Public keys of the operators allowed to connect (one per line)", true);
  c.Path("runtimes_dir", &config.runtimes_dir, DaemonConfig::PathKind::kDirectory,
         "Directory of ClusterTrainingRuntime YAML files loaded at start");
  c.Path("endpoints_file", &config.endpoints_file, DaemonConfig::PathKind::kAny,
         "Write the bound endpoints here as JSON once serving");
  c.Millis("heartbeat_ms", &config.heartbeat_interval, 50, 60000, "Agent heartbeat interval, ms");
  c.Millis("lost_timeout_ms", &config.lost_timeout, 100, 3600000,
           "Silence after which a node is Lost, ms");
  c.Millis("partition_grace_ms", &config.partition_grace, 100, 3600000,
           "How long an agent cut off from the coordinator keeps its ranks running, ms");
  c.Millis("stop_grace_ms", &config.stop_grace, 0, 3600000,
           "SIGTERM to SIGKILL for ranks that are stopped; a silent node's job is restarted only "
           "after its partition grace and this, ms");
  c.Int(
      "preemption_grace_seconds", 0, 86400,
      [&](int64_t v) { config.preemption_grace = std::chrono::seconds(v); },
      config.preemption_grace.count() / 1000,
      "A preempted (or drained --force) job's ranks get their warning signal (SIGUSR1 unless "
      "trainlet.io/preemption-signal) this long before SIGTERM, unless "
      "trainlet.io/preemption-grace-seconds says, s");
  std::string deadline_warning = "on";
  c.Enum(
      "deadline_warning", &deadline_warning, {"on", "off"},
      "on: a job with an activeDeadlineSeconds gets its warning signal its grace (at most half "
      "the deadline) before it; off: only jobs that ask for it with trainlet.io/deadline-warning "
      "or a trainlet.io/preemption-* annotation");
  c.Millis("start_timeout_ms", &config.start_timeout, 100, 86400000,
           "A starting attempt whose ranks have not all started this long after placement "
           "fails (StartTimeout) and is restarted, ms");
  c.Millis("restart_backoff_ms", &config.restart_backoff, 0, 3600000,
           "Delay before the first restart of a failed attempt; doubles with each restart, ms");
  c.Millis("max_restart_backoff_ms", &config.max_restart_backoff, 0, 86400000,
           "The longest delay between restarts of a job, ms");
  c.Int(
      "finished_job_ttl_seconds", -1, 31536000,
      [&](int64_t v) {
        if (v >= 0) config.finished_job_ttl = std::chrono::seconds(v);
      },
      -1,
      "A finished (Succeeded or Failed) job is deleted, with its logs and work dirs on its "
      "nodes, this long after it finished, unless its runtime sets ttlSecondsAfterFinished; "
      "-1 keeps it until it is deleted, s");
  std::string empty_store = "refuse";
  c.Enum("empty_store", &empty_store, {"refuse", "init"},
         "A store that holds nothing (no cluster id, job or runtime: new, or lost) at start: "
         "refuse it (run --init-store once for a new cluster), or initialise it with a new "
         "cluster id, which agents of an old cluster refuse");
  c.String("default_queue", &config.default_queue,
           "LocalQueue (in the job's namespace) where TrainJobs without a "
           "kueue.x-k8s.io/queue-name label wait once queues exist; empty admits them at once, "
           "without quota");
  trainlet::AddCommonDaemonKeys(c, &common);
  c.AddFlags(app);
  // A one-shot command instead of the daemon (docs/operations.md, "Migrating to etcd").
  bool migrate = false;
  bool force = false;
  std::string migrate_from;
  std::string migrate_to;
  app.add_flag("--migrate-store", migrate,
               "Copy the SQLite store in --from into the etcd store --to names, verify, exit");
  app.add_option("--from", migrate_from, "--migrate-store: the SQLite state dir to copy");
  app.add_option("--to", migrate_to,
                 "--migrate-store: a config file with store: etcd and its etcd_* keys");
  app.add_flag("--force", force, "--migrate-store: replace what the etcd prefix already holds");
  // The explicit init of a new cluster's store (issue 19, defect 3; docs/operations.md, "Cluster
  // identity"): a store that holds nothing is refused without it.
  bool init_store = false;
  app.add_flag("--init-store", init_store,
               "Initialise the store (a new cluster id) if it holds nothing, print the cluster id "
               "and exit; a store already initialised keeps its id");
  CLI11_PARSE(app, argc, argv);
  if (migrate) {
    auto done = trainlet::coordinator::RunStoreMigration(migrate_from, migrate_to, force);
    if (!done.ok()) {
      std::fprintf(stderr, "trainlet-coordinator --migrate-store: %s\n",
                   done.status().message().c_str());
      return 1;
    }
    std::printf("%s\n", done->c_str());
    return 0;
  }
  if (auto exit_code = trainlet::FinishDaemonConfig(c, &common, "coordinator")) return *exit_code;
  if (init_store) {
    trainlet::coordinator::JobStoreConfig store_config = config.store;
    store_config.state_dir = config.state_dir;
    auto store = trainlet::coordinator::OpenJobStore(store_config);
    auto id = store.ok() ? trainlet::coordinator::EstablishClusterId(**store, true)
                         : trainlet::Result<std::string>(store.status());
    if (!id.ok()) {
      std::fprintf(stderr, "trainlet-coordinator --init-store: %s\n",
                   id.status().message().c_str());
      return 1;
    }
    std::printf("cluster id %s\n", id->c_str());
    return 0;
  }
  config.init_store = empty_store == "init";
  config.deadline_warning = deadline_warning == "on";
  config.metrics_address = common.metrics_address;
  config.metrics_best_effort = common.metrics_best_effort;
  return trainlet::RunDaemon("trainlet-coordinator",
                             trainlet::coordinator::Coordinator::Create(std::move(config)));
}
