// trainlet-coordinator: node registry, job store, planner and operator API. Reads its config
// (file, then flags) and runs the Coordinator's loop. Every key is documented in docs/config.md.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/daemon_config.h"
#include "common/logging.h"
#include "coordinator/coordinator.h"

int main(int argc, char** argv) {
  using trainlet::DaemonConfig;
  trainlet::coordinator::BlockCoordinatorSignals();  // before any thread exists
  trainlet::coordinator::CoordinatorConfig config;
  std::string log_level = "info";
  std::string log_target = "auto";

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
  c.String("agent_listen", &config.agent_listen,
           "Endpoint agents connect to (port 0 picks a free one)");
  c.String("operator_listen", &config.operator_listen,
           "Endpoint trainletctl connects to (port 0 picks a free one)");
  c.String("exec_listen", &config.exec_listen,
           "Endpoint trainlet-exec (MPI launchers) connects to (port 0 picks a free one)");
  c.String("exec_advertise", &config.exec_advertise,
           "The exec endpoint as nodes reach it (default: the bound one, with this host's name "
           "for a wildcard address)");
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
  c.String("metrics_address", &config.metrics_address,
           "host:port serving /metrics, /healthz and /readyz; \"\" turns it off", false,
           DaemonConfig::CheckListenAddress);
  c.Enum("log_level", &log_level, {"trace", "debug", "info", "warn", "error"},
         "trace, debug, info, warn or error");
  c.Enum("log_target", &log_target, {"auto", "stderr", "journal"},
         "auto (the journal under systemd), stderr or journal");
  c.AddFlags(app);
  CLI11_PARSE(app, argc, argv);
  if (trainlet::Status s = c.Finish(); !s.ok()) {
    std::fprintf(stderr, "trainlet-coordinator: %s\n", s.message().c_str());
    return 2;
  }
  if (c.print_requested()) {
    std::fputs(c.ToYaml().c_str(), stdout);
    return 0;
  }
  config.metrics_best_effort = !c.WasSet("metrics_address");
  trainlet::SetUpLogging("coordinator", log_level, *trainlet::ParseLogTarget(log_target));

  auto coordinator = trainlet::coordinator::Coordinator::Create(std::move(config));
  if (!coordinator.ok()) {
    std::fprintf(stderr, "trainlet-coordinator: %s\n", coordinator.status().message().c_str());
    return 1;
  }
  const trainlet::Status st = (*coordinator)->Run();
  if (!st.ok()) {
    std::fprintf(stderr, "trainlet-coordinator: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
