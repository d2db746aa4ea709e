// AgentOps: what the agent tells operators about itself, kept out of the loop's code: the
// Prometheus metrics, /healthz and /readyz (ready = registered), and the service manager's
// READY / STATUS / WATCHDOG / STOPPING (see common/ops_endpoint.h).
//
// The Agent's loop owns it, polls fd(), calls OnReadable() when it is readable, Tick() once per
// iteration, and the On*() counters where the events happen. No locks.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/envelope.h"
#include "common/ops_endpoint.h"

namespace trainlet::agent {

class AgentOps {
 public:
  // drops is read at scrape time and must outlive this object. Errors name the address.
  // Also makes `node` the TRAINLET_NODE of every later log entry.
  // best_effort: see OpsEndpoint::Create.
  static Result<std::unique_ptr<AgentOps>> Create(const std::string& metrics_address,
                                                  bool best_effort, const std::string& node,
                                                  std::unique_ptr<ServiceNotifier> notifier,
                                                  const DropCounters* drops);

  int fd() const { return ops_->fd(); }
  void OnReadable() { ops_->OnReadable(); }
  // "" when HTTP is off; else host:port as bound.
  std::string metrics_address() const { return ops_->metrics_address(); }

  // READY=1 at the first registration; then STATUS= whenever the line changes.
  void Tick(bool registered, const std::string& coordinator, size_t running_workers);
  void OnWorkerStarted() { started_->Inc(); }
  void OnWorkerStartFailed() { failed_->With({"start_failed"}).Inc(); }
  void OnWorkerExited(int exit_code, int signal);
  void OnHeartbeatSent() { heartbeats_->Inc(); }
  void OnStopping() { ops_->NotifyStopping(); }

  MetricsRegistry& metrics() { return ops_->metrics(); }

 private:
  std::unique_ptr<OpsEndpoint> ops_;
  const DropCounters* drops_ = nullptr;
  bool registered_ = false;
  size_t running_ = 0;
  bool ticked_ = false;  // Tick ran once: the three above and coordinator_ are what it saw
  std::string coordinator_;
  Counter* started_ = nullptr;
  Family<Counter>* failed_ = nullptr;
  Counter* heartbeats_ = nullptr;
};

}  // namespace trainlet::agent
