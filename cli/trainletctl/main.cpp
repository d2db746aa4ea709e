// trainletctl: the operator CLI of trainlet, shaped like kubectl.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "trainletctl/client_config.h"
#include "trainletctl/commands.h"
#include "trainletctl/keys_command.h"
#include "trainletctl/lifecycle_commands.h"
#include "trainletctl/local_cluster.h"
#include "trainletctl/node_commands.h"
#include "trainletctl/rendezvous_command.h"

using namespace trainlet::cli;

int main(int argc, char** argv) {
  CLI::App app{
      "trainletctl: run Kubeflow Trainer v2 TrainJobs on a trainlet cluster.\n\n"
      "Start a cluster on this machine and run a job:\n"
      "  eval $(trainletctl local up --agents 2)\n"
      "  trainletctl get nodes\n"
      "  trainletctl apply -f examples/hello/trainjob.yaml\n"
      "  trainletctl wait trainjob/hello --for=condition=Complete --timeout=60s\n"
      "  trainletctl logs hello\n"
      "  trainletctl apply -f job.yaml --wait        # submit and block until it ends, as sbatch --wait\n"
      "  trainletctl local down\n\n"
      "The client configuration (coordinator endpoint and keys) lives in TRAINLET_HOME\n"
      "(default ~/.trainlet), or in the directory given with --home."};
  app.set_version_flag("--version", std::string("trainletctl ") + TRAINLET_VERSION);
  app.require_subcommand(1);
  CommonFlags common;
  app.add_option("--home", common.home, "Client configuration directory (overrides TRAINLET_HOME)");

  int rc = 0;

  // get
  auto* get = app.add_subcommand("get", "List nodes or trainjobs\n  trainletctl get nodes -o wide\n  trainletctl get trainjobs");
  std::string get_kind, get_name;
  get->add_option("kind", get_kind, "nodes | trainjobs (or trainjob/NAME)")->required();
  get->add_option("name", get_name, "Only this one");
  get->add_option("-o,--output", common.output, "json | yaml | wide | name");
  get->callback([&] { rc = CmdGet(common, get_kind, get_name); });

  // describe
  auto* describe = app.add_subcommand("describe", "Show a trainjob in detail: placement, ranks, exit codes, conditions, events");
  std::string d_kind, d_name;
  describe->add_option("kind", d_kind, "trainjob (or trainjob/NAME)")->required();
  describe->add_option("name", d_name, "The trainjob's name");
  describe->add_option("-o,--output", common.output, "json | yaml: a node's full status");
  describe->callback([&] { rc = CmdDescribe(common, d_kind, d_name); });

  // apply
  auto* apply = app.add_subcommand("apply", "Create TrainJobs and runtimes from a YAML file (several documents allowed)");
  std::string apply_file;
  apply->add_option("-f,--filename", apply_file, "The YAML file, or - for stdin")->required();
  apply->add_option("-o,--output", common.output, "json");
  bool apply_wait = false;
  std::string apply_timeout = "0";
  apply->add_flag("--wait", apply_wait,
                  "Then wait, on the same connection, until every TrainJob the file created or "
                  "changed is Complete (exit 0) or Failed (exit 1, saying why), as sbatch --wait");
  apply->add_option("--timeout", apply_timeout, "With --wait: give up after this long, e.g. 10m; 0 waits forever")
      ->capture_default_str();
  apply->callback([&] { rc = CmdApply(common, apply_file, apply_wait, apply_timeout); });

  // delete
  auto* del = app.add_subcommand("delete", "Stop every rank of a trainjob and remove it\n  trainletctl delete trainjob hello");
  std::string del_kind, del_name, del_timeout = "60s";
  bool del_wait = true;
  del->add_option("kind", del_kind, "trainjob (or trainjob/NAME)")->required();
  del->add_option("name", del_name, "The trainjob's name");
  del->add_option("--wait", del_wait, "Wait until every rank has stopped (default true)");
  del->add_option("--timeout", del_timeout, "How long to wait, e.g. 60s")->capture_default_str();
  del->callback([&] { rc = CmdDelete(common, del_kind, del_name, del_wait, del_timeout); });

  // suspend / resume
  std::string s_kind, s_name;
  for (const bool suspend : {true, false}) {
    auto* sub = app.add_subcommand(
        suspend ? "suspend" : "resume",
        suspend ? "Stop every rank of a trainjob and keep it Suspended\n  trainletctl suspend trainjob hello"
                : "Resume a suspended trainjob: a new attempt starts\n  trainletctl resume trainjob hello");
    sub->add_option("kind", s_kind, "trainjob (or trainjob/NAME)")->required();
    sub->add_option("name", s_name, "The trainjob's name");
    sub->callback([&, suspend] { rc = CmdSetSuspend(common, s_kind, s_name, suspend); });
  }

  // cordon / uncordon / drain
  std::string n_node, n_reason, drain_timeout = "0";
  bool drain_force = false;
  for (const bool cordon : {true, false}) {
    auto* sub = app.add_subcommand(
        cordon ? "cordon" : "uncordon",
        cordon ? "Keep new ranks off a node; what runs there keeps running\n  trainletctl cordon node-3"
               : "Let a cordoned node take new ranks again\n  trainletctl uncordon node-3");
    sub->add_option("node", n_node, "The node's name (or node/NAME)")->required();
    if (cordon) sub->add_option("--reason", n_reason, "Shown by get nodes");
    sub->callback([&, cordon] { rc = CmdCordon(common, n_node, cordon, n_reason); });
  }
  auto* drain = app.add_subcommand(
      "drain",
      "Cordon a node and wait until no rank runs there; --force fails the attempts of its jobs so\n"
      "they restart elsewhere\n  trainletctl drain node-3 --timeout 10m\n  trainletctl drain node-3 --force");
  drain->add_option("node", n_node, "The node's name (or node/NAME)")->required();
  drain->add_flag("--force", drain_force, "Stop the jobs running there (cause \"node drained\")");
  drain->add_option("--timeout", drain_timeout, "Give up waiting after this long, e.g. 5m; 0 waits forever")
      ->capture_default_str();
  drain->add_option("--reason", n_reason, "Shown by get nodes");
  drain->callback([&] { rc = CmdDrain(common, n_node, drain_force, drain_timeout, n_reason); });

  // wait
  auto* wait = app.add_subcommand(
      "wait",
      "Wait for a trainjob condition; exits 0 when it holds, 1 when the job ended otherwise or the "
      "timeout passed\n  trainletctl wait trainjob/hello --for=condition=Complete --timeout=60s");
  std::string w_target, w_for, w_timeout = "30s";
  wait->add_option("target", w_target, "trainjob/NAME")->required();
  wait->add_option("--for", w_for, "condition=Complete | condition=Failed | condition=Suspended | delete")
      ->required();
  wait->add_option("--timeout", w_timeout, "e.g. 60s, 5m")->capture_default_str();
  wait->callback([&] { rc = CmdWait(common, w_target, w_for, w_timeout); });

  // logs
  auto* logs = app.add_subcommand(
      "logs",
      "Print a trainjob's output. Without --rank every rank's lines are printed, each prefixed "
      "with [rank N]\n  trainletctl logs hello --rank 3 -f");
  std::string l_job;
  int l_rank = -1;
  bool l_follow = false;
  uint32_t l_attempt = 0;
  logs->add_option("job", l_job, "The trainjob's name")->required();
  logs->add_option("--rank", l_rank, "Only this rank")->check(CLI::NonNegativeNumber);
  logs->add_flag("-f,--follow", l_follow, "Keep printing until the ranks exit");
  logs->add_option("--attempt", l_attempt, "An earlier attempt's logs (default: the current one)");
  logs->callback([&] {
    if (l_job.rfind("trainjob/", 0) == 0) l_job = l_job.substr(9);
    rc = CmdLogs(common, l_job, l_rank, l_follow, l_attempt);
  });

  // keys
  auto* keys = app.add_subcommand("keys", "Create and list CURVE keys for a real deployment");
  keys->require_subcommand(1);
  auto* kcreate = keys->add_subcommand(
      "create",
      "Create a key pair\n  trainletctl keys create --role agent --name node-7 --dir /etc/trainlet/keys "
      "--allowlist /etc/trainlet/keys/agents.allow");
  std::string k_dir = ".", k_name, k_role = "operator", k_allow, k_out;
  kcreate->add_option("--dir", k_dir, "Where to write NAME.key and NAME.key.pub")->capture_default_str();
  kcreate->add_option("--name", k_name, "Key name, e.g. the node or operator name")->required();
  kcreate->add_option("--role", k_role, "agent | operator | coordinator")->capture_default_str();
  kcreate->add_option("--allowlist", k_allow, "Also enrol the public key in this allowlist file");
  kcreate->callback([&] { rc = CmdKeysCreate(k_dir, k_name, k_role, k_allow); });
  auto* klist = keys->add_subcommand("list", "List the keys and allowlist entries in a directory");
  klist->add_option("--dir", k_dir, "Key directory")->capture_default_str();
  klist->add_option("-o,--output", k_out, "json");
  klist->callback([&] { rc = CmdKeysList(k_dir, k_out); });

  // local
  auto* local = app.add_subcommand("local", "A coordinator and agents on this machine, for trying trainlet and for tests");
  local->require_subcommand(1);
  auto* up = local->add_subcommand(
      "up",
      "Start a coordinator and N agents; prints `export TRAINLET_HOME=DIR`\n"
      "  trainletctl local up --agents 3 --dir /tmp/tl --topology tests/fixtures/dgx-2socket-8gpu.xml");
  LocalUpOptions up_opts;
  up->add_option("--agents", up_opts.agents, "Number of agents")->capture_default_str();
  up->add_option("--dir", up_opts.dir, "Directory for everything of this cluster (default: TRAINLET_HOME)");
  up->add_option("--topology", up_opts.topologies,
                 "hwloc XML per agent, in order (repeatable); one file applies to all")
      ->check(CLI::ExistingFile);
  up->add_option("--slots", up_opts.slots, "Ranks each agent accepts (default: one per PU)");
  up->add_option("--heartbeat-ms", up_opts.heartbeat_ms, "Agent heartbeat interval")->capture_default_str();
  up->add_option("--lost-timeout-ms", up_opts.lost_timeout_ms, "Silence before a node is Lost")
      ->capture_default_str();
  up->add_option("--timeout", up_opts.timeout_s, "Seconds to wait for every agent to be Ready")
      ->capture_default_str();
  up->add_option("--labels", up_opts.labels,
                 "Node labels per agent, in order, as k=v,k2=v2 (repeatable; one value applies to "
                 "all; - for none)");
  up->add_option("--taints", up_opts.taints,
                 "Node taints per agent, as key=value:Effect,... (repeatable, as --labels)");
  up->add_option("--health-check", up_opts.health_checks,
                 "Health check program per agent (repeatable, as --labels)");
  up->add_option("--health-interval-ms", up_opts.health_interval_ms,
                 "The agents' health check interval");
  up->callback([&] {
    if (up_opts.dir.empty()) up_opts.dir = ResolveHome(common.home);
    up_opts.dir = std::filesystem::absolute(up_opts.dir).lexically_normal().string();
    auto st = LocalUp(up_opts);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      rc = 1;
    }
  });
  auto* down = local->add_subcommand("down", "Stop exactly the processes `local up` started");
  std::string down_dir;
  int down_timeout = 15;
  down->add_option("--dir", down_dir, "The cluster's directory (default: TRAINLET_HOME)");
  down->add_option("--timeout", down_timeout, "Seconds before SIGKILL")->capture_default_str();
  down->callback([&] {
    if (down_dir.empty()) down_dir = ResolveHome(common.home);
    auto st = LocalDown(std::filesystem::absolute(down_dir).lexically_normal().string(), down_timeout);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      rc = 1;
    }
  });

  AddRendezvousCommand(app, rc);  // put|get|fence, for ranks that are shell scripts

  CLI11_PARSE(app, argc, argv);
  return rc;
}
