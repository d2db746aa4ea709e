#include "trainletctl/local_cluster.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/curve_keys.h"
#include "common/platform/env.h"
#include "common/platform/process_info.h"
#include "trainletctl/client_config.h"
#include "trainletctl/coordinator_client.h"
#include "trainletctl/local_cluster_layout.h"

extern char** environ;

namespace trainlet::cli {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// `s` as one word for a POSIX shell, for `eval "$(trainletctl local up ...)"`: single quotes,
// each ' inside written as '\''; a dir holding a space or a $(...) stays that dir.
std::string ShellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string SelfDir() {
  const std::string exe = platform::ExecutablePath();
  return exe.empty() ? "." : fs::path(exe).parent_path().string();
}

// The daemons sit next to trainletctl, both in a build tree (build/bin) and when installed.
Result<std::string> FindBinary(const std::string& name) {
  const std::string beside = SelfDir() + "/" + name;
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return NotFoundError(name + " not found next to trainletctl in " + SelfDir());
}

std::string FindRuntimesDir() {
  for (const std::string& d :
       {SelfDir() + "/../share/trainlet/runtimes", std::string(TRAINLET_SOURCE_RUNTIMES_DIR)}) {
    if (fs::is_directory(d)) return fs::canonical(d).string();
  }
  return "";
}

// The start time a pid file records with the pid (platform::ProcessStartTime); "" when gone.
std::string StartTimeText(pid_t pid) {
  const auto start = platform::ProcessStartTime(pid);
  return start ? std::to_string(*start) : "";
}

bool IsZombieOrGone(pid_t pid) {
  return !platform::ProcessStartTime(pid) || platform::IsZombie(pid);
}

// How an agent's own hostname came about (SpawnInOwnUts's report byte).
enum class UtsOutcome : char { kOwn = 'u', kOwnUserNamespace = 'n', kShared = 'x' };

// In the forked child of SpawnInOwnUts, before exec: a UTS namespace of its own with `hostname`.
// As root the UTS namespace alone; otherwise inside a user namespace of its own that maps only
// this user and group to themselves, which gives the right to name the host and nothing on the
// host. Only async-signal-safe calls (the parent may have threads); the map texts are made by
// the parent.
UtsOutcome EnterOwnUts(const std::string& hostname, const std::string& hosts_file,
                       const std::string& uid_map, const std::string& gid_map) {
  auto write_file = [](const char* path, const std::string& text) {
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    return ok;
  };
  UtsOutcome outcome = UtsOutcome::kOwn;
  if (unshare(CLONE_NEWUTS | CLONE_NEWNS) != 0) {
    if (unshare(CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWNS) != 0) return UtsOutcome::kShared;
    // setgroups must be denied before an unprivileged gid_map is written.
    if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", uid_map) ||
        !write_file("/proc/self/gid_map", gid_map)) {
      return UtsOutcome::kShared;  // the namespace is unusable: exec fails, or runs as nobody
    }
    outcome = UtsOutcome::kOwnUserNamespace;
  }
  if (sethostname(hostname.data(), hostname.size()) != 0) return UtsOutcome::kShared;
  // The new name resolves (to the agent's address) for programs that look their host up, as
  // gloo does: /etc/hosts with its line, bound over the host's in a mount namespace that still
  // sees the host's later mounts (slave) but gives it none back. Without it the name stays
  // unresolved; MPI does not need it.
  if (mount("none", "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0) {
    (void)mount(hosts_file.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr);
  }
  return outcome;
}

// SpawnDaemon's start for an agent: fork, then in the child its own session, stdio, UTS
// namespace and hostname, and exec. Writes one UtsOutcome byte to a pipe before exec; the parent
// reads it, so the outcome is known when this returns.
Result<pid_t> SpawnInOwnUts(const std::vector<std::string>& argv, const std::string& log,
                            const std::string& hostname, const std::string& hosts_file,
                            UtsOutcome* outcome) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1\n";
  const std::string gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1\n";
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(report[0]);
    close(report[1]);
    return InternalError("cannot start " + argv[0] + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    setsid();
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(127);
    const char done = static_cast<char>(EnterOwnUts(hostname, hosts_file, uid_map, gid_map));
    (void)!write(report[1], &done, 1);
    execve(args[0], args.data(), environ);
    static const char kFailed[] = "local up: exec of the agent failed\n";
    (void)!write(2, kFailed, sizeof kFailed - 1);
    _exit(127);
  }
  close(report[1]);
  char got = static_cast<char>(UtsOutcome::kShared);
  while (read(report[0], &got, 1) < 0 && errno == EINTR) {
  }
  close(report[0]);
  *outcome = static_cast<UtsOutcome>(got);
  return pid;
}

