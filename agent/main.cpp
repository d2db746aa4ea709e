// trainlet-agent: the per-node daemon. Reads its config (file, then flags) and runs the Agent's
// loop. Every key is documented in docs/config.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/agent.h"
#include "agent/node_taints.h"
#include "agent/step/rank_identity.h"
#include "common/daemon_config.h"
#include "common/daemon_main.h"

int main(int argc, char** argv) {
  using trainlet::DaemonConfig;
  trainlet::agent::PrepareLoopSignals();  // before any thread exists
  trainlet::agent::AgentConfig config;
  trainlet::CommonDaemonKeys common;
  common.metrics_address = config.metrics_address;

  CLI::App app{
      "trainlet-agent: discovers this node, registers it with the trainlet coordinator, and\n"
      "starts and supervises the node's training processes.\n\n"
      "Example:\n"
      "  trainlet-agent --config /etc/trainlet/agent.yaml\n"
      "  trainlet-agent --name node-1 --address 10.0.0.5 --coordinator tcp://coord:7070 \\\n"
      "    --coordinator-key /etc/trainlet/keys/coordinator.key.pub \\\n"
      "    --key /etc/trainlet/keys/agent.key --state-dir /var/lib/trainlet-agent"};
  app.set_version_flag("--version", std::string("trainlet-agent ") + TRAINLET_VERSION);
  DaemonConfig c("trainlet-agent");
  c.String("name", &config.name, "Node name, unique in the cluster (default: hostname)");
  c.String("address", &config.address,
           "Address ranks on other nodes use to reach this node (default: 127.0.0.1)");
  c.String("coordinator", &config.coordinator,
           "Coordinator agent endpoint, e.g. tcp://10.0.0.1:7070", true);
  c.Path("coordinator_key", &config.coordinator_key_file, DaemonConfig::PathKind::kFile,
         "File holding the coordinator's CURVE public key", true);
  c.Path("key", &config.key_file, DaemonConfig::PathKind::kFile, "This agent's CURVE key pair file",
         true);
  c.Path("state_dir", &config.state_dir, DaemonConfig::PathKind::kAny,
         "Directory for worker logs and working dirs", true);
  c.Path("topology_xml", &config.topology_xml, DaemonConfig::PathKind::kFile,
         "Load this hwloc XML export instead of discovering the machine");
  c.String("apple_fixture", &config.apple_fixture,
           "Testing aid: impersonate an Apple Silicon Mac from captured <prefix>-sysctl.txt and "
           "<prefix>-ioreg.txt (e.g. tests/fixtures/macos/m2-ultra)");
  c.Uint32("slots", &config.slots, 0, 1u << 20, "Ranks this node runs at once (0: one per PU)");
  c.StringMap("labels", &config.labels, "Node labels, key=value");
  c.String("taints", &config.taints,
           "Node taints, comma-separated key=value:Effect or key:Effect (NoSchedule, "
           "PreferNoSchedule, NoExecute)",
           false, [](const std::string& v) -> std::string {
             auto t = trainlet::agent::ParseTaintList(v);
             return t.ok() ? "" : t.status().message();
           });
  c.Path("health_check_program", &config.health.program, DaemonConfig::PathKind::kFile,
         "Program run every health_check_interval_ms; a non-zero exit makes the node NotReady");
  c.Millis("health_check_interval_ms", &config.health.interval, 100, 86400000,
           "How often the health checks run, ms");
  c.Millis("health_check_timeout_ms", &config.health.timeout, 10, 3600000,
           "A health check program running longer is killed and the node is unhealthy, ms");
  c.Int(
      "health_min_free_disk_mb", 0, int64_t{1} << 40,
      [&config](int64_t v) { config.health.min_free_disk_bytes = static_cast<uint64_t>(v) << 20; },
      static_cast<int64_t>(config.health.min_free_disk_bytes >> 20),
      "The node is unhealthy while the state dir's file system has less free, MiB (0: off)");
  c.Millis("heartbeat_ms", &config.heartbeat_interval, 50, 60000,
           "Heartbeat interval in milliseconds");
  c.String("worker_ports", &config.worker_ports,
           "Ports reserved for ranks (MASTER_PORT, ring ports), LOW-HIGH; keep it outside the "
           "kernel's ephemeral range (net.ipv4.ip_local_port_range)",
           false, [](const std::string& v) -> std::string {
             auto r = trainlet::agent::ParsePortRange(v, "");
             return r.ok() ? "" : r.status().message();
           });
  c.Int(
      "progress_port", -1, 65535,
      [&config](int64_t v) { config.progress_port = static_cast<int32_t>(v); },
      config.progress_port,
      "Port of the HTTPS progress endpoint ranks report to (Kubeflow's trainerStatus), on "
      "`address`; 0: the port of the last run, else any; -1: off");
  c.Millis("progress_gather_ms", &config.progress_gather, 0, 100,
           "While ranks post in a stream, the progress endpoint's thread rests this long between "
           "wake-ups so one wake-up answers several posts; a post's answer waits up to this "
           "much longer, ms (0: no rest)");
  c.Path("shared_dir", &config.shared_dir, DaemonConfig::PathKind::kDirectory,
         "A directory on storage every node mounts at the same path; jobs annotated "
         "trainlet.io/working-dir: shared run in <shared_dir>/<job> (default: none)");
  c.Int(
      "rank_log_max_mb", 0, int64_t{1} << 30,
      [&config](int64_t v) { config.rank_log_max_bytes = static_cast<uint64_t>(v) << 20; },
      static_cast<int64_t>(config.rank_log_max_bytes >> 20),
      "Each rank's log is cut past this size, MiB, its earlier output kept in <log>.1 "
      "(0: never)");
  c.Int(
      "initializer_cache_max_gb", 0, int64_t{1} << 30,
      [&config](int64_t v) { config.initializer_cache_max_bytes = static_cast<uint64_t>(v) << 30; },
      static_cast<int64_t>(config.initializer_cache_max_bytes >> 30),
      "Size cap of the initializers' cache of fetched datasets and models, GiB; least recently "
      "used entries not in use go first (0: no cap)");
  c.String("run_as", &config.run_as,
           "Who the ranks run as: a user name or uid, optionally :group (name or gid); a job's "
           "securityContext.runAsUser/runAsGroup overrides it. Needs the agent to run as root. "
           "Default: the agent's own user",
           false, [](const std::string& v) -> std::string {
             if (v.empty()) return "";
             trainlet::step::RunAsRequest request;
             request.agent_run_as = v;
             auto id = trainlet::step::RankIdentity::Resolve(request, geteuid(),
                                                             trainlet::step::SystemAccounts());
             return id.ok() ? "" : id.status().message();
           });
  std::string standby = "on";
  c.Enum("step_standby", &standby, {"on", "off"},
         "Keep one trainlet-step started ahead of the next launch, already in its ranks' cgroup, "
         "so that a launch does not wait for the move into it");
  c.Millis("register_retry_ms", &config.register_retry, 100, 600000,
           "Delay between registration attempts until the coordinator answers, ms");
  trainlet::AddCommonDaemonKeys(c, &common);
  c.AddFlags(app);
  CLI11_PARSE(app, argc, argv);
  if (auto exit_code = trainlet::FinishDaemonConfig(c, &common, "agent")) return *exit_code;
  config.step_standby = standby == "on";
  config.metrics_address = common.metrics_address;
  config.metrics_best_effort = common.metrics_best_effort;
  return trainlet::RunDaemon("trainlet-agent", trainlet::agent::Agent::Create(std::move(config)));
}
