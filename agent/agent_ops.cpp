#include "agent/agent_ops.h"

#include <spdlog/spdlog.h>

#include "agent/progress_https_server.h"
#include "common/http/http_server.h"  // SplitHostPort
#include "common/logging.h"

namespace trainlet::agent {
namespace {

// /metrics, /healthz and /readyz over the server the progress port uses, in plain HTTP: a
// scrape or probe is a socket in its epoll set on the agent's loop, with no thread of its own.
class MetricsHttpServer : public OpsHttpServer {
 public:
  static Result<std::unique_ptr<OpsHttpServer>> Start(const std::string& address,
                                                      size_t max_body_bytes, HttpHandler handler) {
    TRAINLET_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(address));
    ProgressHttpsServer::Options options;
    options.host = host_port.first;
    options.port = host_port.second;
    options.tls = false;
    options.max_body_bytes = max_body_bytes;
    options.max_connections = 64;  // scrapers and probes; the oldest idle one makes room
    TRAINLET_ASSIGN_OR_RETURN(auto server, ProgressHttpsServer::Start(options, std::move(handler)));
    const std::string host = host_port.first.empty() ? "0.0.0.0" : host_port.first;
    std::string bound = (host.find(':') != host.npos ? "[" + host + "]" : host) + ":" +
                        std::to_string(server->port());
    return std::unique_ptr<OpsHttpServer>(new MetricsHttpServer(std::move(server), bound));
  }
  int fd() const override { return server_->fd(); }
  void OnReadable() override { server_->OnReadable(); }
  std::string bound_address() const override { return bound_; }

 private:
  MetricsHttpServer(std::unique_ptr<ProgressHttpsServer> server, std::string bound)
      : server_(std::move(server)), bound_(std::move(bound)) {}
  std::unique_ptr<ProgressHttpsServer> server_;
  std::string bound_;
};

}  // namespace

Result<std::unique_ptr<AgentOps>> AgentOps::Create(const std::string& metrics_address,
                                                   bool best_effort, const std::string& node,
                                                   std::unique_ptr<ServiceNotifier> notifier,
                                                   const DropCounters* drops) {
  auto a = std::make_unique<AgentOps>();
  TRAINLET_ASSIGN_OR_RETURN(a->ops_, OpsEndpoint::Create(metrics_address, std::move(notifier),
                                                         best_effort, MetricsHttpServer::Start));
  a->drops_ = drops;
  AgentOps* self = a.get();
  MetricsRegistry& m = a->ops_->metrics();
  m.AddGauge("trainlet_build_info", "Version of this trainlet daemon (always 1)",
             {"component", "version"})
      .With({"agent", TRAINLET_VERSION})
      .Set(1);
  auto& registered = m.AddGauge("trainlet_agent_registered",
                                "1 while the coordinator has accepted this node's registration");
  auto& running = m.AddGauge("trainlet_agent_workers_running", "Worker processes alive now");
  a->started_ =
      &m.AddCounter("trainlet_agent_workers_started_total", "Worker processes started").Get();
  a->failed_ = &m.AddCounter(
      "trainlet_agent_workers_failed_total",
      "Workers that could not start (start_failed), exited non-zero (exit_code) or were killed "
      "by a signal (signal; includes ranks trainlet stopped)",
      {"reason"});
  for (const char* r : {"start_failed", "exit_code", "signal"}) a->failed_->With({r});
  a->heartbeats_ =
      &m.AddCounter("trainlet_agent_heartbeats_sent_total", "Heartbeats sent to the coordinator")
           .Get();
  auto& dropped = m.AddCounter("trainlet_agent_messages_dropped_total",
                               "Messages from the coordinator dropped, by reason", {"reason"});
  m.AddCollector([self, &registered, &running, &dropped] {
    registered.Get().Set(self->registered_ ? 1 : 0);
    running.Get().Set(static_cast<double>(self->running_));
    for (size_t r = 0; r < static_cast<size_t>(DropReason::kCount); ++r) {
      const auto reason = static_cast<DropReason>(r);
      Counter& c = dropped.With({DropReasonName(reason)});
      c.Inc(static_cast<double>(self->drops_->Get(reason)) - c.value());  // mirror, never down
    }
  });
  a->ops_->SetReadyCheck([self] { return self->registered_; });
  SetLogNode(node);
  if (!a->metrics_address().empty()) {
    spdlog::info("serving /metrics, /healthz and /readyz on http://{}", a->metrics_address());
  }
  return a;
}

void AgentOps::Tick(bool registered, const std::string& coordinator, size_t running_workers) {
  // Called every loop turn (one per progress post under load): build and compare the status
  // line only when what it says changed.
  if (ticked_ && registered == registered_ && running_workers == running_ &&
      coordinator == coordinator_) {
    return;
  }
  ticked_ = true;
  coordinator_ = coordinator;
  registered_ = registered;
  running_ = running_workers;
  const std::string status = (registered ? "registered with " : "registering with ") + coordinator +
                             ", " + std::to_string(running_workers) +
                             (running_workers == 1 ? " worker" : " workers") + " running";
  if (registered) {
    ops_->NotifyReady(status);
  } else {
    ops_->NotifyStatus(status);
  }
}

void AgentOps::OnWorkerExited(int exit_code, int signal) {
  if (signal != 0) {
    failed_->With({"signal"}).Inc();
  } else if (exit_code != 0) {
    failed_->With({"exit_code"}).Inc();
  }
}

}  // namespace trainlet::agent
