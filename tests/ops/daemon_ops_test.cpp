// The daemons as systemd and Prometheus see them: a real coordinator and agent, started with a
// NOTIFY_SOCKET this test owns and WATCHDOG_USEC set, must send READY=1 once serving (the agent
// only after registering), STATUS= lines, WATCHDOG=1 from their loops, and STOPPING=1 on
// SIGTERM; their /metrics must parse as the text format and move when a job runs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "tests/common/test_dir.h"
#include "tests/ops/exposition_parser.h"

extern char** environ;

namespace trainlet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
const std::string kBin = std::string(TRAINLET_BINARY_DIR) + "/bin/";

// The service manager's end of sd_notify: a datagram socket that learns each sender's pid.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << path;
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  }
  ~NotifySocket() { close(fd_); }

  // Waits until `pid` sent a datagram with `line` as one of its lines; every datagram is kept.
  bool WaitFor(pid_t pid, const std::string& line, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    size_t checked = 0;
    while (true) {
      for (; checked < got_.size(); ++checked) {
        if (got_[checked].first == pid && HasLine(got_[checked].second, line)) return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) > 0) Receive();
    }
  }
  int Count(pid_t pid, const std::string& line) {
    int n = 0;
    for (const auto& [p, text] : got_) n += p == pid && HasLine(text, line);
    return n;
  }
  // Every line `pid` sent starting with `prefix`.
  std::vector<std::string> Lines(pid_t pid, const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& [p, text] : got_) {
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) {
        if (p == pid && l.rfind(prefix, 0) == 0) out.push_back(l);
      }
    }
    return out;
  }
  void Drain() {
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) Receive();
  }

 private:
  static bool HasLine(const std::string& text, const std::string& line) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (l == line) return true;
    }
    return false;
  }
  void Receive() {
    char buf[4096];
    char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n < 0) return;
    pid_t pid = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        pid = cred.pid;
      }
    }
    got_.emplace_back(pid, std::string(buf, static_cast<size_t>(n)));
  }

  std::string path_;
  int fd_ = -1;
  std::vector<std::pair<pid_t, std::string>> got_;
};

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v(*e);
    // The test's own service manager (if any) is not the daemons'.
    if (v.rfind("NOTIFY_SOCKET=", 0) != 0 && v.rfind("WATCHDOG_", 0) != 0 &&
        v.rfind("JOURNAL_STREAM=", 0) != 0) {
      env.push_back(v);
    }
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()), 0) << args[0];
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Exit status of `pid`, or -1 if it is still running after `timeout` (then it is killed).
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(10ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Maps(pid_t pid, const std::string& library) {
  return ReadFile("/proc/" + std::to_string(pid) + "/maps").find(library) != std::string::npos;
}

bool MapsLibsystemd(pid_t pid) { return Maps(pid, "/libsystemd.so"); }

// GET over HTTP/1.0 with curl's absence in mind: a raw socket. Returns "" on failure.
std::string HttpGet(const std::string& address, const std::string& path, int* status) {
  const auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    (void)!write(fd, req.data(), req.size());
    char buf[8192];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  *status = out.size() > 12 ? std::atoi(out.substr(9, 3).c_str()) : 0;
  const auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

testing::Exposition Scrape(const std::string& address) {
  int status = 0;
  const std::string text = HttpGet(address, "/metrics", &status);
  EXPECT_EQ(status, 200) << address;
  testing::Exposition e;
  EXPECT_EQ(testing::ParseExposition(text, e), "") << text;
  return e;
}

// The bound metrics address the daemon logged ("" until it did).
std::string LoggedMetricsAddress(const std::string& log) {
  static const std::regex re("serving /metrics, /healthz and /readyz on http://([0-9.]+:[0-9]+)");
  std::smatch m;
  const std::string text = ReadFile(log);
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

class DaemonOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_ = dir_.File("keys");
    std::filesystem::create_directories(keys_);
    for (const char* name : {"coordinator", "node-1", "operator"}) {
      auto k = GenerateCurveKeyPair();
      ASSERT_TRUE(k.ok());
      ASSERT_TRUE(WriteKeyPair(keys_ + "/" + name + ".key", *k).ok());
      const std::string allow =
          std::string(name) == "operator" ? "/operators.allow" : "/agents.allow";
      if (std::string(name) != "coordinator") {
        ASSERT_TRUE(AppendToAllowlist(keys_ + allow, k->public_z85, name).ok());
      }
    }
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      if (kill(p, 0) == 0) {
        kill(p, SIGCONT);
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    }
    if (HasFailure()) {
      for (const char* log : {"coordinator.log", "agent.log"}) {
        std::cerr << "---- " << log << "\n" << ReadFile(dir_.File(log));
      }
    }
  }
  std::vector<std::string> NotifyEnv() {
    return {"NOTIFY_SOCKET=" + dir_.File("notify.sock"), "WATCHDOG_USEC=200000"};
  }
  pid_t StartCoordinator(const std::vector<std::string>& env) {
    // A new cluster's store is initialised once, explicitly (issue 19, defect 3).
    const std::string init = kBin + "trainlet-coordinator --init-store --state-dir " +
                             dir_.File("state") + " --key " + keys_ + "/coordinator.key" +
                             " --agent-allowlist " + keys_ + "/agents.allow" +
                             " --operator-allowlist " + keys_ + "/operators.allow >>" +
                             dir_.File("coordinator.log") + " 2>&1";
    EXPECT_EQ(std::system(init.c_str()), 0) << init;
    pid_t pid = Spawn({kBin + "trainlet-coordinator",
                       "--state-dir",
                       dir_.File("state"),
                       "--agent-listen",
                       "tcp://127.0.0.1:0",
                       "--operator-listen",
                       "tcp://127.0.0.1:0",
                       "--exec-listen",
                       "tcp://127.0.0.1:0",
                       "--key",
                       keys_ + "/coordinator.key",
                       "--agent-allowlist",
                       keys_ + "/agents.allow",
                       "--operator-allowlist",
                       keys_ + "/operators.allow",
                       "--runtimes-dir",
                       std::string(TRAINLET_SOURCE_DIR) + "/deploy/runtimes",
                       "--endpoints-file",
                       dir_.File("endpoints.json"),
                       "--heartbeat-ms",
                       "200",
                       "--metrics-address",
                       "127.0.0.1:0"},
                      env, dir_.File("coordinator.log"));
    pids_.push_back(pid);
    return pid;
  }
  pid_t StartAgent(const std::string& coordinator_endpoint) {
    pid_t pid = Spawn({kBin + "trainlet-agent", "--name", "node-1", "--coordinator",
                       coordinator_endpoint, "--coordinator-key", keys_ + "/coordinator.key.pub",
                       "--key", keys_ + "/node-1.key", "--state-dir", dir_.File("agent"), "--slots",
                       "4", "--heartbeat-ms", "200", "--metrics-address", "127.0.0.1:0"},
                      NotifyEnv(), dir_.File("agent.log"));
    pids_.push_back(pid);
    return pid;
  }
  int Ctl(const std::string& args) {
    const std::string cmd = kBin + "trainletctl --home " + dir_.File("home") + " " + args + " >>" +
                            dir_.File("ctl.log") + " 2>&1";
    return std::system(cmd.c_str());
  }

  testing::TempDir dir_;
  std::string keys_;
  std::vector<pid_t> pids_;
};

// One daemon's whole life under a fake systemd, step by step; long because each step needs the
// state the one before it left (the socket, the watchdog, the metrics seen so far).
TEST_F(DaemonOpsTest, NotifiesSystemdAndServesMetrics) {
  NotifySocket notify(dir_.File("notify.sock"));
  const pid_t coordinator = StartCoordinator(NotifyEnv());
  ASSERT_TRUE(notify.WaitFor(coordinator, "READY=1", 15s)) << "coordinator never READY";
  // READY comes after binding: the endpoints are written by then.
  auto endpoints = nlohmann::json::parse(ReadFile(dir_.File("endpoints.json")));
  const std::string agent_endpoint = endpoints.at("agent_endpoint");
  const std::string coordinator_metrics = endpoints.at("metrics_endpoint");
  ASSERT_NE(coordinator_metrics, "");
  EXPECT_EQ(notify.Count(coordinator, "STATUS=0 nodes Ready, 0 jobs running"), 1);
  // WATCHDOG_USEC=200000: a pet every 100 ms from the loop.
  ASSERT_TRUE(notify.WaitFor(coordinator, "WATCHDOG=1", 2s));
  std::this_thread::sleep_for(500ms);
  notify.Drain();
  EXPECT_GE(notify.Count(coordinator, "WATCHDOG=1"), 3);
  int status = 0;
  EXPECT_EQ(HttpGet(coordinator_metrics, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  HttpGet(coordinator_metrics, "/readyz", &status);
  EXPECT_EQ(status, 200);

  // A stopped coordinator cannot accept the registration: the agent must not claim READY.
  ASSERT_EQ(kill(coordinator, SIGSTOP), 0);
  const pid_t agent = StartAgent(agent_endpoint);
  std::string agent_metrics;
  for (auto end = Clock::now() + 10s; agent_metrics.empty() && Clock::now() < end;) {
    std::this_thread::sleep_for(20ms);
    agent_metrics = LoggedMetricsAddress(dir_.File("agent.log"));
  }
  ASSERT_NE(agent_metrics, "");
  EXPECT_FALSE(notify.WaitFor(agent, "READY=1", 1s)) << "READY before registering";
  HttpGet(agent_metrics, "/readyz", &status);
  EXPECT_EQ(status, 503);
  EXPECT_TRUE(notify.WaitFor(agent, "WATCHDOG=1", 1s)) << "the agent's loop runs meanwhile";
  ASSERT_EQ(kill(coordinator, SIGCONT), 0);
  ASSERT_TRUE(notify.WaitFor(agent, "READY=1", 10s));
  EXPECT_TRUE(notify.WaitFor(
      agent, "STATUS=registered with " + agent_endpoint + ", 0 workers running", 1s));
  HttpGet(agent_metrics, "/readyz", &status);
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(notify.WaitFor(coordinator, "STATUS=1 node Ready, 0 jobs running", 3s));

  // Baseline scrapes: every family there, parseable, nothing counted yet.
  auto c0 = Scrape(coordinator_metrics);
  for (const char* f : {"trainlet_coordinator_nodes", "trainlet_coordinator_jobs"}) {
    EXPECT_EQ(c0.types[f], "gauge") << f;
  }
  for (const char* f :
       {"trainlet_coordinator_launch_latency_seconds", "trainlet_coordinator_heartbeat_lag_seconds",
        "trainlet_coordinator_fence_seconds"}) {
    EXPECT_EQ(c0.types[f], "histogram") << f;
  }
  for (const char* f :
       {"trainlet_coordinator_workers_started_total", "trainlet_coordinator_workers_failed_total",
        "trainlet_coordinator_messages_dropped_total",
        "trainlet_coordinator_handshakes_refused_total"}) {
    EXPECT_EQ(c0.types[f], "counter") << f;
  }
  EXPECT_EQ(c0.Value("trainlet_coordinator_handshakes_refused_total", {{"role", "operator"}}), 0);
  EXPECT_EQ(c0.Value("trainlet_coordinator_nodes", {{"state", "Ready"}}), 1);
  EXPECT_EQ(c0.Value("trainlet_coordinator_workers_started_total"), 0);
  EXPECT_EQ(c0.Value("trainlet_coordinator_launch_latency_seconds_count"), 0);
  EXPECT_EQ(c0.Value("trainlet_coordinator_messages_dropped_total", {{"reason", "malformed"}}), 0);
  {
    // A client whose key no allowlist holds is refused, and counted by the endpoint's role.
    auto server = ReadKeyPair(keys_ + "/coordinator.key.pub");
    auto stranger = GenerateCurveKeyPair();
    ASSERT_TRUE(server.ok() && stranger.ok());
    zmq::context_t ctx;
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::reconnect_ivl, -1);  // one handshake: the count is exact
    s.set(zmq::sockopt::curve_serverkey, server->public_z85);
    s.set(zmq::sockopt::curve_publickey, stranger->public_z85);
    s.set(zmq::sockopt::curve_secretkey, stranger->secret_z85);
    s.connect(agent_endpoint);
    double refused = 0;
    for (auto until = std::chrono::steady_clock::now() + 5s;
         refused < 1 && std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(50ms)) {
      refused = Scrape(coordinator_metrics)
                    .Value("trainlet_coordinator_handshakes_refused_total", {{"role", "agent"}});
    }
    EXPECT_EQ(refused, 1);
  }
  auto a0 = Scrape(agent_metrics);
  EXPECT_EQ(a0.Value("trainlet_agent_registered"), 1);
  EXPECT_EQ(a0.Value("trainlet_agent_workers_started_total"), 0);
  EXPECT_GT(a0.Value("trainlet_agent_heartbeats_sent_total"), 0);
  EXPECT_EQ(a0.types["trainlet_agent_messages_dropped_total"], "counter");

  // Run a job of two ranks, one of which fails: the counters must move.
  std::filesystem::create_directories(dir_.File("home"));
  std::ofstream(dir_.File("home/config.yaml"))
      << "coordinator: " << endpoints.at("operator_endpoint").get<std::string>() << "\n"
      << "coordinator_key: " << keys_ << "/coordinator.key.pub\nkey: " << keys_
      << "/operator.key\n";
  std::ofstream(dir_.File("job.yaml"))
      << "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: m1\n"
         "spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 1\n"
         "    numProcPerNode: 2\n    command: [/bin/sh, -c, 'sleep 0.3; exit 0']\n";
  ASSERT_EQ(Ctl("apply -f " + dir_.File("job.yaml")), 0) << ReadFile(dir_.File("ctl.log"));
  ASSERT_EQ(Ctl("wait trainjob/m1 --for=condition=Complete --timeout=30s"), 0)
      << ReadFile(dir_.File("ctl.log"));
  auto c1 = Scrape(coordinator_metrics);
  EXPECT_EQ(c1.Value("trainlet_coordinator_workers_started_total"), 2);
  EXPECT_EQ(c1.Value("trainlet_coordinator_workers_failed_total"), 0);
  EXPECT_EQ(c1.Value("trainlet_coordinator_launch_latency_seconds_count"), 1);
  EXPECT_GT(c1.Value("trainlet_coordinator_launch_latency_seconds_sum"), 0);
  EXPECT_LT(c1.Value("trainlet_coordinator_launch_latency_seconds_sum"), 30);
  EXPECT_EQ(c1.Value("trainlet_coordinator_jobs", {{"phase", "Succeeded"}}), 1);
  EXPECT_EQ(c1.Value("trainlet_coordinator_jobs"), 1);  // summed over phases
  EXPECT_GT(c1.Value("trainlet_coordinator_heartbeat_lag_seconds_count"),
            c0.Value("trainlet_coordinator_heartbeat_lag_seconds_count"));
  auto a1 = Scrape(agent_metrics);
  EXPECT_EQ(a1.Value("trainlet_agent_workers_started_total"), 2);
  EXPECT_EQ(a1.Value("trainlet_agent_workers_running"), 0);
  EXPECT_GT(a1.Value("trainlet_agent_heartbeats_sent_total"),
            a0.Value("trainlet_agent_heartbeats_sent_total"));

  std::ofstream(dir_.File("fail.yaml"))
      << "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: m2\n"
         "spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 1\n"
         "    numProcPerNode: 1\n    command: [/bin/sh, -c, 'exit 3']\n";
  ASSERT_EQ(Ctl("apply -f " + dir_.File("fail.yaml")), 0);
  Ctl("wait trainjob/m2 --for=condition=Failed --timeout=60s");
  auto c2 = Scrape(coordinator_metrics);
  EXPECT_GE(c2.Value("trainlet_coordinator_workers_failed_total", {{"reason", "exit_code"}}), 1);
  auto a2 = Scrape(agent_metrics);
  EXPECT_GE(a2.Value("trainlet_agent_workers_failed_total", {{"reason", "exit_code"}}), 1);

  // The watchdog is read with libsystemd, loaded for it.
  EXPECT_TRUE(MapsLibsystemd(agent));
  EXPECT_TRUE(MapsLibsystemd(coordinator));
  // The agent serves /metrics with its own event-driven server (agent/agent_ops.cpp), as it
  // does the progress port: one HTTP stack, and no libcpp-httplib.so (issue 15).
  EXPECT_FALSE(Maps(agent, "/libcpp-httplib.so"));
#if TRAINLET_EXPECT_STATIC_AGENT
  // Linked with its C++ libraries as archives (cmake/TrainletStaticAgent.cmake), after topology
  // discovery, registration and a job: no shared C++ library of its own was loaded, not even by
  // hwloc. libstdc++.so is back on the list now that no shared cpp-httplib needs it; and no
  // MIT Kerberos for libzmq's unused GSSAPI mechanism (common/static/zmq_gssapi_stubs.cpp).
  for (const char* library : {"/libzmq.so", "/libspdlog.so", "/libyaml-cpp.so", "/libxml2.so",
                              "/libstdc++.so", "/libgssapi_krb5.so", "/libkrb5.so"}) {
    EXPECT_FALSE(Maps(agent, library)) << library;
  }
#endif

  // SIGTERM: STOPPING=1, then a clean exit.
  ASSERT_EQ(kill(agent, SIGTERM), 0);
  EXPECT_TRUE(notify.WaitFor(agent, "STOPPING=1", 5s));
  EXPECT_EQ(WaitExit(agent, 15s), 0);
  ASSERT_EQ(kill(coordinator, SIGTERM), 0);
  EXPECT_TRUE(notify.WaitFor(coordinator, "STOPPING=1", 5s));
  EXPECT_EQ(WaitExit(coordinator, 15s), 0);
  EXPECT_EQ(notify.Count(coordinator, "READY=1"), 1);
  EXPECT_EQ(notify.Count(agent, "READY=1"), 1);
}

// Started by something other than systemd (no watchdog, stderr not the journal), a daemon does
// not load libsystemd and the libraries it brings (common/systemd_library.h).
TEST_F(DaemonOpsTest, OutsideSystemdLibsystemdIsNotLoaded) {
  const pid_t coordinator = StartCoordinator({});
  for (auto end = Clock::now() + 15s;
       !std::filesystem::exists(dir_.File("endpoints.json")) && Clock::now() < end;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(std::filesystem::exists(dir_.File("endpoints.json"))) << "coordinator never bound";
  EXPECT_FALSE(MapsLibsystemd(coordinator));
}

#if TRAINLET_EXPECT_STATIC_AGENT
// The shared libraries the dynamic loader maps for `binary`, as ldd lists them (ld.so's trace
// mode: the binary itself does not run).
std::string LoadedLibraries(const std::string& binary) {
  std::string out;
  FILE* p = popen(("LD_TRACE_LOADED_OBJECTS=1 " + binary + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// The commands started once per use (trainletctl per command, trainlet-exec per remote node of an
// mpirun) load no MIT Kerberos for libzmq's GSSAPI mechanism, nor a shared C++ library: seven
// libraries fewer for the dynamic loader at each start (common/static/zmq_gssapi_stubs.cpp).
TEST(StaticCommandsTest, TrainletctlAndExecLoadNoKerberosAndNoSharedCxxLibrary) {
  for (const char* command : {"trainletctl", "trainlet-exec"}) {
    const std::string libraries = LoadedLibraries(kBin + command);
    ASSERT_NE(libraries.find("libc.so"), std::string::npos) << command << ":\n" << libraries;
    for (const char* library : {"libgssapi_krb5.so", "libkrb5.so", "libk5crypto.so", "libstdc++.so",
                                "libzmq.so", "libyaml-cpp.so"}) {
      EXPECT_EQ(libraries.find(library), std::string::npos)
          << command << " loads " << library << ":\n"
          << libraries;
    }
  }
}
#endif

}  // namespace
}  // namespace trainlet
