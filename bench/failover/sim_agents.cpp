// trainlet-sim-agents: many light agents in one process, for bench/failover. Each one is a real
// CURVE client with its own key pair and speaks the agent protocol: it registers with a NodeInfo,
// heartbeats, and registers again when the coordinator does not know it (after a restart). It
// runs no workers.
//
// Measurement: on SIGUSR1 every agent forgets that it was accepted, and the program prints
// "marked"; once each agent has had a registration accepted again it prints
// "reregistered <count> last_unix_ms=<ms>". The driver (bench/failover/run.sh) sends SIGUSR1, kills
// and restarts the coordinator, and subtracts the restart time from last_unix_ms.
//
// Several coordinators (--endpoint a,b: high availability on etcd, issue 17): each agent talks to
// one at a time, as trainlet-agent does: a not_leader refusal naming a leader sends it there (a
// new socket), one naming no leader is answered by registering again after 250 ms, and a
// registered agent whose coordinator is silent for three heartbeats moves to the next endpoint, and
// so does one whose coordinator closes the connection (killed), at once. Real agents each watch
// their own connection (CoordinatorLink's handshake monitor); here one monitored probe connection
// per endpoint stands for them all, so 1,000 agents need no 1,000 monitors.
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/handshake_monitor.h"
#include "common/wall_clock.h"
#include "common/zmq_sockets.h"

namespace trainlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct SimAgent {
  std::string name;
  zmq::socket_t socket;
  size_t key = 0;        // index of its key pair
  std::string endpoint;  // connected to now
  size_t next_endpoint = 1;
  Clock::time_point last_heard{};
  Clock::time_point moved_at{};  // when it connected to `endpoint`
  std::string left_silent;       // the endpoint last left for its silence, and when
  Clock::time_point left_at{};
  bool registered = false;
  bool accepted_since_mark = false;
  uint64_t seq = 0;
  Clock::time_point next_register{};
  Clock::time_point next_beat{};
};

v1::Envelope RegisterMessage(const std::string& name) {
  v1::Envelope env;
  v1::NodeInfo* info = env.mutable_register_();
  info->set_name(name);
  info->set_address("127.0.0.1");
  info->set_hostname(name);
  info->set_slots(1);
  info->set_agent_version("sim");
  v1::Topology* topo = info->mutable_topology();
  topo->set_packages(1);
  topo->set_cores(1);
  topo->set_pus(1);
  topo->set_memory_bytes(uint64_t{1} << 30);
  topo->set_source("simulated");
  return env;
}

void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// The node name of simulated agent `i`: the name it is enrolled under and the name it registers
// (the coordinator lets a key register only the name its allowlist line gives it).
std::string SimAgentName(const std::string& prefix, int i) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%04d", prefix.c_str(), i);
  return name;
}

