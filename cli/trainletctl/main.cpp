// trainletctl: the operator CLI of trainlet, shaped like kubectl.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "trainletctl/admit_check_command.h"
#include "trainletctl/client_config.h"
#include "trainletctl/commands.h"
#include "trainletctl/keys_command.h"
#include "trainletctl/lifecycle_commands.h"
#include "trainletctl/local_cluster.h"
#include "trainletctl/logs_command.h"
#include "trainletctl/node_commands.h"
#include "trainletctl/output_writer.h"
#include "trainletctl/rendezvous_command.h"

using namespace trainlet::cli;

namespace {

// One function per subcommand (or family of subcommands that share their arguments). Each keeps
// the storage CLI11 writes into in a shared_ptr held by its callback, so it lives as long as the
// App. `common` and `rc` belong to main and outlive the App's parse.

// -n/--namespace and -A/--all-namespaces, as kubectl's, on the subcommands that name or list
// trainjobs.
void AddNamespaceFlags(CLI::App* sub, CommonFlags& common) {
  sub->add_option("-n,--namespace", common.ns, "The trainjobs' namespace")->capture_default_str();
  sub->add_flag("-A,--all-namespaces", common.all_namespaces,
                "Every namespace (get: adds a NAMESPACE column)");
}

void AddGetCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* get = app.add_subcommand(
      "get",
      "List nodes, trainjobs, runtimes or queues\n  trainletctl get nodes -o wide\n"
      "  trainletctl get trainjobs -A\n  trainletctl get clustertrainingruntimes\n"
      "  trainletctl get trainingruntimes -n team-a -o yaml");
  struct Args {
    std::string kind;
    std::vector<std::string> names;
    ListPaging paging;
  };
  auto a = std::make_shared<Args>();
  get->add_option("kind", a->kind,
                  "nodes | trainjobs (or trainjob/NAME) | pytorchjobs, tfjobs, xgboostjobs, "
                  "paddlejobs, jaxjobs, mpijobs | clustertrainingruntimes, trainingruntimes | "
                  "clusterqueues (cq), localqueues (lq), "
                  "resourceflavors (rf), workloadpriorityclasses (wpc)")
      ->required();
  get->add_option("name", a->names,
                  "Only this one; several for trainjobs and nodes (get trainjobs a b, or "
                  "trainjob/a trainjob/b), in one table");
  get->add_option("-o,--output", common.output, "json | yaml | wide | name")
      ->check(CLI::IsMember({"json", "yaml", "wide", "name"}));
  get->add_option("--limit", a->paging.limit,
                  "trainjobs: show at most this many (the oldest first); 0 shows every one")
      ->capture_default_str();
  get->add_option("--chunk-size", a->paging.chunk_size,
                  "trainjobs: fetch the list in pages of this many, as kubectl; 0 asks for it in "
                  "one answer, which fails when it is too large")
      ->capture_default_str();
  AddNamespaceFlags(get, common);
  get->callback([&common, &rc, a] {
    const bool several =
        a->names.size() > 1 || (a->names.size() == 1 && a->kind.find('/') != std::string::npos);
    rc = several ? CmdGetSeveral(common, a->kind, a->names)
                 : CmdGet(common, a->kind, a->names.empty() ? "" : a->names[0], a->paging);
  });
}

void AddDescribeCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* describe = app.add_subcommand(
      "describe",
      "Show a trainjob in detail: placement, ranks, exit codes, conditions, events\n"
      "  trainletctl describe trainjob hello\n"
      "  trainletctl describe trainjob llm-7 -n team-a -o json\n"
      "  trainletctl describe node node-1\n"
      "  trainletctl describe clusterqueue team-a");
  struct Args {
    std::string kind, name;
  };
  auto a = std::make_shared<Args>();
  describe
      ->add_option("kind", a->kind,
                   "trainjob (or trainjob/NAME), node, clusterqueue (cq), resourceflavor (rf)")
      ->required();
  describe->add_option("name", a->name, "The trainjob's name");
  describe->add_option("-o,--output", common.output, "json | yaml: the full status, for scripts")
      ->check(CLI::IsMember({"json", "yaml"}));
  AddNamespaceFlags(describe, common);
  describe->callback([&common, &rc, a] { rc = CmdDescribe(common, a->kind, a->name); });
}

void AddApplyCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* apply = app.add_subcommand(
      "apply",
      "Create TrainJobs and runtimes from a YAML file (several documents allowed)\n"
      "  trainletctl apply -f job.yaml\n"
      "  trainletctl apply -f job.yaml --wait --timeout 2h   # exit 0 when Complete, 1 when "
      "Failed\n"
      "  cat queues.yaml | trainletctl apply -f -\n"
      "  trainletctl apply -f manifests/      # every .yaml, .yml and .json file in it\n"
      "  trainletctl apply -f jobs.yaml -o json");
  struct Args {
    std::string file;
    bool wait = false;
    std::string timeout = "0";
  };
  auto a = std::make_shared<Args>();
  apply
      ->add_option(
          "-f,--filename", a->file,
          "The YAML file, a directory of them (.yaml, .yml, .json; not its subdirectories), "
          "or - for stdin")
      ->required();
  apply->add_option("-o,--output", common.output, "json: what was created, configured, unchanged")
      ->check(CLI::IsMember({"json"}));
  apply->add_flag("--wait", a->wait,
                  "Then wait, on the same connection, until every TrainJob in the file is Complete "
                  "(exit 0) or Failed (exit 1, saying why), as sbatch --wait; one applied "
                  "unchanged is waited for too, so a retried step does not go on while it runs");
  apply
      ->add_option("--timeout", a->timeout,
                   "With --wait: give up after this long, e.g. 10m; 0 waits forever")
      ->capture_default_str();
  apply->callback([&common, &rc, a] { rc = CmdApply(common, a->file, a->wait, a->timeout); });
}

void AddDeleteCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* del = app.add_subcommand(
      "delete",
      "Stop every rank of a trainjob and remove it, or remove a queue object (a resourceflavor or "
      "clusterqueue still in use stays Terminating, and goes once nothing uses it)\n"
      "  trainletctl delete trainjob hello\n"
      "  trainletctl delete trainjob a b c --wait=false\n"
      "  trainletctl delete resourceflavor a100");
  struct Args {
    std::string kind, timeout = "60s";
    std::vector<std::string> names;
    bool wait = true, force = false;
  };
  auto a = std::make_shared<Args>();
  del->add_option("kind", a->kind,
                  "trainjob (or trainjob/NAME), clusterqueue (cq), localqueue (lq), resourceflavor "
                  "(rf), workloadpriorityclass (wpc)")
      ->required();
  del->add_flag("--force", a->force,
                "Remove the trainjob now, without waiting for its ranks to stop or for a Lost "
                "node to confirm they did. Risk: a rank on an unreachable node may keep running "
                "(and writing its work dir or shared storage) until that node comes back, even "
                "beside a trainjob applied again under the same name");
  del->add_option("name", a->names,
                  "The names (several: each deleted; with KIND/NAME, more KIND/NAME arguments)");
  del->add_option("--wait", a->wait, "Wait until every rank has stopped (default true)");
  del->add_option("--timeout", a->timeout, "How long to wait, e.g. 60s")->capture_default_str();
  AddNamespaceFlags(del, common);
  del->callback([&common, &rc, a] {
    rc = CmdDelete(common, a->kind, a->names, a->wait, a->timeout, a->force);
  });
}

// suspend / resume
void AddSuspendCommands(CLI::App& app, CommonFlags& common, int& rc) {
  struct Args {
    std::string kind, name;
  };
  auto a = std::make_shared<Args>();
  for (const bool suspend : {true, false}) {
    auto* sub = app.add_subcommand(suspend ? "suspend" : "resume",
                                   suspend ? "Stop every rank of a trainjob and keep it "
                                             "Suspended\n  trainletctl suspend trainjob hello"
                                           : "Resume a suspended trainjob: a new attempt starts\n  "
                                             "trainletctl resume trainjob hello");
    sub->add_option("kind", a->kind, "trainjob (or trainjob/NAME)")->required();
    sub->add_option("name", a->name, "The trainjob's name");
    AddNamespaceFlags(sub, common);
    sub->callback(
        [&common, &rc, a, suspend] { rc = CmdSetSuspend(common, a->kind, a->name, suspend); });
  }
}

