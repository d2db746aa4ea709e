// trainlet-coordinator: node registry, job store, planner and operator API. Parses flags and runs
// the Coordinator's loop.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/logging.h"
#include "coordinator/coordinator.h"

int main(int argc, char** argv) {
  trainlet::coordinator::BlockCoordinatorSignals();  // before any thread exists
  trainlet::coordinator::CoordinatorConfig config;
  std::string log_level = "info";
  int heartbeat_ms = 1000;
  int lost_ms = 3000;

  CLI::App app{
      "trainlet-coordinator: turns Kubeflow Trainer v2 TrainJobs into per-node launch plans,\n"
      "places each job as a gang on the registered agents, and answers trainletctl.\n\n"
      "Example:\n"
      "  trainlet-coordinator --state-dir /var/lib/trainlet \\\n"
      "    --key /etc/trainlet/keys/coordinator.key \\\n"
      "    --agent-allowlist /etc/trainlet/keys/agents.allow \\\n"
      "    --operator-allowlist /etc/trainlet/keys/operators.allow \\\n"
      "    --runtimes-dir /usr/share/trainlet/runtimes"};
  app.set_version_flag("--version", std::string("trainlet-coordinator ") + TRAINLET_VERSION);
  app.add_option("--state-dir", config.state_dir, "Directory of the job store (SQLite)")
      ->required();
  app.add_option("--agent-listen", config.agent_listen,
                 "Endpoint agents connect to (port 0 picks a free one)")
      ->capture_default_str();
  app.add_option("--operator-listen", config.operator_listen,
                 "Endpoint trainletctl connects to (port 0 picks a free one)")
      ->capture_default_str();
  app.add_option("--key", config.key_file, "The coordinator's CURVE key pair file")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--agent-allowlist", config.agent_allowlist,
                 "Public keys of the agents allowed to connect (one per line)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--operator-allowlist", config.operator_allowlist,
                 "Public keys of the operators allowed to connect (one per line)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--runtimes-dir", config.runtimes_dir,
                 "Directory of ClusterTrainingRuntime YAML files loaded at start")
      ->check(CLI::ExistingDirectory);
  app.add_option("--endpoints-file", config.endpoints_file,
                 "Write the bound endpoints here as JSON once serving");
  app.add_option("--heartbeat-ms", heartbeat_ms, "Agent heartbeat interval, ms")
      ->check(CLI::Range(50, 60000));
  app.add_option("--lost-timeout-ms", lost_ms, "Silence after which a node is Lost, ms")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error");
  CLI11_PARSE(app, argc, argv);
  config.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  config.lost_timeout = std::chrono::milliseconds(lost_ms);
  trainlet::SetUpLogging("coordinator", log_level);

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
