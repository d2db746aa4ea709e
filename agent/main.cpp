// trainlet-agent: the per-node daemon. Parses flags and runs the Agent's loop.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/agent.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  trainlet::agent::BlockLoopSignals();  // before any thread exists
  trainlet::agent::AgentConfig config;
  std::string log_level = "info";
  std::vector<std::string> labels;
  int heartbeat_ms = 1000;

  CLI::App app{
      "trainlet-agent: discovers this node, registers it with the trainlet coordinator, and\n"
      "starts and supervises the node's training processes.\n\n"
      "Example:\n"
      "  trainlet-agent --name node-1 --address 10.0.0.5 --coordinator tcp://coord:7070 \\\n"
      "    --coordinator-key /etc/trainlet/keys/coordinator.key.pub \\\n"
      "    --key /etc/trainlet/keys/agent.key --state-dir /var/lib/trainlet-agent"};
  app.set_version_flag("--version", std::string("trainlet-agent ") + TRAINLET_VERSION);
  app.add_option("--name", config.name, "Node name, unique in the cluster (default: hostname)");
  app.add_option("--address", config.address,
                 "Address ranks on other nodes use to reach this node (default: 127.0.0.1)");
  app.add_option("--coordinator", config.coordinator,
                 "Coordinator agent endpoint, e.g. tcp://10.0.0.1:7070")
      ->required();
  app.add_option("--coordinator-key", config.coordinator_key_file,
                 "File holding the coordinator's CURVE public key")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--key", config.key_file, "This agent's CURVE key pair file")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--state-dir", config.state_dir, "Directory for worker logs and working dirs")
      ->required();
  app.add_option("--topology-xml", config.topology_xml,
                 "Load this hwloc XML export instead of discovering the machine")
      ->check(CLI::ExistingFile);
  app.add_option("--slots", config.slots, "Ranks this node runs at once (default: one per PU)");
  app.add_option("--labels", labels, "Node labels, key=value (repeatable)");
  app.add_option("--heartbeat-ms", heartbeat_ms, "Heartbeat interval in milliseconds")
      ->check(CLI::Range(50, 60000));
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error");
  CLI11_PARSE(app, argc, argv);

  for (const auto& l : labels) {
    const auto eq = l.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "trainlet-agent: --labels %s: expected key=value\n", l.c_str());
      return 2;
    }
    config.labels[l.substr(0, eq)] = l.substr(eq + 1);
  }
  config.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  trainlet::SetUpLogging("agent", log_level);

  auto agent = trainlet::agent::Agent::Create(std::move(config));
  if (!agent.ok()) {
    std::fprintf(stderr, "trainlet-agent: %s\n", agent.status().message().c_str());
    return 1;
  }
  const trainlet::Status st = (*agent)->Run();
  if (!st.ok()) {
    std::fprintf(stderr, "trainlet-agent: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