// admit-check (Kueue's admission checks: an admin marks one Ready for a job)
void AddAdmitCheckCommand(CLI::App& app, CommonFlags& common, int& rc) {
  struct Args {
    std::string kind, name, check;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "admit-check",
      "Mark an admission check of a trainjob's ClusterQueue Ready (admins only)\n  "
      "trainletctl admit-check trainjob/llm-7 -n team-a --check budget-approval");
  sub->add_option("kind", a->kind, "trainjob (or trainjob/NAME)")->required();
  sub->add_option("name", a->name, "The trainjob's name");
  sub->add_option("--check", a->check, "The admission check's name")->required();
  AddNamespaceFlags(sub, common);
  sub->callback([&common, &rc, a] { rc = CmdAdmitCheck(common, a->kind, a->name, a->check); });
}

// cordon / uncordon / drain
void AddNodeCommands(CLI::App& app, CommonFlags& common, int& rc) {
  struct Args {
    std::string node, reason, drain_timeout = "0";
    bool drain_force = false;
  };
  auto a = std::make_shared<Args>();
  for (const bool cordon : {true, false}) {
    auto* sub = app.add_subcommand(
        cordon ? "cordon" : "uncordon",
        cordon ? "Keep new ranks off a node; what runs there keeps running\n  trainletctl cordon "
                 "node-3"
               : "Let a cordoned node take new ranks again\n  trainletctl uncordon node-3");
    sub->add_option("node", a->node, "The node's name (or node/NAME)")->required();
    if (cordon) sub->add_option("--reason", a->reason, "Shown by get nodes");
    sub->callback(
        [&common, &rc, a, cordon] { rc = CmdCordon(common, a->node, cordon, a->reason); });
  }
  auto* drain = app.add_subcommand(
      "drain",
      "Cordon a node and wait until no rank runs there; --force fails the attempts of its jobs so\n"
      "they restart elsewhere\n  trainletctl drain node-3 --timeout 10m\n  trainletctl drain "
      "node-3 --force");
  drain->add_option("node", a->node, "The node's name (or node/NAME)")->required();
  drain->add_flag("--force", a->drain_force,
                  "Stop the jobs running there (cause \"node drained\")");
  drain
      ->add_option("--timeout", a->drain_timeout,
                   "Give up waiting after this long, e.g. 5m; 0 waits forever")
      ->capture_default_str();
  drain->add_option("--reason", a->reason, "Shown by get nodes");
  drain->callback([&common, &rc, a] {
    rc = CmdDrain(common, a->node, a->drain_force, a->drain_timeout, a->reason);
  });
}

void AddWaitCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* wait = app.add_subcommand(
      "wait",
      "Wait for a trainjob condition; exits 0 when it holds, 1 when the job ended otherwise or the "
      "timeout passed\n  trainletctl wait trainjob/hello --for=condition=Complete --timeout=60s\n"
      "  trainletctl wait trainjob/a trainjob/b --for=condition=Complete --timeout=1h");
  struct Args {
    std::string for_condition, timeout = "30s";
    std::vector<std::string> targets;
  };
  auto a = std::make_shared<Args>();
  wait->add_option("target", a->targets,
                   "trainjob/NAME, several, or trainjob NAME...: each is waited for, within one "
                   "--timeout; the exit is 1 when any does not meet the condition")
      ->required();
  wait->add_option("--for", a->for_condition,
                   "condition=Complete | condition=Failed | condition=Suspended | delete")
      ->required();
  wait->add_option("--timeout", a->timeout, "e.g. 60s, 5m, 2h; 0 waits without a limit")
      ->capture_default_str();
  AddNamespaceFlags(wait, common);
  wait->callback(
      [&common, &rc, a] { rc = CmdWait(common, a->targets, a->for_condition, a->timeout); });
}

void AddLogsCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* logs = app.add_subcommand(
      "logs",
      "Print a trainjob's output. Without --rank every rank's lines are printed, each prefixed "
      "with [rank N] (a replicated job's worker with [STEP I]). --step reads one replicated job "
      "of the runtime (dataset-initializer, ...), --rank then being the index of its worker\n"
      "  trainletctl apply -f job.yaml && trainletctl logs hello -f\n"
      "  trainletctl logs hello --rank 3 -f\n"
      "  trainletctl logs hello --step dataset-initializer --rank 0\n"
      "  trainletctl logs hello --step dataset-initializer --attempt 1\n"
      "  trainletctl logs hello --rank 0 --previous");
  struct Args {
    std::string job;
    std::string step;
    int rank = -1;
    bool follow = false;
    uint32_t attempt = 0;
    bool previous = false;
  };
  auto a = std::make_shared<Args>();
  logs->add_option("job", a->job, "The trainjob's name")->required();
  logs->add_option("--rank", a->rank, "Only this rank (with --step: that step's I-th worker)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max(), "a rank: 0 or more"));
  logs->add_option("--step", a->step,
                   "Only the workers of this replicated job of the runtime (e.g. "
                   "dataset-initializer)");
  logs->add_flag("-f,--follow", a->follow,
                 "Keep printing until the ranks exit; a job not started yet (queued, waiting for "
                 "nodes, suspended) and a rank not started yet are waited for, saying on stderr "
                 "what the job waits for. Without --rank, --step or --attempt, a job that "
                 "restarts is followed into its next attempt, to the job's end");
  logs->add_option("--attempt", a->attempt,
                   "Attempt N's logs, its workers as that attempt ran them (default: the current "
                   "one); an attempt that does not exist is refused with those that do");
  logs->add_flag("-p,--previous", a->previous,
                 "The attempt before the current one's logs, as kubectl logs --previous");
  AddNamespaceFlags(logs, common);
  logs->callback([&common, &rc, a] {
    if (a->job.rfind("trainjob/", 0) == 0) a->job = a->job.substr(9);
    rc = CmdLogs(common, a->job, a->rank, a->follow, a->attempt, a->step, a->previous);
  });
}

void AddKeysCommand(CLI::App& app, int& rc) {
  auto* keys = app.add_subcommand("keys", "Create and list CURVE keys for a real deployment");
  keys->require_subcommand(1);
  auto* kcreate = keys->add_subcommand("create",
                                       "Create a key pair\n  trainletctl keys create --role agent "
                                       "--name node-7 --dir /etc/trainlet/keys "
                                       "--allowlist /etc/trainlet/keys/agents.allow");
  struct Args {
    std::string dir = ".", name, role = "operator", allow, out;
  };
  auto a = std::make_shared<Args>();
  kcreate->add_option("--dir", a->dir, "Where to write NAME.key and NAME.key.pub")
      ->capture_default_str();
  kcreate
      ->add_option("--name", a->name,
                   "Key name: the node or operator name (letters, digits, ., _ and -)")
      ->required();
  kcreate->add_option("--role", a->role, "agent | operator | coordinator")->capture_default_str();
  kcreate->add_option("--allowlist", a->allow, "Also enrol the public key in this allowlist file");
  kcreate->callback([&rc, a] { rc = CmdKeysCreate(a->dir, a->name, a->role, a->allow); });
  auto* klist = keys->add_subcommand("list",
                                     "List the keys and allowlist entries in a directory\n"
                                     "  trainletctl keys list --dir /etc/trainlet/keys\n"
                                     "  trainletctl keys list --dir /etc/trainlet/keys -o json");
  klist->add_option("--dir", a->dir, "Key directory")->capture_default_str();
  klist->add_option("-o,--output", a->out, "json")->check(CLI::IsMember({"json"}));
  klist->callback([&rc, a] { rc = CmdKeysList(a->dir, a->out); });
}