// Starts a daemon in its own session (so it outlives this command), output to `log`.
Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return InternalError("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

Status WritePidFile(const std::string& path, pid_t pid) {
  std::ofstream out(path, std::ios::trunc);
  out << pid << " " << StartTimeText(pid) << "\n";
  if (!out.flush()) return IoError("cannot write " + path);
  return Status::Ok();
}

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line)) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "    " + all[i] + "\n";
  }
  return out;
}

// Reaps a daemon that died right away (we are its parent until we exit).
bool Died(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

// The value of a per-agent option for agent `i`: one per agent, or one for all; "" for none.
Result<std::string> PerAgent(const std::vector<std::string>& values, int i, int agents,
                             const char* flag) {
  if (values.empty()) return std::string();
  if (values.size() != 1 && static_cast<int>(values.size()) != agents) {
    return InvalidError(std::string(flag) + ": give one value per agent (" +
                        std::to_string(agents) + ") or a single value for all");
  }
  const std::string& v = values.size() == 1 ? values[0] : values[i];
  return v == "-" ? std::string() : v;
}

Status AddPerAgentOptions(const LocalUpOptions& o, int i, std::vector<std::string>& argv) {
  TRAINLET_ASSIGN_OR_RETURN(std::string labels, PerAgent(o.labels, i, o.agents, "--labels"));
  for (size_t start = 0; start < labels.size();) {
    size_t comma = labels.find(',', start);
    if (comma == std::string::npos) comma = labels.size();
    if (comma > start) argv.insert(argv.end(), {"--labels", labels.substr(start, comma - start)});
    start = comma + 1;
  }
  TRAINLET_ASSIGN_OR_RETURN(std::string taints, PerAgent(o.taints, i, o.agents, "--taints"));
  if (!taints.empty()) argv.insert(argv.end(), {"--taints", taints});
  TRAINLET_ASSIGN_OR_RETURN(std::string health,
                            PerAgent(o.health_checks, i, o.agents, "--health-check"));
  if (!health.empty()) {
    argv.insert(argv.end(), {"--health-check-program", fs::absolute(health).string()});
  }
  if (o.health_interval_ms > 0) {
    argv.insert(argv.end(), {"--health-check-interval-ms", std::to_string(o.health_interval_ms)});
  }
  TRAINLET_ASSIGN_OR_RETURN(std::string shared,
                            PerAgent(o.shared_dirs, i, o.agents, "--shared-dir"));
  if (!shared.empty()) argv.insert(argv.end(), {"--shared-dir", fs::absolute(shared).string()});
  return Status::Ok();
}

// The checks LocalUp makes before it creates anything.
Status CheckLocalUpOptions(const LocalUpOptions& o) {
  if (o.agents < 1 || o.agents > 250) return InvalidError("--agents: must be from 1 to 250");
  if (!o.topologies.empty() && static_cast<int>(o.topologies.size()) != o.agents &&
      o.topologies.size() != 1) {
    return InvalidError("--topology: give one file per agent (" + std::to_string(o.agents) +
                        ") or a single file for all");
  }
  for (const auto& t : o.topologies) {
    if (!fs::is_regular_file(t)) return InvalidError("--topology " + t + ": no such file");
  }
  const std::string& dir = o.dir;
  if (fs::exists(dir + "/pids/coordinator.pid")) {
    std::ifstream in(dir + "/pids/coordinator.pid");
    pid_t pid = 0;
    std::string start;
    in >> pid >> start;
    if (pid > 0 && StartTimeText(pid) == start) {
      return Status(ErrorCode::kExists, "a local cluster is already running in " + dir +
                                            " (stop it with: trainletctl local down --dir " + dir +
                                            ")");
    }
  }
  return Status::Ok();
}

// The cluster's dir and all under it are 0700 whatever the umask or the dir given (issue 19): it
// holds secret keys, the coordinator's database (job env) and the ranks' output.
Status MakeClusterDirs(const std::string& dir) {
  for (const char* sub : {"", "/keys", "/coordinator", "/agents", "/logs", "/pids"}) {
    if (Status s = platform::MakePrivateDirectory(dir + sub); !s.ok()) {
      return Status(s.code(), "--dir " + s.message());
    }
  }
  return Status::Ok();
}

// The key pair `name` in `keys`: the one there, so that a restarted cluster keeps its keys, or a
// new one.
Result<CurveKeyPair> MakeKey(const std::string& keys, const std::string& name) {
  const std::string path = keys + "/" + name + ".key";
  if (fs::exists(path)) return ReadKeyPair(path);
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair k, GenerateCurveKeyPair());
  TRAINLET_RETURN_IF_ERROR(WriteKeyPair(path, k));
  return k;
}

