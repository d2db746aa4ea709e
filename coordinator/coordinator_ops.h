// CoordinatorOps: what the coordinator tells operators about itself, kept out of the loop's
// code: the Prometheus metrics, /healthz and /readyz (ready = store open and the loop serving),
// and the service manager's READY / STATUS / WATCHDOG / STOPPING (see common/ops_endpoint.h).
//
// Gauges (nodes by state, jobs by phase, dropped messages, each job's reported progress and
// remaining time, labelled by job) are read from the registry, the
// controller and the drop counters when someone scrapes, so the loop pays nothing for them.
// Histograms and counters are fed by the On*() calls where the events happen.
//
// Owned by the coordinator's loop; no locks. The pointers given to Create must outlive it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/envelope.h"
#include "common/ops_endpoint.h"
#include "common/zap_authenticator.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {

class CoordinatorOps {
 public:
  // best_effort: see OpsEndpoint::Create. Errors name the address.
  static Result<std::unique_ptr<CoordinatorOps>> Create(const std::string& metrics_address,
                                                        bool best_effort,
                                                        std::unique_ptr<ServiceNotifier> notifier,
                                                        const NodeRegistry* registry,
                                                        const JobController* jobs,
                                                        const DropCounters* drops);

  int fd() const { return ops_->fd(); }
  void OnReadable() { ops_->OnReadable(); }
  // "" when HTTP is off; else host:port as bound.
  std::string metrics_address() const { return ops_->metrics_address(); }

  // Once per loop iteration: READY=1 the first time, then a STATUS= line at most once a second.
  void Tick(std::chrono::steady_clock::time_point now);
  // A beat the agent sent at sent_unix_ms arrived at now_unix_ms.
  void OnHeartbeat(int64_t sent_unix_ms, int64_t now_unix_ms);
  // After the controller handled `event`: counts it, and observes the launch latency when its
  // attempt has just reached Running.
  void AfterWorkerEvent(const v1::WorkerEvent& event, int64_t now_unix_ms);
  // What JobController::OnProgressReport did with each update of one report: counted in
  // trainlet_coordinator_progress_updates_total{result}.
  void OnProgressFolded(const std::vector<ProgressFoldResult>& results);
  // Rendezvous fence: from the first rank's arrival to the release of all ranks.
  void OnFence(std::chrono::duration<double> elapsed) { fence_->Observe(elapsed.count()); }
  // What the admission passes did since the last call: preemptions and admission wait times per
  // ClusterQueue (the queue gauges are read from the controller when someone scrapes).
  void OnAdmissions(const AdmissionStats& stats);
  // One scheduling pass of the loop's tick (JobController::Schedule).
  void OnSchedulePass(std::chrono::duration<double> elapsed) {
    schedule_pass_->Observe(elapsed.count());
  }
  // The coordinator refused an agent's registration (name taken, key bound to another name).
  void OnRegistrationRefused() { registrations_refused_->Inc(); }
  void OnStopping() { ops_->NotifyStopping(); }
  // Exports the handshakes `zap` refused, by role, as
  // trainlet_coordinator_handshakes_refused_total{role}: read when someone scrapes. `zap` must
  // outlive this object. Called once, after Create.
  void CountHandshakes(const ZapAuthenticator* zap);

  MetricsRegistry& metrics() { return ops_->metrics(); }

 private:
  void Collect();
  std::string StatusLine() const;

  std::unique_ptr<OpsEndpoint> ops_;
  const NodeRegistry* registry_ = nullptr;
  const JobController* jobs_ = nullptr;
  const DropCounters* drops_ = nullptr;
  const ZapAuthenticator* zap_ = nullptr;  // null until CountHandshakes
  bool serving_ = false;
  std::chrono::steady_clock::time_point next_status_{};
  std::map<std::string, uint32_t> launch_observed_;  // job -> attempt whose latency was recorded
  Family<Gauge>* nodes_ = nullptr;
  Family<Gauge>* jobs_by_phase_ = nullptr;
  Family<Counter>* dropped_ = nullptr;
  Family<Counter>* handshakes_refused_ = nullptr;
  Histogram* launch_latency_ = nullptr;
  Histogram* heartbeat_lag_ = nullptr;
  Histogram* fence_ = nullptr;
  Histogram* schedule_pass_ = nullptr;
  Family<Gauge>* queue_pending_ = nullptr;
  Family<Gauge>* queue_admitted_ = nullptr;
  Family<Gauge>* queue_used_ = nullptr;
  Family<Gauge>* queue_nominal_ = nullptr;
  Family<Counter>* queue_preemptions_ = nullptr;
  Family<Histogram>* queue_wait_ = nullptr;
  Counter* started_ = nullptr;
  Counter* registrations_refused_ = nullptr;
  Family<Counter>* failed_ = nullptr;
  Family<Counter>* progress_updates_ = nullptr;
  Family<Gauge>* job_progress_ = nullptr;  // per job with progress; rebuilt at each scrape
  Family<Gauge>* job_eta_ = nullptr;
};

}  // namespace trainlet::coordinator