void AddLocalUpCommand(CLI::App& local, CommonFlags& common, int& rc) {
  auto* up =
      local.add_subcommand("up",
                           "Start a coordinator and N agents; prints `export TRAINLET_HOME=DIR`\n"
                           "  trainletctl local up --agents 3 --dir /tmp/tl --topology "
                           "tests/fixtures/dgx-2socket-8gpu.xml");
  auto up_opts = std::make_shared<LocalUpOptions>();
  up->add_option("--agents", up_opts->agents, "Number of agents")->capture_default_str();
  up->add_option("--dir", up_opts->dir,
                 "Directory for everything of this cluster (default: TRAINLET_HOME)");
  up->add_option("--topology", up_opts->topologies,
                 "hwloc XML per agent, in order (repeatable); one file applies to all")
      ->check(CLI::ExistingFile);
  up->add_option("--slots", up_opts->slots,
                 "Ranks each agent accepts (default: one per PU and at least 8, as a test cluster "
                 "is generous; with --topology one per PU of that machine)");
  up->add_option("--heartbeat-ms", up_opts->heartbeat_ms, "Agent heartbeat interval")
      ->capture_default_str();
  up->add_option("--lost-timeout-ms", up_opts->lost_timeout_ms, "Silence before a node is Lost")
      ->capture_default_str();
  up->add_option("--partition-grace-ms", up_opts->partition_grace_ms,
                 "How long an agent cut off from the coordinator keeps its ranks (default: the "
                 "coordinator's, 10000)")
      ->check(CLI::Range(100, 3600000));
  up->add_option("--stop-grace-ms", up_opts->stop_grace_ms,
                 "SIGTERM to SIGKILL for stopped ranks (default: the coordinator's, 10000)")
      ->check(CLI::Range(0, 3600000));
  up->add_option("--timeout", up_opts->timeout_s, "Seconds to wait for every agent to be Ready")
      ->capture_default_str();
  up->add_option("--labels", up_opts->labels,
                 "Node labels per agent, in order, as k=v,k2=v2 (repeatable; one value applies to "
                 "all; - for none)");
  up->add_option("--taints", up_opts->taints,
                 "Node taints per agent, as key=value:Effect,... (repeatable, as --labels)");
  up->add_option("--health-check", up_opts->health_checks,
                 "Health check program per agent (repeatable, as --labels)");
  up->add_option("--shared-dir", up_opts->shared_dirs,
                 "The agents' shared_dir per agent (repeatable, as --labels): where jobs "
                 "annotated trainlet.io/working-dir: shared run");
  up->add_option("--health-interval-ms", up_opts->health_interval_ms,
                 "The agents' health check interval");
  up->callback([&common, &rc, up_opts] {
    if (up_opts->dir.empty()) up_opts->dir = ResolveHome(common.home);
    up_opts->dir = std::filesystem::absolute(up_opts->dir).lexically_normal().string();
    auto st = LocalUp(*up_opts);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      rc = 1;
    }
  });
}

void AddLocalDownCommand(CLI::App& local, CommonFlags& common, int& rc) {
  auto* down = local.add_subcommand("down",
                                    "Stop exactly the processes `local up` started\n"
                                    "  trainletctl local down\n"
                                    "  trainletctl local down --dir /tmp/my-cluster --timeout 5");
  struct Args {
    std::string dir;
    int timeout = 15;
  };
  auto a = std::make_shared<Args>();
  down->add_option("--dir", a->dir, "The cluster's directory (default: TRAINLET_HOME)");
  down->add_option("--timeout", a->timeout, "Seconds before SIGKILL")->capture_default_str();
  down->callback([&common, &rc, a] {
    if (a->dir.empty()) a->dir = ResolveHome(common.home);
    auto st = LocalDown(std::filesystem::absolute(a->dir).lexically_normal().string(), a->timeout);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      rc = 1;
    }
  });
}