// Keys: one for the coordinator, one per agent, one for the operator; allowlists by role.
// Returns the agents' names, node-1 to node-N.
Result<std::vector<std::string>> MakeClusterKeys(const std::string& keys, int agents) {
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair coordinator_key, MakeKey(keys, "coordinator"));
  (void)coordinator_key;
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair operator_key, MakeKey(keys, "operator"));
  {
    std::ofstream(keys + "/operators.allow", std::ios::trunc)
        << "# operator public keys allowed on the operator endpoint\n";
    std::ofstream(keys + "/agents.allow", std::ios::trunc)
        << "# agent public keys allowed on the agent endpoint\n";
  }
  TRAINLET_RETURN_IF_ERROR(
      AppendToAllowlist(keys + "/operators.allow", operator_key.public_z85, "operator"));
  std::vector<std::string> names;
  for (int i = 1; i <= agents; ++i) {
    names.push_back("node-" + std::to_string(i));
    TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair k, MakeKey(keys, names.back()));
    TRAINLET_RETURN_IF_ERROR(AppendToAllowlist(keys + "/agents.allow", k.public_z85, names.back()));
  }
  return names;
}

struct CoordinatorEndpoints {
  std::string agent;
  std::string op;  // the operator endpoint
};

// The coordinator's command line for cluster `o`: port 0 on a new cluster, the ports it got the
// first time on a cluster started before (local_cluster_layout.h).
Result<std::vector<std::string>> CoordinatorArgv(const LocalUpOptions& o,
                                                 const std::string& coordinator_bin) {
  const std::string& dir = o.dir;
  const std::string keys = dir + "/keys";
  TRAINLET_ASSIGN_OR_RETURN(std::optional<CoordinatorListen> kept,
                            LoadCoordinatorListen(CoordinatorListenPath(dir)));
  const CoordinatorListen listen = kept.value_or(
      CoordinatorListen{"tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0"});
  // clang-format off
  std::vector<std::string> cargv = {coordinator_bin,
                                    "--state-dir", dir + "/coordinator",
                                    "--agent-listen", listen.agent,
                                    "--operator-listen", listen.op,
                                    "--exec-listen", listen.exec,
                                    "--metrics-address", "127.0.0.1:0",
                                    "--key", keys + "/coordinator.key",
                                    "--agent-allowlist", keys + "/agents.allow",
                                    "--operator-allowlist", keys + "/operators.allow",
                                    "--endpoints-file", dir + "/coordinator/endpoints.json",
                                    "--heartbeat-ms", std::to_string(o.heartbeat_ms),
                                    "--lost-timeout-ms", std::to_string(o.lost_timeout_ms)};
  // clang-format on
  if (o.partition_grace_ms > 0) {
    cargv.insert(cargv.end(), {"--partition-grace-ms", std::to_string(o.partition_grace_ms)});
  }
  if (o.stop_grace_ms >= 0) {
    cargv.insert(cargv.end(), {"--stop-grace-ms", std::to_string(o.stop_grace_ms)});
  }
  const std::string runtimes = FindRuntimesDir();
  if (!runtimes.empty()) cargv.insert(cargv.end(), {"--runtimes-dir", runtimes});
  return cargv;
}

std::string CoordinatorArgvPath(const std::string& dir) { return dir + "/coordinator-argv.json"; }

