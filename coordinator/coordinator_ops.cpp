#include "coordinator/coordinator_ops.h"

#include <spdlog/spdlog.h>

#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

constexpr JobPhase kPhases[] = {JobPhase::kPending,    JobPhase::kStarting,  JobPhase::kRunning,
                                JobPhase::kRestarting, JobPhase::kSucceeded, JobPhase::kFailed,
                                JobPhase::kSuspended};

}  // namespace

Result<std::unique_ptr<CoordinatorOps>> CoordinatorOps::Create(
    const std::string& metrics_address, bool best_effort, std::unique_ptr<ServiceNotifier> notifier,
    const NodeRegistry* registry, const JobController* jobs, const DropCounters* drops) {
  auto c = std::make_unique<CoordinatorOps>();
  TRAINLET_ASSIGN_OR_RETURN(c->ops_,
                            OpsEndpoint::Create(metrics_address, std::move(notifier), best_effort));
  c->registry_ = registry;
  c->jobs_ = jobs;
  c->drops_ = drops;
  MetricsRegistry& m = c->ops_->metrics();
  m.AddGauge("trainlet_build_info", "Version of this trainlet daemon (always 1)",
             {"component", "version"})
      .With({"coordinator", TRAINLET_VERSION})
      .Set(1);
  c->nodes_ =
      &m.AddGauge("trainlet_coordinator_nodes", "Registered nodes by liveness state", {"state"});
  c->jobs_by_phase_ = &m.AddGauge("trainlet_coordinator_jobs", "TrainJobs by phase", {"phase"});
  // From the first attempt's submission (or a restart's placement) until every rank of the
  // attempt runs: seconds for a healthy cluster, minutes when the job waited for room.
  c->launch_latency_ =
      &m.AddHistogram("trainlet_coordinator_launch_latency_seconds",
                      "Time from a TrainJob's submission (a restart: its placement) until all "
                      "ranks of the attempt run",
                      {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800})
           .Get();
  // Agent send to coordinator receive; includes clock skew between the two hosts, and values
  // above the heartbeat interval mean a node is near Suspect.
  c->heartbeat_lag_ =
      &m.AddHistogram("trainlet_coordinator_heartbeat_lag_seconds",
                      "Coordinator receive time minus the agent's send time of "
                      "each heartbeat (negative skew counts as 0)",
                      {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5})
           .Get();
  c->fence_ = &m.AddHistogram("trainlet_coordinator_fence_seconds",
                              "Rendezvous fence time: first rank's arrival to all ranks' release",
                              LatencyBucketsSeconds())
                   .Get();
  // One JobController::Schedule of the loop's tick: deadlines, timeouts and placing every
  // pending job. bench/scheduler reads it; the bound is 20 ms at 10,000 pending jobs.
  c->schedule_pass_ = &m.AddHistogram("trainlet_coordinator_schedule_pass_seconds",
                                      "Time of one scheduling pass of the loop's tick",
                                      {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                       0.05, 0.1, 0.2, 0.5, 1, 2})
                           .Get();
  // Queues (issue 14), by ClusterQueue; empty while no queue objects exist.
  c->queue_pending_ =
      &m.AddGauge("trainlet_queue_pending_jobs",
                  "TrainJobs waiting in the ClusterQueue's LocalQueues", {"cluster_queue"});
  c->queue_admitted_ = &m.AddGauge("trainlet_queue_admitted_jobs",
                                   "TrainJobs holding the ClusterQueue's quota", {"cluster_queue"});
  c->queue_used_ = &m.AddGauge(
      "trainlet_queue_quota_used",
      "Quota the admitted TrainJobs use (cpu in millicores, memory in bytes, else devices)",
      {"cluster_queue", "flavor", "resource"});
  c->queue_nominal_ = &m.AddGauge("trainlet_queue_quota_nominal",
                                  "The ClusterQueue's nominal quota, in the units of _used",
                                  {"cluster_queue", "flavor", "resource"});
  c->queue_preemptions_ = &m.AddCounter(
      "trainlet_queue_preemptions_total",
      "Admitted TrainJobs preempted, by the ClusterQueue they were admitted by", {"cluster_queue"});
  c->queue_wait_ =
      &m.AddHistogram("trainlet_queue_admission_wait_seconds",
                      "Time a TrainJob waited in its queue before admission",
                      {0.01, 0.1, 1, 5, 30, 60, 300, 1800, 3600, 14400, 86400}, {"cluster_queue"});
  c->started_ = &m.AddCounter("trainlet_coordinator_workers_started_total",
                              "Worker processes the agents reported started")
                     .Get();
  c->registrations_refused_ =
      &m.AddCounter("trainlet_coordinator_registrations_refused_total",
                    "Agent registrations refused (name taken, key bound to another name)")
           .Get();
  c->failed_ = &m.AddCounter(
      "trainlet_coordinator_workers_failed_total",
      "Workers the agents could not start (start_failed), that exited non-zero (exit_code) or "
      "were killed by a signal (signal; includes ranks trainlet stopped)",
      {"reason"});
  for (const char* r : {"start_failed", "exit_code", "signal"}) c->failed_->With({r});
  c->progress_updates_ =
      &m.AddCounter("trainlet_coordinator_progress_updates_total",
                    "Training progress updates agents forwarded, by what the coordinator did with "
                    "them (taken; dropped: unknown_job, stale_attempt, foreign_node, invalid)",
                    {"result"});
  for (auto r : {ProgressFoldResult::kTaken, ProgressFoldResult::kUnknownJob,
                 ProgressFoldResult::kStaleAttempt, ProgressFoldResult::kForeignNode,
                 ProgressFoldResult::kInvalid}) {
    c->progress_updates_->With({ProgressFoldResultName(r)});
  }
  // One series per job whose current attempt reported the value; a job that finishes keeps its
  // last value until it is deleted.
  c->job_progress_ =
      &m.AddGauge("trainlet_job_progress_percentage",
                  "Training progress the job's ranks last reported (0-100)", {"job"});
  c->job_eta_ = &m.AddGauge("trainlet_job_estimated_remaining_seconds",
                            "Remaining training time the job's ranks last estimated", {"job"});
  c->dropped_ =
      &m.AddCounter("trainlet_coordinator_messages_dropped_total",
                    "Messages from agents, operators and launchers dropped, by reason", {"reason"});
  CoordinatorOps* self = c.get();
  m.AddCollector([self] { self->Collect(); });
  c->ops_->SetReadyCheck([self] { return self->serving_; });
  if (!c->metrics_address().empty()) {
    spdlog::info("serving /metrics, /healthz and /readyz on http://{}", c->metrics_address());
  }
  return c;
}

