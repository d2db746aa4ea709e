// trainlet-exec: an rsh/ssh-compatible launch agent. OpenMPI's mpirun runs it as
//     trainlet-exec [options] [user@]host command...
// and it has the trainlet agent on `host` run the command within the calling job, relays the
// command's stdout and stderr, and exits with its status. It authenticates as the job's
// launcher with the key pair in its TRAINLET_EXEC_* environment, which the coordinator made for
// the job's current attempt; it can start nothing outside that attempt's placement.
//
// When trainlet-exec is killed, or loses the coordinator, the remote command is stopped: the
// coordinator stops any session whose trainlet-exec has been silent for a few seconds.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/handshake_monitor.h"
#include "common/platform/env.h"
#include "common/platform/event_loop.h"
#include "common/platform/signal_watch.h"
#include "common/secret_env.h"
#include "common/zmq_sockets.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kFailure = 255;  // what ssh exits with when it cannot run the command

int Fail(const std::string& message) {
  std::fprintf(stderr, "trainlet-exec: %s\n", message.c_str());
  return kFailure;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

bool WriteAll(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

const char* kUsage =
    "usage: trainlet-exec [-l user] [-p port] [-o option] [-nxTtq46] [user@]host command...\n"
    "\n"
    "An rsh/ssh-compatible launch agent for jobs running on trainlet. Set it as OpenMPI's\n"
    "launch agent (OMPI_MCA_plm_rsh_agent, PRTE_MCA_plm_ssh_agent; trainlet's mpi runtime does)\n"
    "and mpirun starts its remote daemons through the trainlet agents instead of sshd.\n"
    "It works only inside a trainlet job's launcher, whose TRAINLET_EXEC_* variables carry the\n"
    "job's credentials. ssh options are accepted and ignored.\n";

// The command line, parsed like ssh's: options first, then the host, then the command words.
struct SshCommand {
  std::string host;
  std::vector<std::string> words;
};

// Returns the exit status when trainlet-exec should stop here (--help, or a bad command line).
std::optional<int> ParseSshCommandLine(int argc, char** argv, SshCommand& out) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string opt = argv[i];
    if (opt == "--help" || opt == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (opt == "--") {
      ++i;
      break;
    }
    // ssh options that take an argument; the rest are flags.
    if (opt.size() == 2 && std::strchr("lpoiFcmLRDbeEIJQSWw", opt[1]) != nullptr) ++i;
  }
  if (i >= argc) return Fail("no host given\n" + std::string(kUsage));
  out.host = argv[i++];
  if (auto at = out.host.rfind('@'); at != std::string::npos) out.host = out.host.substr(at + 1);
  if (i >= argc)
    return Fail("no command given for " + out.host + " (interactive logins are not supported)");
  out.words.assign(argv + i, argv + argc);
  return std::nullopt;
}

// The job's credentials, from the TRAINLET_EXEC_* environment the coordinator gave the launcher.
// TRAINLET_EXEC_ENDPOINT is one exec endpoint, or a comma-separated list: a coordinator set in high
// availability, its leader first at the time the attempt started.
struct JobCredentials {
  std::vector<std::string> endpoints;
  trainlet::CurveKeyPair mine;
  std::string server;
};

// Returns the exit status when the credentials are missing or malformed.
std::optional<int> LoadJobCredentials(JobCredentials& out) {
  out.endpoints = trainlet::SplitEndpointList(Env("TRAINLET_EXEC_ENDPOINT"));
  // The secret half comes from its 0400 file (TRAINLET_EXEC_KEY_FILE) under a current agent.
  const trainlet::SecretFromEnv key = trainlet::ReadSecretFromEnv("TRAINLET_EXEC_KEY");
  if (!key.error.empty()) return Fail("job credentials: " + key.error);
  out.mine = trainlet::CurveKeyPair{Env("TRAINLET_EXEC_PUBLIC_KEY"), key.value};
  out.server = Env("TRAINLET_EXEC_SERVER_KEY");
  if (out.endpoints.empty() || out.mine.secret_z85.empty() || out.server.empty()) {
    return Fail(
        "no job credentials: TRAINLET_EXEC_ENDPOINT, TRAINLET_EXEC_KEY and "
        "TRAINLET_EXEC_SERVER_KEY must be set; trainlet-exec runs only inside a trainlet job's "
        "launcher");
  }
  if (!trainlet::IsValidZ85Key(out.mine.secret_z85) ||
      !trainlet::IsValidZ85Key(out.mine.public_z85) || !trainlet::IsValidZ85Key(out.server)) {
    return Fail("TRAINLET_EXEC_* keys are not 40-character Z85 keys");
  }
  return std::nullopt;
}

// One remote command's session with the coordinator: sends the request until it leaves, keeps the
// session alive, relays output, and turns the command's end (or ours) into an exit status.
//
// With several endpoints (an HA set), a coordinator that refuses the key (a standby has no
// launcher keys until it leads) or stays silent for kSwitchSilence is left for the next one, and
// the session is re-attached there by its id: the new leader took the session back from the
// agent, as a restarted coordinator does. It gives up when no coordinator answered for
// kLostWithPeers, which covers a failover (the lease TTL plus loading the store). With one
// endpoint it behaves as before: a refusal ends it, and so do kLost of silence.
// Single-threaded; every On*/Send method returns the exit status once the session is over.
class ExecSession {
 public:
  ExecSession(zmq::context_t& ctx, JobCredentials creds, trainlet::platform::SignalWatch& signals,
              std::string host, const std::vector<std::string>& words)
      : ctx_(ctx), creds_(std::move(creds)), signals_(signals), host_(std::move(host)) {
    trainlet::v1::Envelope request;
    auto* req = request.mutable_exec_request();
    req->set_exec_id(exec_id_);
    req->set_host(host_);
    for (const auto& w : words) req->add_argv(w);
    request_bytes_ = trainlet::EncodeEnvelope(request);
  }

  // One loop over the reply socket, the handshake monitor and the signals (platform::EventLoop);
  // the tick sends what is due, moves to another coordinator when one is due, and says how long
  // the poll may sleep.
  int Run() {
    trainlet::platform::EventLoop loop(trainlet::platform::RealEnv());
    loop_ = &loop;
    std::optional<int> rc;
    auto finish = [&](std::optional<int> r) {
      if (!r) return;
      rc = r;
      loop.Stop();
    };
    if (auto r = Connect(0)) return *r;
    using Loop = trainlet::platform::EventLoop;
    loop.AddTick([&](Loop::TimePoint now) -> std::optional<Loop::TimePoint> {
      finish(SendDue(now));
      return now + std::chrono::milliseconds(sent_ ? 250 : (connected_ ? 1 : 20));
    });
    loop.AddFd(signals_.fd(), Loop::kReadable, [&](short) { finish(OnSignal()); });
    finish_ = finish;
    while (!rc) {
      if (trainlet::Status s = loop.RunOnce(Loop::kForever); !s.ok()) return Fail(s.message());
    }
    return *rc;
  }

 private:
  static constexpr auto kLost = std::chrono::seconds(10);
  static constexpr auto kLostWithPeers = std::chrono::seconds(30);
  static constexpr auto kSwitchSilence = std::chrono::seconds(3);
  static constexpr auto kConnectDeadline = std::chrono::seconds(15);

  bool ha() const { return creds_.endpoints.size() > 1; }
  const std::string& endpoint() const { return creds_.endpoints[current_]; }

  // A fresh DEALER (and its handshake monitor) to endpoints[i], in place of the current one.
  std::optional<int> Connect(size_t i) {
    using Loop = trainlet::platform::EventLoop;
    if (conn_) {
      loop_->Remove(socket_source_);
      if (monitor_source_ != 0) loop_->Remove(monitor_source_);
      monitor_.reset();  // before its socket
      conn_.reset();
    }
    current_ = i;
    connected_ = false;
    switch_due_ = false;
    on_current_since_ = Clock::now();
    auto sock = trainlet::ConnectCurveDealer(ctx_, endpoint(), creds_.server, creds_.mine);
    if (!sock.ok()) return Fail(sock.status().message());
    conn_ = std::make_unique<zmq::socket_t>(std::move(*sock));
    monitor_ = std::make_unique<trainlet::HandshakeMonitor>(
        ctx_, *conn_, "trainlet-exec-monitor-" + std::to_string(++connections_));
    socket_source_ =
        loop_->AddSocket(conn_->handle(), Loop::kReadable, [this](short) { Finish(OnReplies()); });
    monitor_source_ = monitor_->handle() == nullptr
                          ? 0
                          : loop_->AddSocket(monitor_->handle(), Loop::kReadable,
                                             [this](short) { Finish(OnHandshakeEvent()); });
    if (sent_) next_keepalive_ = Clock::now();  // re-attach at once
    return std::nullopt;
  }
  void Finish(std::optional<int> rc) {
    if (rc && finish_) finish_(rc);
  }

  // The request until it leaves, then a keepalive a second; moves to the next coordinator, or
  // gives up, when the one it talks to is unreachable, refuses or is silent.
  std::optional<int> SendDue(Clock::time_point now) {
    if (switch_due_ || (ha() && now - std::max(last_heard_, on_current_since_) > kSwitchSilence)) {
      if (sent_ && session_id_ == 0) {
        // The coordinator that took the request may have started the command: sending it again
        // elsewhere could start a second one. A request queued on a connection whose handshake
        // never succeeded reached no one, and goes to the next.
        if (connected_) {
          return Fail("lost the trainlet coordinator at " + endpoint() +
                      " before it confirmed the command on " + host_);
        }
        sent_ = false;
      }
      if (auto rc = Connect((current_ + 1) % creds_.endpoints.size())) return rc;
    }
    if (!sent_) {
      sent_ = conn_->send(zmq::buffer(request_bytes_), zmq::send_flags::dontwait).has_value();
      if (!sent_ && now - started_ > kConnectDeadline) {
        return Fail("cannot reach the trainlet coordinator at " + EndpointsText());
      }
      if (sent_) last_heard_ = now;
    }
    if (sent_ && now >= next_keepalive_) {
      trainlet::v1::Envelope ka;
      ka.mutable_exec_keepalive()->set_exec_id(exec_id_);
      ka.mutable_exec_keepalive()->set_session_id(session_id_);
      trainlet::SendOnDealer(*conn_, ka);
      next_keepalive_ = now + std::chrono::seconds(1);
    }
    if (sent_ && now - last_heard_ > (ha() ? kLostWithPeers : kLost)) {
      return Fail("lost the trainlet coordinator at " + EndpointsText() +
                  "; the remote command on " + host_ + " will be stopped");
    }
    return std::nullopt;
  }
  std::string EndpointsText() const {
    std::string out;
    for (const auto& e : creds_.endpoints) out += (out.empty() ? "" : ", ") + e;
    return out;
  }

  // Handshake failures end the command (with one coordinator) or move to the next one; a success
  // sends the request at once instead of at the next retry tick.
  std::optional<int> OnHandshakeEvent() {
    const auto event = monitor_->Read();
    if (event == trainlet::HandshakeEvent::kSucceeded) {
      connected_ = true;
      failed_handshakes_ = 0;
    }
    const bool refused = event == trainlet::HandshakeEvent::kRefusedKey;
    // A cut handshake is also what a coordinator restarting mid-handshake looks like: libzmq
    // retries, and only a server key that is wrong fails every time (as in trainletctl).
    const bool wrong_key = event == trainlet::HandshakeEvent::kFailed && ++failed_handshakes_ >= 3;
    if ((refused || wrong_key) && ha() && Clock::now() - last_heard_ < kLostWithPeers) {
      switch_due_ = true;  // a standby, or a leader still loading the store
      failed_handshakes_ = 0;
      return std::nullopt;
    }
    if (refused) {
      return Fail("the coordinator at " + endpoint() +
                  " refused this job key: the attempt it belongs to is not running");
    }
    if (wrong_key) {
      return Fail("the CURVE handshake with the coordinator at " + endpoint() + " failed " +
                  std::to_string(failed_handshakes_) +
                  " times in a row: TRAINLET_EXEC_SERVER_KEY is not its key");
    }
    return std::nullopt;
  }

  // A stopping signal cancels the remote command and exits as the signal would.
  std::optional<int> OnSignal() {
    for (const int sig : signals_.Take()) stopping_signal_ = sig;
    if (stopping_signal_ == 0) return std::nullopt;  // woken, but the signal was not one of ours
    trainlet::v1::Envelope cancel;
    cancel.mutable_exec_cancel()->set_exec_id(exec_id_);
    cancel.mutable_exec_cancel()->set_session_id(session_id_);
    cancel.mutable_exec_cancel()->set_reason(std::string("trainlet-exec got ") +
                                             strsignal(stopping_signal_));
    trainlet::SendOnDealer(*conn_, cancel);
    // Give the cancel a moment to leave before the socket closes.
    zmq_pollitem_t none[] = {{conn_->handle(), 0, ZMQ_POLLOUT, 0}};
    zmq_poll(none, 1, 200);
    return 128 + stopping_signal_;
  }

  std::optional<int> OnReplies() {
    while (auto env = trainlet::ReceiveFromDealer(*conn_, drops_)) {
      last_heard_ = Clock::now();
      switch (env->body_case()) {
        case trainlet::v1::Envelope::kExecOutput:
          WriteOutput(env->exec_output());
          break;
        case trainlet::v1::Envelope::kExecExited: {
          const auto& ex = env->exec_exited();
          if (ex.exec_id() != exec_id_) break;
          if (!ex.error().empty()) return Fail(ex.error());
          if (ex.signal() != 0) return 128 + ex.signal();
          return ex.exit_code();
        }
        case trainlet::v1::Envelope::kExecKeepalive:
          if (env->exec_keepalive().exec_id() == exec_id_ &&
              env->exec_keepalive().session_id() != 0) {
            session_id_ = env->exec_keepalive().session_id();
          }
          break;
        default:
          break;
      }
    }
    return std::nullopt;
  }

  void WriteOutput(const trainlet::v1::ExecOutput& o) {
    if (o.exec_id() != exec_id_) return;
    // Bytes this process has written already come again after a coordinator restart.
    const int stream = o.stream() == 2 ? 2 : 1;
    uint64_t& have = written_[stream - 1];
    const uint64_t end = o.offset() + o.data().size();
    if (end <= have) return;
    const size_t skip = o.offset() < have ? static_cast<size_t>(have - o.offset()) : 0;
    WriteAll(stream, std::string_view(o.data()).substr(skip));
    have = end;
  }

  // Borrowed from main, which outlives the session.
  zmq::context_t& ctx_;
  const JobCredentials creds_;
  trainlet::platform::SignalWatch& signals_;
  // Constant after construction.
  const std::string host_;
  const uint64_t exec_id_ = std::random_device{}() | 1ull << 40;
  std::string request_bytes_;
  const Clock::time_point started_ = Clock::now();

  trainlet::platform::EventLoop* loop_ = nullptr;  // Run's
  std::function<void(std::optional<int>)> finish_;
  // The coordinator talked to now: creds_.endpoints[current_].
  size_t current_ = 0;
  std::unique_ptr<zmq::socket_t> conn_;
  std::unique_ptr<trainlet::HandshakeMonitor> monitor_;
  trainlet::platform::EventLoop::SourceId socket_source_ = 0;
  trainlet::platform::EventLoop::SourceId monitor_source_ = 0;
  int connections_ = 0;
  Clock::time_point on_current_since_ = Clock::now();
  bool switch_due_ = false;

  trainlet::DropCounters drops_;
  bool sent_ = false;
  bool connected_ = false;
  int failed_handshakes_ = 0;  // in a row; a success clears it
  Clock::time_point last_heard_ = Clock::now();
  Clock::time_point next_keepalive_ = Clock::now();
  int stopping_signal_ = 0;
  // The coordinator's id of our session, from its keepalive echoes. Sent back with every
  // keepalive and cancel, so that a coordinator that restarted, or took over, can re-attach us to
  // the session it took back from the agent: the remote command runs on.
  uint64_t session_id_ = 0;
  uint64_t written_[2] = {0, 0};  // bytes of stdout, stderr written out, by their stream offsets
};

}  // namespace

int main(int argc, char** argv) {
  SshCommand command;
  if (auto rc = ParseSshCommandLine(argc, argv, command)) return *rc;
  JobCredentials creds;
  if (auto rc = LoadJobCredentials(creds)) return *rc;

  // Before zmq starts its threads.
  auto opened = trainlet::platform::SignalWatch::Open({SIGTERM, SIGINT, SIGHUP});
  if (!opened.ok()) return Fail(opened.status().message());
  const auto signals = std::move(opened).value();
  signal(SIGPIPE, SIG_IGN);

  zmq::context_t ctx;
  ExecSession session(ctx, std::move(creds), *signals, command.host, command.words);
  return session.Run();
}