// Starts the coordinator of `dir` with `cargv` and waits (15 s at most) for the endpoints file in
// which it says which ports it bound. Keeps those ports (listen.json) and the command line
// (argv.json, with the bound ports in it) for `local restart coordinator`.
Result<CoordinatorEndpoints> RunCoordinator(const std::string& dir,
                                            std::vector<std::string> cargv) {
  const std::string endpoints = dir + "/coordinator/endpoints.json";
  fs::remove(endpoints);
  const std::string clog = dir + "/logs/coordinator.log";
  TRAINLET_ASSIGN_OR_RETURN(pid_t cpid, SpawnDaemon(cargv, clog));
  TRAINLET_RETURN_IF_ERROR(WritePidFile(dir + "/pids/coordinator.pid", cpid));
  CoordinatorEndpoints ep;
  std::string exec;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (ep.agent.empty()) {
    if (Died(cpid) || IsZombieOrGone(cpid)) {
      fs::remove(dir + "/pids/coordinator.pid");
      const bool kept_ports = fs::exists(CoordinatorListenPath(dir));
      return UnavailableError(
          "the coordinator exited at start; its log " + clog + " ends with:\n" + Tail(clog, 10) +
          (kept_ports
               ? "(it asked for the ports it had before, kept in " + CoordinatorListenPath(dir) +
                     "; if another program holds one now, remove that file and start the "
                     "cluster again, agents included)\n"
               : ""));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return UnavailableError("the coordinator did not start serving within 15 s; see " + clog);
    }
    std::ifstream in(endpoints);
    if (in) {
      try {
        auto j = nlohmann::json::parse(in);
        ep.agent = j.at("agent_endpoint").get<std::string>();
        ep.op = j.at("operator_endpoint").get<std::string>();
        exec = j.value("exec_endpoint", "");
      } catch (const std::exception&) {
      }
    }
    if (ep.agent.empty()) std::this_thread::sleep_for(20ms);
  }
  const CoordinatorListen bound{ep.agent, ep.op, exec.empty() ? "tcp://127.0.0.1:0" : exec};
  TRAINLET_RETURN_IF_ERROR(SaveCoordinatorListen(CoordinatorListenPath(dir), bound));
  for (size_t i = 0; i + 1 < cargv.size(); ++i) {
    if (cargv[i] == "--agent-listen") cargv[i + 1] = bound.agent;
    if (cargv[i] == "--operator-listen") cargv[i + 1] = bound.op;
    if (cargv[i] == "--exec-listen") cargv[i + 1] = bound.exec;
  }
  std::ofstream(CoordinatorArgvPath(dir), std::ios::trunc) << nlohmann::json(cargv).dump() << "\n";
  std::cerr << "coordinator: pid " << cpid << ", agents on " << ep.agent << ", operators on "
            << ep.op << "\n";
  return ep;
}

