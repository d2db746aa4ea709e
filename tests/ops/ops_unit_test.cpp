// Unit tests of the operations pieces in trainlet_common: the metrics registry and its text
// format, the loop-driven HTTP endpoint, OpsEndpoint's notifications and watchdog, DaemonConfig,
// and the journal fields.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "common/daemon_config.h"
#include "common/http/http_server.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/ops_endpoint.h"
#include "common/systemd_notify.h"
#include "tests/common/test_dir.h"
#include "tests/ops/exposition_parser.h"

namespace trainlet {
namespace {

using testing::Exposition;
using testing::ParseExposition;

TEST(Metrics, RendersAParseableExposition) {
  MetricsRegistry m;
  m.AddCounter("t_events_total", "Events\nwith a newline and a \\ backslash", {"reason"})
      .With({"a \"quoted\"\nvalue"})
      .Inc(3);
  m.AddGauge("t_temp", "A gauge").Get().Set(-2.5);
  auto& h = m.AddHistogram("t_latency_seconds", "Latency", {0.1, 1, 10}).Get();
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.Observe(v);
  int collected = 0;
  m.AddCollector([&] { ++collected; });
  const std::string text = m.Render();
  EXPECT_EQ(collected, 1);
  Exposition e;
  ASSERT_EQ(ParseExposition(text, e), "") << text;
  EXPECT_EQ(e.types["t_events_total"], "counter");
  EXPECT_EQ(e.types["t_latency_seconds"], "histogram");
  EXPECT_EQ(e.Value("t_events_total", {{"reason", "a \"quoted\"\nvalue"}}), 3);
  EXPECT_EQ(e.Value("t_temp"), -2.5);
  EXPECT_EQ(e.Value("t_latency_seconds_bucket", {{"le", "0.1"}}), 2);  // le is inclusive
  EXPECT_EQ(e.Value("t_latency_seconds_bucket", {{"le", "1"}}), 3);
  EXPECT_EQ(e.Value("t_latency_seconds_bucket", {{"le", "10"}}), 4);
  EXPECT_EQ(e.Value("t_latency_seconds_bucket", {{"le", "+Inf"}}), 5);
  EXPECT_EQ(e.Value("t_latency_seconds_count"), 5);
  EXPECT_DOUBLE_EQ(e.Value("t_latency_seconds_sum"), 55.65);
}

TEST(Metrics, UnlabelledSeriesShowFromTheStart) {
  MetricsRegistry m;
  m.AddCounter("t_c_total", "c");
  m.AddHistogram("t_h", "h", LatencyBucketsSeconds());
  Exposition e;
  ASSERT_EQ(ParseExposition(m.Render(), e), "");
  EXPECT_EQ(e.Value("t_c_total"), 0);
  EXPECT_EQ(e.Value("t_h_count"), 0);
}

TEST(Metrics, ValuesUseTheShortestText) {
  EXPECT_EQ(FormatMetricValue(0.025), "0.025");
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

// The parser must be able to fail, or the daemon tests prove nothing.
TEST(ExpositionParser, RefusesBrokenInput) {
  auto parse = [](const std::string& text) {
    Exposition e;
    return ParseExposition(text, e);
  };
  EXPECT_NE(parse("x 1\n"), "");                         // no TYPE
  EXPECT_NE(parse("# TYPE x counter\nx -1\n"), "");      // negative
  EXPECT_NE(parse("# TYPE x gauge\nx{a=\"1} 1\n"), "");  // unterminated
  EXPECT_NE(parse("# TYPE x gauge\nx 1"), "");           // no newline
  EXPECT_NE(parse("# TYPE x gauge\nx one\n"), "");       // value
  const std::string h = "# TYPE h histogram\n";
  EXPECT_NE(parse(h + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                      "h_sum 1\nh_count 1\n"),
            "");                                                           // not cumulative
  EXPECT_NE(parse(h + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"), "");  // +Inf
  EXPECT_NE(parse(h + "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n"), "");
  EXPECT_EQ(parse(h + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"), "");
}

// A response whose head and Content-Length bytes of body have come.
bool ResponseComplete(const std::string& r) {
  const size_t head = r.find("\r\n\r\n");
  if (head == std::string::npos) return false;
  const size_t cl = r.find("Content-Length: ");
  if (cl == std::string::npos || cl > head) return true;
  return r.size() - head - 4 >= std::stoul(r.substr(cl + 16));
}

// Sends `request` to `ep` and returns the whole response, driving `ep` like a loop does.
std::string Exchange(HttpServer& ep, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(ep.port());
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  // Write in two pieces, so the server must keep a partial request between reads.
  const size_t half = request.size() / 2;
  EXPECT_EQ(write(fd, request.data(), half), static_cast<ssize_t>(half));
  pollfd p{ep.fd(), POLLIN, 0};
  for (int i = 0; i < 5 && poll(&p, 1, 20) > 0; ++i) ep.Handle();
  (void)!write(fd, request.data() + half, request.size() - half);
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (poll(&p, 1, 10) > 0) ep.Handle();
    pollfd c{fd, POLLIN, 0};
    if (poll(&c, 1, 0) > 0) {
      char buf[4096];
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      response.append(buf, static_cast<size_t>(n));
      if (request.starts_with("HEAD") ? response.find("\r\n\r\n") != std::string::npos
                                      : ResponseComplete(response)) {
        break;
      }  // HTTP/1.1 keeps the connection open
    }
  }
  close(fd);
  return response;
}

Result<std::unique_ptr<HttpServer>> Serve(
    const std::string& address, HttpHandler handler,
    std::chrono::seconds loop_timeout = std::chrono::seconds(5)) {
  HttpServer::Options options;
  options.address = address;
  options.max_body_bytes = 1024;
  options.loop_timeout = loop_timeout;
  return HttpServer::Start(options, std::move(handler));
}

// The handler runs on the thread that calls Handle() (the loop), and httplib enforces the limits.
TEST(HttpServer, AnswersAndBoundsRequests) {
  const auto loop = std::this_thread::get_id();
  auto ep = Serve("127.0.0.1:0", [loop](const HttpRequest& req) {
    EXPECT_EQ(std::this_thread::get_id(), loop);
    HttpResponse r;
    r.body = req.method == "POST" ? "body=" + req.body : "path=" + req.path;
    if (req.method == "PUT") r.status = 405;
    return r;
  });
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  EXPECT_NE((*ep)->bound_address(), "127.0.0.1:0");
  std::string r = Exchange(**ep, "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length: 13\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\n\r\npath=/metrics"), std::string::npos) << r;
  r = Exchange(**ep, "HEAD /x HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.substr(r.size() - 4), "\r\n\r\n") << "HEAD has no body: " << r;
  r = Exchange(**ep, "POST /x HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_NE(r.find("\r\n\r\nbody=abc"), std::string::npos) << r;
  r = Exchange(**ep, "PUT /x HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  r = Exchange(**ep, "garbage\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  r = Exchange(**ep, "GET /" + std::string(16384, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 414", 0), 0u) << r.substr(0, 100);
  r = Exchange(**ep, "POST /x HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'b'));
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r.substr(0, 100);
}

// A loop that does not answer: the probe gets 503 once loop_timeout passes, never a hang.
TEST(HttpServer, AHungLoopIsVisible) {
  auto ep = Serve(
      "127.0.0.1:0", [](const HttpRequest&) { return HttpResponse{}; }, std::chrono::seconds(1));
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((*ep)->port());
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string req = "GET /healthz HTTP/1.0\r\n\r\n";
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string response;
  char buf[1024];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    response.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_EQ(response.rfind("HTTP/1.1 503", 0), 0u) << response;
  (*ep)->Handle();  // nothing is left waiting
}

TEST(HttpServer, RefusesBadAndBusyAddresses) {
  EXPECT_FALSE(Serve("no-port", {}).ok());
  EXPECT_FALSE(Serve("127.0.0.1:notaport", {}).ok());
  auto first = Serve("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok());
  auto second = Serve((*first)->bound_address(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kExists);
  EXPECT_NE(second.status().message().find((*first)->bound_address()), std::string::npos);
}

class RecordingNotifier : public ServiceNotifier {
 public:
  RecordingNotifier(std::vector<std::string>* sent, std::chrono::microseconds watchdog)
      : sent_(sent), watchdog_(watchdog) {}
  void Notify(const std::string& state, bool) override { sent_->push_back(state); }
  std::chrono::microseconds WatchdogTimeout() const override { return watchdog_; }

 private:
  std::vector<std::string>* sent_;
  std::chrono::microseconds watchdog_;
};

TEST(OpsEndpoint, NotifiesOnceAndDeduplicatesStatus) {
  std::vector<std::string> sent;
  auto ops = OpsEndpoint::Create(
      "", std::make_unique<RecordingNotifier>(&sent, std::chrono::microseconds(0)));
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ((*ops)->metrics_address(), "");
  (*ops)->NotifyStatus("starting");
  (*ops)->NotifyReady("1 node Ready");
  (*ops)->NotifyReady("1 node Ready");
  (*ops)->NotifyReady("2 nodes Ready");
  (*ops)->NotifyStopping();
  EXPECT_EQ(sent,
            (std::vector<std::string>{"STATUS=starting", "READY=1\nSTATUS=1 node Ready",
                                      "STATUS=2 nodes Ready", "STOPPING=1\nSTATUS=stopping"}));
}

TEST(OpsEndpoint, PetsTheWatchdogOnlyWhenTheLoopRuns) {
  std::vector<std::string> sent;
  auto ops = OpsEndpoint::Create(
      "", std::make_unique<RecordingNotifier>(&sent, std::chrono::milliseconds(100)));
  ASSERT_TRUE(ops.ok());
  // A loop that does not call OnReadable pets nothing, however long it waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(160));
  EXPECT_TRUE(sent.empty());
  int pets = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{(*ops)->fd(), POLLIN, 0};
    if (poll(&p, 1, 10) > 0) (*ops)->OnReadable();
  }
  for (const auto& s : sent) pets += s == "WATCHDOG=1";
  EXPECT_GE(pets, 3);  // every 50 ms: half the timeout
  EXPECT_LE(pets, 8);
}

// The HTTP server is the caller's (OpsHttpStarter: the agent passes its own, no httplib): it is
// started on the metrics address with an 8 KiB body limit, its fd is polled through the
// endpoint's and OnReadable reaches it; its handler answers /healthz, /readyz and /metrics; a
// port in use is an error unless best_effort, which serves no HTTP.
class FakeOpsServer : public OpsHttpServer {
 public:
  explicit FakeOpsServer(int* woken) : woken_(woken) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    read_ = fds[0];
    write_ = fds[1];
  }
  ~FakeOpsServer() override {
    close(read_);
    close(write_);
  }
  int fd() const override { return read_; }
  void OnReadable() override {
    char c;
    EXPECT_EQ(read(read_, &c, 1), 1);
    ++*woken_;
  }
  std::string bound_address() const override { return "127.0.0.1:1234"; }
  void Wake() { EXPECT_EQ(write(write_, "x", 1), 1); }

 private:
  int* woken_;
  int read_ = -1, write_ = -1;
};

TEST(OpsEndpoint, ServesWithTheServerItsCallerStarts) {
  std::vector<std::string> sent;
  int woken = 0;
  FakeOpsServer* server = nullptr;
  HttpHandler handler;
  std::string address;
  size_t body_limit = 0;
  auto start = [&](const std::string& a, size_t limit,
                   HttpHandler h) -> Result<std::unique_ptr<OpsHttpServer>> {
    address = a;
    body_limit = limit;
    handler = std::move(h);
    auto s = std::make_unique<FakeOpsServer>(&woken);
    server = s.get();
    return std::unique_ptr<OpsHttpServer>(std::move(s));
  };
  auto ops = OpsEndpoint::Create(
      "127.0.0.1:0", std::make_unique<RecordingNotifier>(&sent, std::chrono::microseconds(0)),
      false, start);
  ASSERT_TRUE(ops.ok()) << ops.status().message();
  EXPECT_EQ(address, "127.0.0.1:0");
  EXPECT_EQ(body_limit, 8192u);
  EXPECT_EQ((*ops)->metrics_address(), "127.0.0.1:1234");
  server->Wake();
  pollfd p{(*ops)->fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 1000), 1);
  (*ops)->OnReadable();
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(handler(HttpRequest{"GET", "/healthz", "", "", false}).body, "ok\n");
  EXPECT_EQ(handler(HttpRequest{"GET", "/readyz", "", "", false}).status, 503);
  EXPECT_EQ(handler(HttpRequest{"POST", "/metrics", "", "", false}).status, 405);
  (*ops)->metrics().AddCounter("x_total", "x").Get().Inc();
  EXPECT_NE(handler(HttpRequest{"GET", "/metrics", "", "", false}).body.find("x_total 1"),
            std::string::npos);

  auto taken = [](const std::string&, size_t,
                  HttpHandler) -> Result<std::unique_ptr<OpsHttpServer>> {
    return Status(ErrorCode::kExists, "address \"127.0.0.1:1\": Address already in use");
  };
  auto refused = OpsEndpoint::Create(
      "127.0.0.1:1", std::make_unique<RecordingNotifier>(&sent, std::chrono::microseconds(0)),
      false, taken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "metrics address \"127.0.0.1:1\": Address already in use");
  auto best_effort = OpsEndpoint::Create(
      "127.0.0.1:1", std::make_unique<RecordingNotifier>(&sent, std::chrono::microseconds(0)), true,
      taken);
  ASSERT_TRUE(best_effort.ok());
  EXPECT_EQ((*best_effort)->metrics_address(), "");
}

struct ConfigFixture {
  std::string name;
  int64_t beat_ms_seen = 0;
  std::chrono::milliseconds beat{1000};
  std::string address = "127.0.0.1:9464";
  std::string level = "info";
  std::string state_dir;
  uint32_t slots = 0;
  std::map<std::string, std::string> labels;
  DaemonConfig config{"trainlet-test"};
  CLI::App app;

  ConfigFixture() {
    config.String("name", &name, "node name");
    config.Path("state_dir", &state_dir, DaemonConfig::PathKind::kAny, "state", true);
    config.Millis("heartbeat_ms", &beat, 50, 60000, "beat");
    config.Uint32("slots", &slots, 0, 1024, "slots");
    config.StringMap("labels", &labels, "labels");
    config.String("metrics_address", &address, "metrics", false, DaemonConfig::CheckListenAddress);
    config.Enum("log_level", &level, {"info", "debug"}, "level");
    config.AddFlags(app);
  }
  Status Run(std::vector<std::string> args) {
    args.insert(args.begin(), "trainlet-test");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return InvalidError(std::string("cli: ") + e.what());
    }
    return config.Finish();
  }
};

std::string WriteFile(const testing::TempDir& dir, const std::string& name,
                      const std::string& text) {
  std::ofstream(dir.File(name)) << text;
  return dir.File(name);
}

TEST(DaemonConfig, FileThenFlags) {
  testing::TempDir dir;
  const std::string file = WriteFile(dir, "agent.yaml",
                                     "name: from-file\nstate_dir: /s\nheartbeat_ms: 200\n"
                                     "labels:\n  zone: a\n  rack: '7'\nslots: 4\n");
  ConfigFixture f;
  ASSERT_TRUE(f.Run({"--config", file, "--heartbeat-ms", "300", "--metrics-address", ":0"}).ok());
  EXPECT_EQ(f.name, "from-file");
  EXPECT_EQ(f.beat, std::chrono::milliseconds(300));  // the flag wins
  EXPECT_EQ(f.slots, 4u);
  EXPECT_EQ(f.address, ":0");
  EXPECT_EQ(f.labels, (std::map<std::string, std::string>{{"zone", "a"}, {"rack", "7"}}));
  EXPECT_TRUE(f.config.WasSet("heartbeat_ms"));
  EXPECT_FALSE(f.config.WasSet("log_level"));
  const std::string yaml = f.config.ToYaml();
  EXPECT_NE(yaml.find("heartbeat_ms: 300\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("name: \"from-file\"\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("log_level: \"info\"\n"), std::string::npos) << yaml;
}

TEST(DaemonConfig, RefusesBadValuesNamingTheKey) {
  testing::TempDir dir;
  auto error_for = [&](const std::string& yaml, std::vector<std::string> flags = {}) {
    const std::string file = WriteFile(dir, "agent.yaml", yaml);
    ConfigFixture f;
    flags.insert(flags.begin(), {"--config", file});
    Status s = f.Run(flags);
    return s.message();
  };
  const std::string path = dir.File("agent.yaml");
  EXPECT_EQ(error_for("state_dir: /s\nheartbeat_ms: fast\n"),
            path + ": heartbeat_ms: must be an integer from 50 to 60000, got \"fast\"");
  EXPECT_EQ(error_for("state_dir: /s\nheartbeat_ms: 10\n"),
            path + ": heartbeat_ms: must be an integer from 50 to 60000, got \"10\"");
  EXPECT_EQ(error_for("state_dir: /s\nheartbeat: 100\n"),
            path + ": heartbeat: unknown key for trainlet-test (docs/config.md lists the keys)");
  EXPECT_EQ(error_for("state_dir: /s\nlog_level: loud\n"),
            path + ": log_level: must be one of info, debug, got \"loud\"");
  EXPECT_EQ(error_for("state_dir: [a, b]\n"),
            path + ": state_dir: must be a single value, got a list");
  EXPECT_EQ(error_for("state_dir: /s\nlabels: [a]\n"),
            path + ": labels: must be a map of strings, got a list");
  EXPECT_EQ(error_for("state_dir: /s\nmetrics_address: 127.0.0.1\n"),
            path +
                ": metrics_address: must be host:port (port 0 to 65535), :port, or \"\" to "
                "turn it off, got \"127.0.0.1\"");
  EXPECT_EQ(error_for("- a\n"), path + ": must be a map of keys, got a list");
  EXPECT_NE(error_for("a: [\n").find(path + ": line "), std::string::npos);
  EXPECT_EQ(error_for("heartbeat_ms: 100\n"),
            "state_dir: required: set it in the --config file or with --state-dir");
  EXPECT_EQ(error_for("state_dir: /s\n", {"--slots", "-1"}),
            "--slots: must be an integer from 0 to 1024, got \"-1\"");
  EXPECT_EQ(error_for("state_dir: /s\n", {"--labels", "novalue"}),
            "--labels: expected key=value, got \"novalue\"");
  EXPECT_EQ(error_for("state_dir: /s\nmetrics_address: ''\n"), "");  // "" turns it off
}

TEST(DaemonConfig, PrintConfigSkipsTheRequiredCheck) {
  ConfigFixture f;
  ASSERT_TRUE(f.Run({"--print-config"}).ok());
  EXPECT_TRUE(f.config.print_requested());
  EXPECT_EQ(f.config.Keys().size(), 7u);
}

TEST(Logging, JournalFieldsCarryJobAndRankInScope) {
  SetLogNode("node-7");
  auto has = [](const std::vector<std::string>& f, const std::string& field) {
    return std::find(f.begin(), f.end(), field) != f.end();
  };
  auto outside = JournalFields(6, "hello");
  EXPECT_TRUE(has(outside, "MESSAGE=hello"));
  EXPECT_TRUE(has(outside, "PRIORITY=6"));
  EXPECT_TRUE(has(outside, "TRAINLET_NODE=node-7"));
  for (const auto& f : outside) EXPECT_NE(f.rfind("TRAINLET_JOB=", 0), 0u) << f;
  {
    ScopedLogFields job("train-1", 3);
    auto inside = JournalFields(3, "rank exited");
    EXPECT_TRUE(has(inside, "TRAINLET_JOB=train-1"));
    EXPECT_TRUE(has(inside, "TRAINLET_RANK=3"));
    {
      ScopedLogFields other("train-2");
      auto nested = JournalFields(3, "x");
      EXPECT_TRUE(has(nested, "TRAINLET_JOB=train-2"));
      for (const auto& f : nested) EXPECT_NE(f.rfind("TRAINLET_RANK=", 0), 0u) << f;
    }
    EXPECT_TRUE(has(JournalFields(3, "y"), "TRAINLET_RANK=3"));
  }
  for (const auto& f : JournalFields(6, "after")) EXPECT_NE(f.rfind("TRAINLET_JOB=", 0), 0u);
  EXPECT_TRUE(ParseLogTarget("journal").ok());
  EXPECT_FALSE(ParseLogTarget("syslog").ok());
}

}  // namespace
}  // namespace trainlet

namespace trainlet {
namespace {

// A service manager that never reads must not stall the loop: droppable messages return at
// once, and READY=1 waits at most a bounded time.
TEST(SystemdNotifier, NeverBlocksOnDroppableMessages) {
  testing::TempDir dir;
  const std::string path = dir.File("notify.sock");
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  setenv("WATCHDOG_USEC", "300000", 1);
  auto notifier = MakeSystemdNotifier();
  unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(notifier->WatchdogTimeout(), std::chrono::microseconds(300000));
  unsetenv("WATCHDOG_USEC");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) notifier->Notify("WATCHDOG=1", true);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  char buf[64];
  ASSERT_EQ(recv(fd, buf, sizeof buf, MSG_DONTWAIT), 10);
  EXPECT_EQ(std::string(buf, 10), "WATCHDOG=1");
  close(fd);
}

}  // namespace
}  // namespace trainlet