int Run(int count, const std::string& endpoint, const std::string& server_key_file,
        const std::string& allowlist, int heartbeat_ms, const std::string& prefix) {
  RaiseFileLimit();
  auto server = ReadKeyPair(server_key_file);
  if (!server.ok()) {
    std::fprintf(stderr, "--server-key: %s\n", server.status().message().c_str());
    return 2;
  }
  const std::string server_key = server->public_z85;
  std::vector<CurveKeyPair> keys;
  keys.reserve(count);
  for (int i = 0; i < count; ++i) {
    auto k = GenerateCurveKeyPair();
    if (!k.ok()) {
      std::fprintf(stderr, "key generation: %s\n", k.status().message().c_str());
      return 1;
    }
    keys.push_back(*k);
    if (Status s = AppendToAllowlist(allowlist, k->public_z85, SimAgentName(prefix, i)); !s.ok()) {
      std::fprintf(stderr, "--allowlist: %s\n", s.message().c_str());
      return 2;
    }
  }
  zmq::context_t ctx;
  ctx.set(zmq::ctxopt::max_sockets, count + 64);
  const std::vector<std::string> endpoints = SplitEndpointList(endpoint);
  if (endpoints.empty()) {
    std::fprintf(stderr, "--endpoint: none given\n");
    return 2;
  }
  std::vector<SimAgent> agents;
  agents.reserve(count);
  for (int i = 0; i < count; ++i) {
    auto s = ConnectCurveDealer(ctx, endpoints[0], server_key, keys[i]);
    if (!s.ok()) {
      std::fprintf(stderr, "connect: %s\n", s.status().message().c_str());
      return 1;
    }
    SimAgent a;
    a.name = SimAgentName(prefix, i);
    a.socket = std::move(*s);
    a.key = static_cast<size_t>(i);
    a.endpoint = endpoints[0];
    agents.push_back(std::move(a));
  }
  // One probe connection per endpoint, under agent 0's key: its monitor sees the coordinator
  // close the connection when it dies.
  std::vector<zmq::socket_t> probes;
  std::vector<std::unique_ptr<HandshakeMonitor>> probe_monitors;
  probes.reserve(endpoints.size());
  for (size_t e = 0; e < endpoints.size() && endpoints.size() > 1; ++e) {
    auto s = ConnectCurveDealer(ctx, endpoints[e], server_key, keys[0]);
    if (!s.ok()) continue;
    probes.push_back(std::move(*s));
    probe_monitors.push_back(
        std::make_unique<HandshakeMonitor>(ctx, probes.back(), "sim-probe-" + std::to_string(e)));
  }
  // A new socket to `to` (a send right after a disconnect may take the old pipe).
  auto move_to = [&](SimAgent& a, const std::string& to, zmq_pollitem_t& item) {
    auto s = ConnectCurveDealer(ctx, to, server_key, keys[a.key]);
    if (!s.ok()) return;
    a.socket.set(zmq::sockopt::linger, 0);
    a.socket = std::move(*s);
    a.endpoint = to;
    a.registered = false;
    a.next_register = Clock::now();
    a.last_heard = Clock::now();
    a.moved_at = a.last_heard;
    item.socket = a.socket.handle();
  };

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  const int sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);

  const size_t probes_at = agents.size() + 1;  // the probes' monitors follow the signal fd
  std::vector<zmq_pollitem_t> items(probes_at + probe_monitors.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    items[i] = {agents[i].socket.handle(), 0, ZMQ_POLLIN, 0};
  }
  items[agents.size()] = {nullptr, sig_fd, ZMQ_POLLIN, 0};
  for (size_t e = 0; e < probe_monitors.size(); ++e) {
    items[probes_at + e] = {probe_monitors[e]->handle(), 0, ZMQ_POLLIN, 0};
  }
  const auto beat = std::chrono::milliseconds(heartbeat_ms);
  DropCounters drops;
  bool marked = false;
  bool printed_ready = false;
  int accepted_after_mark = 0;
  for (;;) {
    const auto now = Clock::now();
    int registered = 0;
    for (size_t i = 0; i < agents.size(); ++i) {
      SimAgent& a = agents[i];
      if (endpoints.size() > 1 && a.last_heard != Clock::time_point{} &&
          now - a.last_heard > 3 * beat && now - a.last_heard > std::chrono::milliseconds(500)) {
        std::string to = endpoints[a.next_endpoint++ % endpoints.size()];
        if (to == a.endpoint) to = endpoints[a.next_endpoint++ % endpoints.size()];
        a.left_silent = a.endpoint;
        a.left_at = now;
        move_to(a, to, items[i]);
      }
      if (!a.registered && now >= a.next_register) {
        v1::Envelope env = RegisterMessage(a.name);
        // Sent: resent after 2 s without an answer, as the agent's register_retry. Not sent (the
        // CURVE handshake of a new connection is not done: the socket is `immediate`): tried again
        // on the next turn, as trainlet-agent sends its registration the moment its handshake
        // monitor reports success. Waiting 2 s here instead made a move to a new leader look 2 s
        // per missed handshake slower than real agents are.
        a.next_register = SendOnDealer(a.socket, env) ? now + std::chrono::seconds(2) : now;
      } else if (a.registered && now >= a.next_beat) {
        v1::Envelope env;
        env.mutable_heartbeat()->set_node(a.name);
        env.mutable_heartbeat()->set_seq(++a.seq);
        env.mutable_heartbeat()->set_sent_unix_ms(NowUnixMs());
        env.mutable_heartbeat()->set_healthy(true);
        SendOnDealer(a.socket, env);
        a.next_beat = now + beat;
      }
      registered += a.registered ? 1 : 0;
    }
    if (!printed_ready && registered == count) {
      std::printf("registered %d\n", count);
      std::fflush(stdout);
      printed_ready = true;
    }
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(10));
    for (size_t e = 0; e < probe_monitors.size(); ++e) {
      if (!(items[probes_at + e].revents & ZMQ_POLLIN)) continue;
      while (auto event = probe_monitors[e]->Read()) {
        if (*event != HandshakeEvent::kDisconnected) continue;
        // Every agent of that coordinator that had heard from it moves on now.
        const auto at = Clock::now();
        for (size_t i = 0; i < agents.size(); ++i) {
          SimAgent& a = agents[i];
          if (a.endpoint != endpoints[e] || a.last_heard <= a.moved_at) continue;
          std::string to = endpoints[a.next_endpoint++ % endpoints.size()];
          if (to == a.endpoint) to = endpoints[a.next_endpoint++ % endpoints.size()];
          a.left_silent = a.endpoint;
          a.left_at = at;
          move_to(a, to, items[i]);
        }
      }
    }
    if (items[agents.size()].revents & ZMQ_POLLIN) {
      signalfd_siginfo info{};
      while (read(sig_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo != SIGUSR1) return 0;
        for (SimAgent& a : agents) a.accepted_since_mark = false;
        marked = true;
        accepted_after_mark = 0;
        std::printf("marked\n");
        std::fflush(stdout);
      }
    }
    for (size_t i = 0; i < agents.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      SimAgent& a = agents[i];
      while (auto env = ReceiveFromDealer(a.socket, drops)) {
        a.last_heard = Clock::now();
        if (!env->has_register_ack()) continue;  // heartbeat acks, plans: nothing to do
        const v1::RegisterAck& ack = env->register_ack();
        if (!ack.accepted() && ack.not_leader()) {  // a follower: to the leader, or wait
          a.registered = false;
          // A follower names the dead leader until its lease ends: not the one just left.
          const bool stale = ack.leader_endpoint() == a.left_silent &&
                             Clock::now() - a.left_at < std::chrono::seconds(10);
          if (!ack.leader_endpoint().empty() && ack.leader_endpoint() != a.endpoint && !stale) {
            move_to(a, ack.leader_endpoint(), items[i]);
            break;  // the old socket is gone
          }
          a.next_register = Clock::now() + std::chrono::milliseconds(250);
          continue;
        }
        if (!env->register_ack().accepted()) {
          a.registered = false;  // "unknown node: register again"
          a.next_register = Clock::now();
          continue;
        }
        a.registered = true;
        a.next_beat = Clock::now() + beat;
        if (marked && !a.accepted_since_mark) {
          a.accepted_since_mark = true;
          if (++accepted_after_mark == count) {
            std::printf("reregistered %d last_unix_ms=%lld\n", count,
                        static_cast<long long>(NowUnixMs()));
            std::fflush(stdout);
            marked = false;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace trainlet::bench

int main(int argc, char** argv) {
  CLI::App app{
      "trainlet-sim-agents: N simulated agents speaking the real protocol (bench/failover)"};
  int count = 1000;
  int heartbeat_ms = 1000;
  std::string endpoint, server_key, allowlist, prefix = "sim-";
  app.add_option("--count", count, "Agents to simulate")->check(CLI::Range(1, 100000));
  app.add_option("--endpoint", endpoint,
                 "Coordinator agent endpoint, tcp://host:port; several, comma-separated, for "
                 "coordinators in high availability")
      ->required();
  app.add_option("--server-key", server_key, "The coordinator's public key file")->required();
  app.add_option("--allowlist", allowlist,
                 "Agent allowlist the coordinator reads; the agents' keys are appended")
      ->required();
  app.add_option("--heartbeat-ms", heartbeat_ms, "Heartbeat interval")
      ->check(CLI::Range(10, 60000));
  app.add_option("--prefix", prefix, "Node name prefix");
  CLI11_PARSE(app, argc, argv);
  return trainlet::bench::Run(count, endpoint, server_key, allowlist, heartbeat_ms, prefix);
}