// A new cluster's store is initialised once, explicitly (issue 19, defect 3): the daemon, and
// any restart of it, refuses a store that holds nothing. On a cluster dir used before, the store
// keeps its cluster id.
Status InitStore(const std::string& dir, std::vector<std::string> init) {
  const std::string clog = dir + "/logs/coordinator.log";
  init.push_back("--init-store");
  TRAINLET_ASSIGN_OR_RETURN(pid_t ipid, SpawnDaemon(init, clog));
  int status = 0;
  while (waitpid(ipid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return UnavailableError("the coordinator's store could not be initialised; its log " + clog +
                            " ends with:\n" + Tail(clog, 10));
  }
  return Status::Ok();
}

Result<CoordinatorEndpoints> StartCoordinator(const LocalUpOptions& o,
                                              const std::string& coordinator_bin) {
  TRAINLET_ASSIGN_OR_RETURN(std::vector<std::string> cargv, CoordinatorArgv(o, coordinator_bin));
  TRAINLET_RETURN_IF_ERROR(InitStore(o.dir, cargv));
  return RunCoordinator(o.dir, std::move(cargv));
}

// The /etc/hosts an agent sees in its own mount namespace: the host's, and its own name.
Status WriteHostsFile(const std::string& path, const std::string& address,
                      const std::string& hostname) {
  std::ifstream host("/etc/hosts");
  std::ostringstream text;
  text << host.rdbuf();
  std::ofstream out(path, std::ios::trunc);
  out << text.str() << (text.str().empty() || text.str().back() == '\n' ? "" : "\n") << address
      << " " << hostname << "  # trainletctl local up\n";
  if (!out.flush()) return IoError("cannot write " + path);
  return Status::Ok();
}

Status StartAgents(const LocalUpOptions& o, const std::string& agent_bin,
                   const std::vector<std::string>& names, const std::string& agent_endpoint) {
  const std::string& dir = o.dir;
  const std::string keys = dir + "/keys";
  std::vector<std::string> shared;  // agents left with the host's own hostname
  for (int i = 0; i < o.agents; ++i) {
    const std::string& name = names[i];
    const std::string address = "127.0.0." + std::to_string(i + 2);
    // clang-format off
    std::vector<std::string> aargv = {agent_bin,
                                      "--name", name,
                                      "--address", address,
                                      "--coordinator", agent_endpoint,
                                      "--coordinator-key", keys + "/coordinator.key.pub",
                                      "--key", keys + "/" + name + ".key",
                                      "--state-dir", dir + "/agents/" + name,
                                      "--heartbeat-ms", std::to_string(o.heartbeat_ms),
                                      "--metrics-address", "127.0.0.1:0"};
    // clang-format on
    if (!o.topologies.empty()) {
      aargv.insert(
          aargv.end(),
          {"--topology-xml",
           fs::absolute(o.topologies.size() == 1 ? o.topologies[0] : o.topologies[i]).string()});
    }
    const uint32_t slots = LocalAgentSlots(o.slots, !o.topologies.empty(),
                                           std::max(1u, std::thread::hardware_concurrency()));
    if (slots != 0) aargv.insert(aargv.end(), {"--slots", std::to_string(slots)});
    TRAINLET_RETURN_IF_ERROR(AddPerAgentOptions(o, i, aargv));
    const std::string hostname = LocalAgentHostname(dir, name);
    const std::string hosts = dir + "/agents/" + name + ".hosts";
    TRAINLET_RETURN_IF_ERROR(WriteHostsFile(hosts, address, hostname));
    UtsOutcome uts = UtsOutcome::kShared;
    TRAINLET_ASSIGN_OR_RETURN(
        pid_t apid, SpawnInOwnUts(aargv, dir + "/logs/" + name + ".log", hostname, hosts, &uts));
    TRAINLET_RETURN_IF_ERROR(WritePidFile(dir + "/pids/" + name + ".pid", apid));
    if (uts == UtsOutcome::kShared) shared.push_back(name);
  }
  if (!shared.empty()) {
    // docs/runtimes.md (mpi): what sharing one hostname costs and how to avoid it.
    std::cerr << "warning: " << shared.size() << " agent(s) share this host's name (no UTS "
              << "namespace: not root, and unprivileged user namespaces are off); plain mpirun "
              << "across them can mix OpenMPI's shared memory: see docs/runtimes.md (mpi)\n";
  }
  return Status::Ok();
}

// Writes the client configuration, then asks the coordinator until every agent is Ready or
// o.timeout_s has passed.
Status WaitForReadyAgents(const LocalUpOptions& o, const std::string& operator_endpoint) {
  const std::string& dir = o.dir;
  ClientConfig config{dir, operator_endpoint, "keys/coordinator.key.pub", "keys/operator.key"};
  TRAINLET_RETURN_IF_ERROR(SaveClientConfig(config));
  TRAINLET_ASSIGN_OR_RETURN(ClientConfig loaded, LoadClientConfig(dir));
  TRAINLET_ASSIGN_OR_RETURN(auto client, CoordinatorClient::Connect(loaded));
  const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  while (true) {
    v1::OperatorRequest req;
    req.mutable_get_nodes();
    auto resp = client->Call(req, 5s);
    int ready = 0;
    if (resp.ok()) {
      for (const auto& n : resp->nodes().nodes()) ready += n.state() == "Ready";
    }
    if (ready >= o.agents) break;
    if (std::chrono::steady_clock::now() > ready_deadline) {
      return UnavailableError(std::to_string(ready) + " of " + std::to_string(o.agents) +
                              " agents became Ready within " + std::to_string(o.timeout_s) +
                              " s; see the logs in " + dir + "/logs");
    }
    std::this_thread::sleep_for(50ms);
  }
  return Status::Ok();
}

}  // namespace

Status LocalUp(const LocalUpOptions& o) {
  TRAINLET_RETURN_IF_ERROR(CheckLocalUpOptions(o));
  TRAINLET_ASSIGN_OR_RETURN(std::string coordinator_bin, FindBinary("trainlet-coordinator"));
  TRAINLET_ASSIGN_OR_RETURN(std::string agent_bin, FindBinary("trainlet-agent"));
  TRAINLET_RETURN_IF_ERROR(MakeClusterDirs(o.dir));
  TRAINLET_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            MakeClusterKeys(o.dir + "/keys", o.agents));
  TRAINLET_ASSIGN_OR_RETURN(CoordinatorEndpoints endpoints, StartCoordinator(o, coordinator_bin));
  TRAINLET_RETURN_IF_ERROR(StartAgents(o, agent_bin, names, endpoints.agent));
  TRAINLET_RETURN_IF_ERROR(WaitForReadyAgents(o, endpoints.op));
  std::cerr << o.agents << " agents Ready\n";
  std::cout << "export TRAINLET_HOME=" << ShellQuoted(o.dir) << "\n";
  return Status::Ok();
}