void CoordinatorOps::Collect() {
  for (NodeState s : {NodeState::kReady, NodeState::kSuspect, NodeState::kLost}) {
    nodes_->With({NodeStateName(s)}).Set(0);
  }
  for (const auto& [name, node] : registry_->nodes()) {
    nodes_->With({NodeStateName(node.state)}).Add(1);
  }
  for (JobPhase p : kPhases) jobs_by_phase_->With({JobPhaseName(p)}).Set(0);
  std::map<std::string, uint32_t> live;
  for (const v1::JobStatus* j : jobs_->List()) {
    jobs_by_phase_->With({JobPhaseName(PhaseOf(*j))}).Add(1);
    if (auto it = launch_observed_.find(j->name()); it != launch_observed_.end()) live.insert(*it);
  }
  launch_observed_.swap(live);  // forget deleted jobs
  job_progress_->Clear();  // deleted jobs, and jobs whose new attempt has not reported, drop out
  job_eta_->Clear();
  for (const v1::JobStatus* j : jobs_->List()) {
    if (!j->has_trainer_status()) continue;
    const v1::TrainerStatus& t = j->trainer_status();
    if (t.has_progress_percentage()) job_progress_->With({j->name()}).Set(t.progress_percentage());
    if (t.has_estimated_remaining_seconds()) {
      job_eta_->With({j->name()}).Set(static_cast<double>(t.estimated_remaining_seconds()));
    }
  }
  queue_pending_->Clear();
  queue_admitted_->Clear();
  queue_used_->Clear();
  queue_nominal_->Clear();
  for (const auto& cq : jobs_->admitter().usage()) {
    queue_pending_->With({cq.name}).Set(static_cast<double>(cq.pending));
    queue_admitted_->With({cq.name}).Set(static_cast<double>(cq.admitted));
    for (const auto& f : cq.usage) {
      queue_used_->With({cq.name, f.flavor, f.resource}).Set(static_cast<double>(f.used));
      queue_nominal_->With({cq.name, f.flavor, f.resource}).Set(static_cast<double>(f.nominal));
    }
  }
  for (size_t r = 0; r < static_cast<size_t>(DropReason::kCount); ++r) {
    const auto reason = static_cast<DropReason>(r);
    Counter& c = dropped_->With({DropReasonName(reason)});
    c.Inc(static_cast<double>(drops_->Get(reason)) - c.value());  // mirrors a counter: never down
  }
  if (zap_ != nullptr) {
    for (const auto& [role, n] : zap_->refused_by_domain()) {
      Counter& c = handshakes_refused_->With({role});
      c.Inc(static_cast<double>(n) - c.value());
    }
  }
}

