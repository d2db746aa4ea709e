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
#include <random>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/handshake_monitor.h"
#include "common/platform/signal_watch.h"
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

}  // namespace

int main(int argc, char** argv) {
  // Parse like ssh: options first, then the host, then the command words.
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
  std::string host = argv[i++];
  if (auto at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  if (i >= argc)
    return Fail("no command given for " + host + " (interactive logins are not supported)");

  const std::string endpoint = Env("TRAINLET_EXEC_ENDPOINT");
  trainlet::CurveKeyPair mine{Env("TRAINLET_EXEC_PUBLIC_KEY"), Env("TRAINLET_EXEC_KEY")};
  const std::string server = Env("TRAINLET_EXEC_SERVER_KEY");
  if (endpoint.empty() || mine.secret_z85.empty() || server.empty()) {
    return Fail(
        "no job credentials: TRAINLET_EXEC_ENDPOINT, TRAINLET_EXEC_KEY and "
        "TRAINLET_EXEC_SERVER_KEY must be set; trainlet-exec runs only inside a trainlet job's "
        "launcher");
  }
  if (!trainlet::IsValidZ85Key(mine.secret_z85) || !trainlet::IsValidZ85Key(mine.public_z85) ||
      !trainlet::IsValidZ85Key(server)) {
    return Fail("TRAINLET_EXEC_* keys are not 40-character Z85 keys");
  }

  // Before zmq starts its threads.
  auto opened = trainlet::platform::SignalWatch::Open({SIGTERM, SIGINT, SIGHUP});
  if (!opened.ok()) return Fail(opened.status().message());
  const auto signals = std::move(opened).value();
  signal(SIGPIPE, SIG_IGN);

  zmq::context_t ctx;
  auto sock = trainlet::ConnectCurveDealer(ctx, endpoint, server, mine);
  if (!sock.ok()) return Fail(sock.status().message());
  zmq::socket_t& s = *sock;
  // Handshake failures end the command; a success sends the request at once instead of at the
  // next retry tick.
  trainlet::HandshakeMonitor handshakes(ctx, s, "trainlet-exec-monitor");

  const uint64_t exec_id = std::random_device{}() | 1ull << 40;
  trainlet::v1::Envelope request;
  auto* req = request.mutable_exec_request();
  req->set_exec_id(exec_id);
  req->set_host(host);
  for (; i < argc; ++i) req->add_argv(argv[i]);
  const std::string request_bytes = trainlet::EncodeEnvelope(request);

  trainlet::DropCounters drops;
  bool sent = false;
  bool connected = false;
  const auto connect_deadline = Clock::now() + std::chrono::seconds(15);
  auto last_heard = Clock::now();
  auto next_keepalive = Clock::now();
  int stopping_signal = 0;
  // The coordinator's id of our session, from its keepalive echoes. Sent back with every
  // keepalive and cancel, so that a coordinator that restarted can re-attach us to the session it
  // took back from the agent: the remote command runs on through the restart.
  uint64_t session_id = 0;
  uint64_t written[2] = {0, 0};  // bytes of stdout, stderr written out, by their stream offsets
  while (true) {
    const auto now = Clock::now();
    if (!sent) {
      sent = s.send(zmq::buffer(request_bytes), zmq::send_flags::dontwait).has_value();
      if (!sent && now > connect_deadline) {
        return Fail("cannot reach the trainlet coordinator at " + endpoint);
      }
      if (sent) last_heard = now;
    }
    if (sent && now >= next_keepalive) {
      trainlet::v1::Envelope ka;
      ka.mutable_exec_keepalive()->set_exec_id(exec_id);
      ka.mutable_exec_keepalive()->set_session_id(session_id);
      trainlet::SendOnDealer(s, ka);
      next_keepalive = now + std::chrono::seconds(1);
    }
    if (sent && now - last_heard > std::chrono::seconds(10)) {
      return Fail("lost the trainlet coordinator at " + endpoint + "; the remote command on " +
                  host + " will be stopped");
    }
    zmq_pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                              {handshakes.handle(), -1, ZMQ_POLLIN, 0},
                              {nullptr, signals->fd(), ZMQ_POLLIN, 0}};
    zmq_poll(items, 3, sent ? 250 : (connected ? 1 : 20));
    if (items[1].revents & ZMQ_POLLIN) {
      const auto event = handshakes.Read();
      if (event == trainlet::HandshakeEvent::kSucceeded) connected = true;
      if (event == trainlet::HandshakeEvent::kRefusedKey ||
          event == trainlet::HandshakeEvent::kFailed) {
        return Fail("the coordinator at " + endpoint +
                    " refused this job key: the attempt it belongs to is not running");
      }
      continue;
    }
    if (items[2].revents & ZMQ_POLLIN) {
      for (const int sig : signals->Take()) stopping_signal = sig;
      if (stopping_signal == 0) continue;  // woken, but the signal was not one of ours
      trainlet::v1::Envelope cancel;
      cancel.mutable_exec_cancel()->set_exec_id(exec_id);
      cancel.mutable_exec_cancel()->set_session_id(session_id);
      cancel.mutable_exec_cancel()->set_reason(std::string("trainlet-exec got ") +
                                               strsignal(stopping_signal));
      trainlet::SendOnDealer(s, cancel);
      // Give the cancel a moment to leave before the socket closes.
      zmq_pollitem_t none[] = {{s.handle(), 0, ZMQ_POLLOUT, 0}};
      zmq_poll(none, 1, 200);
      return 128 + stopping_signal;
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    while (auto env = trainlet::ReceiveFromDealer(s, drops)) {
      last_heard = Clock::now();
      switch (env->body_case()) {
        case trainlet::v1::Envelope::kExecOutput: {
          const auto& o = env->exec_output();
          if (o.exec_id() != exec_id) break;
          // Bytes this process has written already come again after a coordinator restart.
          const int stream = o.stream() == 2 ? 2 : 1;
          uint64_t& have = written[stream - 1];
          const uint64_t end = o.offset() + o.data().size();
          if (end <= have) break;
          const size_t skip = o.offset() < have ? static_cast<size_t>(have - o.offset()) : 0;
          WriteAll(stream, std::string_view(o.data()).substr(skip));
          have = end;
          break;
        }
        case trainlet::v1::Envelope::kExecExited: {
          const auto& ex = env->exec_exited();
          if (ex.exec_id() != exec_id) break;
          if (!ex.error().empty()) return Fail(ex.error());
          if (ex.signal() != 0) return 128 + ex.signal();
          return ex.exit_code();
        }
        case trainlet::v1::Envelope::kExecKeepalive:
          if (env->exec_keepalive().exec_id() == exec_id &&
              env->exec_keepalive().session_id() != 0) {
            session_id = env->exec_keepalive().session_id();
          }
          break;
        default:
          break;
      }
    }
  }
}