Status LocalDown(const std::string& dir, int timeout_s) {
  const std::string pids = dir + "/pids";
  if (!fs::is_directory(pids)) return NotFoundError("no local cluster in " + dir);
  std::vector<std::pair<std::string, pid_t>> live;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(pids)) files.push_back(e.path());
  // Agents first, so they stop their workers while the coordinator still listens.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const bool ac = a.stem() == "coordinator";
    const bool bc = b.stem() == "coordinator";
    return ac != bc ? bc : a < b;
  });
  for (const auto& f : files) {
    std::ifstream in(f);
    pid_t pid = 0;
    std::string start;
    in >> pid >> start;
    if (pid > 0 && !start.empty() && StartTimeText(pid) == start) {
      live.emplace_back(f.stem().string(), pid);
    }
  }
  auto stop = [&](const std::string& name, pid_t pid) {
    // SIGTERM would leave an agent's ranks running for the next agent (a restart); SIGUSR2 asks
    // it to stop them too before it exits, which is what taking the cluster down means.
    kill(pid, name == "coordinator" ? SIGTERM : SIGUSR2);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!IsZombieOrGone(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    if (!IsZombieOrGone(pid)) {
      std::cerr << name << " (pid " << pid << ") ignored SIGTERM for " << timeout_s
                << " s; sending SIGKILL\n";
      kill(pid, SIGKILL);
    }
    std::cerr << "stopped " << name << " (pid " << pid << ")\n";
  };
  // Agents in parallel would be faster; in order keeps the log readable and is quick enough.
  for (const auto& [name, pid] : live) stop(name, pid);
  for (const auto& f : files) fs::remove(f);
  std::cerr << "local cluster in " << dir << " is down (" << live.size() << " processes)\n";
  return Status::Ok();
}

Status LocalRestartCoordinator(const std::string& dir, int timeout_s) {
  std::ifstream in(CoordinatorArgvPath(dir));
  if (!in) {
    return NotFoundError("no coordinator command line in " + CoordinatorArgvPath(dir) +
                         " (no local cluster in " + dir +
                         ", or one started by an older trainletctl: take it down and up again)");
  }
  std::vector<std::string> cargv;
  try {
    cargv = nlohmann::json::parse(in).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return InvalidError(CoordinatorArgvPath(dir) + ": " + e.what());
  }
  if (cargv.empty()) return InvalidError(CoordinatorArgvPath(dir) + ": an empty command line");
  // The running one, if any: only the very process `local up` recorded.
  std::ifstream pid_in(dir + "/pids/coordinator.pid");
  pid_t pid = 0;
  std::string start;
  pid_in >> pid >> start;
  if (pid > 0 && !start.empty() && StartTimeText(pid) == start) {
    kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!IsZombieOrGone(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    if (!IsZombieOrGone(pid)) {
      std::cerr << "coordinator (pid " << pid << ") ignored SIGTERM for " << timeout_s
                << " s; sending SIGKILL\n";
      kill(pid, SIGKILL);
      while (!IsZombieOrGone(pid)) std::this_thread::sleep_for(20ms);
    }
    std::cerr << "stopped coordinator (pid " << pid << ")\n";
  }
  TRAINLET_ASSIGN_OR_RETURN(CoordinatorEndpoints ep, RunCoordinator(dir, std::move(cargv)));
  // The agents reconnect by themselves to the same ports; wait for those still running.
  LocalUpOptions o;
  o.dir = dir;
  o.agents = 0;
  o.timeout_s = std::max(timeout_s, 30);
  for (const auto& e : fs::directory_iterator(dir + "/pids")) {
    if (e.path().stem() == "coordinator") continue;
    std::ifstream f(e.path());
    pid_t apid = 0;
    std::string astart;
    f >> apid >> astart;
    if (apid > 0 && !astart.empty() && StartTimeText(apid) == astart) ++o.agents;
  }
  TRAINLET_RETURN_IF_ERROR(WaitForReadyAgents(o, ep.op));
  std::cerr << o.agents << " agents Ready\n";
  return Status::Ok();
}

}  // namespace trainlet::cli