void CoordinatorOps::CountHandshakes(const ZapAuthenticator* zap) {
  zap_ = zap;
  handshakes_refused_ = &metrics().AddCounter(
      "trainlet_coordinator_handshakes_refused_total",
      "CURVE handshakes the coordinator refused (key not in the role's allowlist, or malformed), "
      "by the role of the endpoint they came to (other: malformed requests)",
      {"role"});
  for (const char* role : {"agent", "operator", "exec"}) handshakes_refused_->With({role});
}

std::string CoordinatorOps::StatusLine() const {
  size_t ready = 0;
  size_t running = 0;
  for (const auto& [name, node] : registry_->nodes()) ready += node.state == NodeState::kReady;
  for (const v1::JobStatus* j : jobs_->List()) running += PhaseOf(*j) == JobPhase::kRunning;
  return std::to_string(ready) + (ready == 1 ? " node" : " nodes") + " Ready, " +
         std::to_string(running) + (running == 1 ? " job" : " jobs") + " running";
}

void CoordinatorOps::Tick(std::chrono::steady_clock::time_point now) {
  if (!serving_) {
    serving_ = true;
    ops_->NotifyReady(StatusLine());
    next_status_ = now + std::chrono::seconds(1);
    return;
  }
  // Counting every node and job each iteration would cost a large cluster's loop; once a
  // second is plenty for `systemctl status`.
  if (now < next_status_) return;
  next_status_ = now + std::chrono::seconds(1);
  ops_->NotifyStatus(StatusLine());
}

void CoordinatorOps::OnProgressFolded(const std::vector<ProgressFoldResult>& results) {
  for (ProgressFoldResult r : results) progress_updates_->With({ProgressFoldResultName(r)}).Inc();
}

void CoordinatorOps::OnHeartbeat(int64_t sent_unix_ms, int64_t now_unix_ms) {
  if (sent_unix_ms <= 0) return;  // an agent that does not say when it sent
  heartbeat_lag_->Observe(static_cast<double>(std::max<int64_t>(0, now_unix_ms - sent_unix_ms)) /
                          1000.0);
}

void CoordinatorOps::AfterWorkerEvent(const v1::WorkerEvent& event, int64_t now_unix_ms) {
  switch (event.kind()) {
    case v1::WorkerEvent::KIND_STARTED:
      started_->Inc();
      break;
    case v1::WorkerEvent::KIND_START_FAILED:
      failed_->With({"start_failed"}).Inc();
      break;
    case v1::WorkerEvent::KIND_EXITED:
      if (event.signal() != 0) {
        failed_->With({"signal"}).Inc();
      } else if (event.exit_code() != 0) {
        failed_->With({"exit_code"}).Inc();
      }
      return;
    default:
      return;
  }
  const v1::JobStatus* job = jobs_->Find(event.job());
  if (job == nullptr || PhaseOf(*job) != JobPhase::kRunning || job->attempt() != event.attempt())
    return;
  uint32_t& observed = launch_observed_[job->name()];
  if (observed == job->attempt()) return;
  observed = job->attempt();
  int64_t since = job->created_unix_ms();
  if (job->attempt() > 1) {
    for (const auto& a : job->attempts()) {
      if (a.attempt() == job->attempt() && a.started_unix_ms() > 0) since = a.started_unix_ms();
    }
  }
  if (since > 0) {
    launch_latency_->Observe(static_cast<double>(std::max<int64_t>(0, now_unix_ms - since)) /
                             1000.0);
  }
}

void CoordinatorOps::OnAdmissions(const AdmissionStats& stats) {
  for (const auto& [cq, n] : stats.preemptions) {
    queue_preemptions_->With({cq}).Inc(static_cast<double>(n));
  }
  for (const auto& [cq, waits] : stats.wait_seconds) {
    for (double w : waits) queue_wait_->With({cq}).Observe(w);
  }
}

}  // namespace trainlet::coordinator