void AddLocalRestartCommand(CLI::App& local, CommonFlags& common, int& rc) {
  auto* restart = local.add_subcommand(
      "restart",
      "Restart a daemon of a local cluster in place:\n"
      "  trainletctl local restart coordinator\n"
      "stops the coordinator (SIGTERM; SIGKILL after --timeout), starts it again\n"
      "on the same ports with the same store, keys and flags, and waits until the running\n"
      "agents have re-registered. Jobs and their ranks keep running. To simulate a crash\n"
      "instead, kill -9 the pid in TRAINLET_HOME/pids/coordinator.pid, then run this.");
  restart->require_subcommand(1);
  auto* coordinator = restart->add_subcommand(
      "coordinator",
      "Stop and start the coordinator on the ports it had (see `local restart -h`)\n"
      "  trainletctl local restart coordinator\n"
      "  kill -9 $(cut -d' ' -f1 $TRAINLET_HOME/pids/coordinator.pid); "
      "trainletctl local restart coordinator");
  struct Args {
    std::string dir;
    int timeout = 15;
  };
  auto a = std::make_shared<Args>();
  coordinator->add_option("--dir", a->dir, "The cluster's directory (default: TRAINLET_HOME)");
  coordinator->add_option("--timeout", a->timeout, "Seconds before SIGKILL")->capture_default_str();
  coordinator->callback([&common, &rc, a] {
    if (a->dir.empty()) a->dir = ResolveHome(common.home);
    auto st = LocalRestartCoordinator(std::filesystem::absolute(a->dir).lexically_normal().string(),
                                      a->timeout);
    if (!st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      rc = 1;
    }
  });
}

void AddLocalCommand(CLI::App& app, CommonFlags& common, int& rc) {
  auto* local = app.add_subcommand(
      "local", "A coordinator and agents on this machine, for trying trainlet and for tests");
  local->require_subcommand(1);
  AddLocalUpCommand(*local, common, rc);
  AddLocalDownCommand(*local, common, rc);
  AddLocalRestartCommand(*local, common, rc);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "trainletctl: run Kubeflow Trainer v2 TrainJobs on a trainlet cluster.\n\n"
      "Start a cluster on this machine and run a job:\n"
      "  eval $(trainletctl local up --agents 2)\n"
      "  trainletctl get nodes\n"
      "  trainletctl apply -f examples/hello/trainjob.yaml\n"
      "  trainletctl wait trainjob/hello --for=condition=Complete --timeout=60s\n"
      "  trainletctl logs hello\n"
      "  trainletctl apply -f job.yaml --wait        # submit and block until it ends, as sbatch "
      "--wait\n"
      "  trainletctl local down\n\n"
      "The client configuration (coordinator endpoint and keys) lives in TRAINLET_HOME\n"
      "(default ~/.trainlet), or in the directory given with --home."};
  app.set_version_flag("--version", std::string("trainletctl ") + TRAINLET_VERSION);
  app.require_subcommand(1);
  CommonFlags common;
  app.add_option("--home", common.home, "Client configuration directory (overrides TRAINLET_HOME)");
  app.add_option("--request-timeout", common.request_timeout_ms,
                 "How long one request waits for the coordinator's answer, e.g. 5s (default 15s)")
      ->transform(CLI::Validator(
          [](std::string& v) -> std::string {
            const int64_t ms = ParseDuration(v);
            if (ms <= 0) return "not a duration above 0 (e.g. 5s, 500ms): " + v;
            v = std::to_string(ms);
            return "";
          },
          ""))
      ->type_name("DURATION");

  int rc = 0;

  AddGetCommand(app, common, rc);
  AddDescribeCommand(app, common, rc);
  AddApplyCommand(app, common, rc);
  AddDeleteCommand(app, common, rc);
  AddSuspendCommands(app, common, rc);
  AddAdmitCheckCommand(app, common, rc);
  AddNodeCommands(app, common, rc);
  AddWaitCommand(app, common, rc);
  AddLogsCommand(app, common, rc);
  AddKeysCommand(app, rc);
  AddLocalCommand(app, common, rc);
  AddRendezvousCommand(app, rc);  // put|get|fence, for ranks that are shell scripts

  // Every command's output, help included, goes through WriteAll (output_writer.h): written
  // whole even to a non-blocking stdout, or the command fails saying so, never exit 0 with
  // nothing printed.
  trainlet::cli::FdOutputBuffer out(STDOUT_FILENO);
  std::streambuf* const stdout_buf = std::cout.rdbuf(&out);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    rc = app.exit(e);
  }
  std::cout.rdbuf(stdout_buf);
  if (out.status().ok()) return rc;
  if (out.broken_pipe()) return rc != 0 ? rc : 141;  // the reader left (`| head`), as logs does
  std::cerr << "trainletctl: cannot write to standard output: " << out.status().message() << "\n";
  return rc != 0 ? rc : 1;
}
