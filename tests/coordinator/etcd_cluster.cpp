#include "tests/coordinator/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "coordinator/etcd_client.h"

namespace trainlet::testing {

using coordinator::EtcdClient;
using coordinator::EtcdClientConfig;

namespace {

// A port the kernel says is free now. Closed again before etcd binds it: a small race that the
// caller's readiness wait would report.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

std::string EtcdCluster::Binary() {
  const char* env = std::getenv("TRAINLET_ETCD");
  std::string path = env != nullptr ? env : "/usr/bin/etcd";
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

bool EtcdCluster::MakeTls(const std::string& dir, Tls* tls) {
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string quiet = " >/dev/null 2>&1";
  const std::string d = dir + "/";
  const std::vector<std::string> steps = {
      "openssl req -x509" + ec + " -keyout " + d + "ca.key -out " + d +
          "ca.pem -days 1 -subj /CN=trainlet-test-ca",
      "openssl req" + ec + " -keyout " + d + "server.key -out " + d +
          "server.csr -subj /CN=etcd -addext subjectAltName=IP:127.0.0.1",
      "openssl x509 -req -in " + d + "server.csr -CA " + d + "ca.pem -CAkey " + d +
          "ca.key -CAcreateserial -days 1 -copy_extensions copy -out " + d + "server.pem",
      "openssl req" + ec + " -keyout " + d + "client.key -out " + d +
          "client.csr -subj /CN=coordinator",
      "openssl x509 -req -in " + d + "client.csr -CA " + d + "ca.pem -CAkey " + d +
          "ca.key -CAcreateserial -days 1 -out " + d + "client.pem",
  };
  for (const auto& step : steps) {
    if (std::system((step + quiet).c_str()) != 0) return false;
  }
  *tls = Tls{d + "ca.pem", d + "server.pem", d + "server.key", d + "client.pem", d + "client.key"};
  return true;
}

std::unique_ptr<EtcdCluster> EtcdCluster::Start(int members, std::string* error, const Tls* tls) {
  if (Binary().empty()) {
    *error = "etcd is not installed (/usr/bin/etcd, from Debian's etcd-server)";
    return nullptr;
  }
  // As the coordinator does: EtcdClient's writes to a member that closed the connection (a
  // killed member, a refused TLS handshake) would raise SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<EtcdCluster> c(new EtcdCluster());
  char tmpl[] = "/tmp/trainlet-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  c->root_ = tmpl;
  if (tls != nullptr) c->tls_ = *tls;
  const std::string scheme = tls != nullptr ? "https" : "http";
  c->token_ = "trainlet-test-" + std::to_string(getpid()) + "-" + c->root_.substr(19);
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_url = scheme + "://127.0.0.1:" + std::to_string(FreePort());
    m.peer_url = "http://127.0.0.1:" + std::to_string(FreePort());
    m.data_dir = c->root_ + "/" + m.name;
    m.log_file = c->root_ + "/" + m.name + ".log";
    c->initial_cluster_ += (i == 0 ? "" : ",") + m.name + "=" + m.peer_url;
    c->members_.push_back(m);
  }
  for (auto& m : c->members_) {
    if (!c->Spawn(m)) {
      *error = "cannot start etcd member " + m.name;
      return nullptr;
    }
  }
  // Ready when a linearizable read is served (a leader is elected).
  EtcdClientConfig config;
  config.endpoints = c->client_urls();
  config.request_timeout = std::chrono::milliseconds(1000);
  if (tls != nullptr) {
    config.ca_file = tls->ca;
    config.cert_file = tls->client_cert;
    config.key_file = tls->client_key;
  }
  auto client = EtcdClient::Create(config);
  if (!client.ok()) {
    *error = client.status().ToString();
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = (*client)->Range("/ready", "");
    if (r.ok()) return c;
    last = r.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *error = "etcd did not become ready in 20 s: " + last + "\n" + c->LogTail(0);
  return nullptr;
}

bool EtcdCluster::Spawn(Member& m) {
  std::vector<std::string> args = {
      Binary(),
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + m.client_url,
      "--advertise-client-urls=" + m.client_url,
      "--listen-peer-urls=" + m.peer_url,
      "--initial-advertise-peer-urls=" + m.peer_url,
      "--initial-cluster=" + initial_cluster_,
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + token_,
      "--heartbeat-interval=50",
      "--election-timeout=500",
      "--logger=zap",
      "--log-outputs=stderr",
  };
  if (tls_) {
    args.push_back("--cert-file=" + tls_->server_cert);
    args.push_back("--key-file=" + tls_->server_key);
    args.push_back("--trusted-ca-file=" + tls_->ca);
    args.push_back("--client-cert-auth");
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // The member must not outlive a test process that crashed or was killed.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int fd = open(m.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  m.pid = pid;
  return true;
}

std::vector<std::string> EtcdCluster::client_urls() const {
  std::vector<std::string> out;
  for (const auto& m : members_) out.push_back(m.client_url);
  return out;
}

bool EtcdCluster::WaitServing(int i, int timeout_ms) const {
  EtcdClientConfig config;
  config.endpoints = {members_[i].client_url};
  config.request_timeout = std::chrono::milliseconds(500);
  auto client = EtcdClient::Create(config);
  if (!client.ok()) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if ((*client)->Range("/ready", "").ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int EtcdCluster::Leader() const {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].pid <= 0) continue;
    EtcdClientConfig config;
    config.endpoints = {members_[i].client_url};
    config.request_timeout = std::chrono::milliseconds(1000);
    auto client = EtcdClient::Create(config);
    if (!client.ok()) continue;
    auto leads = (*client)->FirstEndpointIsLeader();
    if (leads.ok() && *leads) return i;
  }
  return -1;
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGKILL);
  int status = 0;
  waitpid(m.pid, &status, 0);
  m.pid = -1;
}

bool EtcdCluster::Restart(int i) {
  Kill(i);
  return Spawn(members_[i]);
}

std::string EtcdCluster::LogTail(int i) const {
  std::ifstream in(members_[i].log_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill(i);
  if (!root_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
}

}  // namespace trainlet::testing
