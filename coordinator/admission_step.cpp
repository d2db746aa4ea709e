#include "coordinator/admission_step.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "coordinator/fair_share_history.h"
#include "coordinator/gang_planner.h"
#include "coordinator/job_key.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

// At most this often a pass runs when nothing changed: it refreshes the waits' numbers and the
// fair-sharing history.
constexpr int64_t kIdleAdmissionIntervalMs = 1000;

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// What a job held by admission checks shows as its wait, with the command that lets it go.
std::string ChecksWaitMessage(const std::string& key, const std::vector<std::string>& pending) {
  const JobRef ref = JobKeyRef(key);
  return "waiting for admission check" + std::string(pending.size() == 1 ? " " : "s ") +
         Joined(pending) + " (an admin runs: trainletctl admit-check trainjob/" + ref.name +
         (ref.namespace_ == "default" ? "" : " -n " + ref.namespace_) + " --check " +
         pending.front() + ")";
}

// "a100 (nodeLabels gpu=a100)": the flavors and the labels that keep its ranks on their nodes.
std::string Flavors(const admission::Admission& a, const QueueCatalog& catalog) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& r : a.resources) {
    if (!seen.insert(r.flavor).second) continue;
    out += (out.empty() ? "" : ", ") + r.flavor;
    const kueue::ResourceFlavor* f = catalog.FindFlavor(r.flavor);
    if (f == nullptr || f->node_labels.empty()) continue;
    out += " (nodeLabels " + FormatSelector(f->node_labels) + ")";
  }
  return out;
}

}  // namespace

void AdmissionStep::Run(const std::vector<JobEntry*>& jobs, int64_t now_ms) {
  active_ = admitter_.active();
  if (!active_) return;
  if (catalog_->generation() != catalog_generation_) {
    // A flavor's nodeLabels may have changed: jobs that found no room on its nodes try again.
    catalog_generation_ = catalog_->generation();
    for (JobEntry* job : jobs) job->unplaced_room = 0;
  }
  ReleaseQuota(jobs, now_ms);
  if (owner_->generation() == admitted_generation_ &&
      now_ms - last_admission_ms_ < kIdleAdmissionIntervalMs) {
    return;
  }
  last_admission_ms_ = now_ms;
  const AdmissionDecisions& d =
      admitter_.Pass(std::vector<const JobEntry*>(jobs.begin(), jobs.end()), now_ms);
  // The waiting jobs by their place in `jobs`: 10,000 of them wait in a deep queue, and looking
  // each up by name was a good part of a pass.
  for (const auto& w : d.result.pending) {
    NoteWait(*jobs[d.job_of_workload[w.workload]], w, WaitKindName(w.kind), now_ms);
  }
  for (size_t i = 0; i < d.unresolved.size(); ++i) {
    NoteWait(*jobs[d.unresolved_jobs[i]], d.unresolved[i], "NoPriorityClass", now_ms);
  }
  for (const auto& p : d.result.preemptions) PreemptForQueue(p, now_ms);
  for (const auto& [key, a] : d.result.admitted) AdmitJob(key, a, now_ms);
  admitted_generation_ = owner_->generation();
  StoreFairShareHistory(now_ms);
}

void AdmissionStep::StoreFairShareHistory(int64_t now_ms) {
  if (now_ms - history_written_ms_ < kFairShareHistoryWriteMs) return;
  // A failed write is tried again at the next pass; only the ordering of fair sharing after a
  // restart depends on it.
  const Status s =
      store_->PutClusterValue(kFairShareHistoryKey, EncodeUsageHistory(admitter_.history()));
  if (!s.ok()) {
    spdlog::warn("storing fair sharing's usage history: {}", s.message());
    return;
  }
  history_written_ms_ = now_ms;
}

void AdmissionStep::ReleaseQuota(const std::vector<JobEntry*>& jobs, int64_t now_ms) {
  for (JobEntry* job : jobs) {
    if (!job->record.status.has_admission() || JobAdmitter::HoldsQuota(*job, now_ms)) continue;
    job->record.status.clear_admission();
    job->record.status.clear_admission_checks_ready();  // a new admission is checked anew
    owner_->MarkDirty(*job);
  }
}

void AdmissionStep::AdmitJob(const std::string& key, const admission::Admission& a,
                             int64_t now_ms) {
  JobEntry* found = owner_->FindJob(key);
  if (found == nullptr) return;
  JobEntry& job = *found;
  v1::JobStatus& st = job.record.status;
  const int64_t waited_ms = st.has_queue_wait() ? now_ms - st.queue_wait().since_unix_ms() : 0;
  if (PhaseOf(st) == JobPhase::kSuspended) {
    // Preempted before: Kueue's suspend flipped back to false. A new attempt follows.
    auto resumed = owner_->ResumeAdmitted(key, "ClusterQueue " + a.cluster_queue, now_ms);
    if (!resumed.ok()) {
      spdlog::error("trainjob/{}: admitted but not resumed: {}", key, resumed.status().message());
      return;  // not admitted: the next pass tries again
    }
  }
  v1::QueueAdmission* out = st.mutable_admission();
  out->set_cluster_queue(a.cluster_queue);
  out->set_unix_ms(now_ms);
  out->set_borrowing(a.borrowing);
  out->set_unmanaged(a.unmanaged);
  for (const auto& r : a.resources) {
    auto* ar = out->add_resources();
    ar->set_resource(r.resource);
    ar->set_flavor(r.flavor);
    ar->set_amount(r.amount);
  }
  st.clear_queue_wait();
  st.set_priority(catalog_->PriorityValue(job.spec.priority_class).value_or(0));
  if (!a.unmanaged) {
    const std::string flavors = Flavors(a, *catalog_);
    const std::vector<std::string> checks = admitter_.PendingChecks(st);
    // With admission checks left, this is Kueue's QuotaReserved: the quota is held, the job
    // is placed once an admin marked every check Ready (AdmitCheck).
    AppendEvent(st, "Normal", checks.empty() ? "Admitted" : "QuotaReserved",
                (checks.empty() ? "Admitted by ClusterQueue " : "Quota reserved in ClusterQueue ") +
                    a.cluster_queue + (flavors.empty() ? "" : " (flavor " + flavors + ")") +
                    (a.borrowing ? ", borrowing from its cohort" : "") + ", after " +
                    std::to_string(waited_ms / 1000) + " s in the queue" +
                    (checks.empty() ? "" : "; waiting for admission checks " + Joined(checks)),
                now_ms);
    if (!checks.empty()) {
      v1::QueueWait* wait = st.mutable_queue_wait();
      wait->set_kind("AdmissionCheck");
      wait->set_message(ChecksWaitMessage(key, checks));
      wait->set_since_unix_ms(now_ms);
    }
    stats_.wait_seconds[a.cluster_queue].push_back(static_cast<double>(waited_ms) / 1000.0);
  }
  spdlog::info("trainjob/{} admitted by ClusterQueue {}", key, a.cluster_queue);
  owner_->MarkDirty(job);
}

void AdmissionStep::PreemptForQueue(const admission::Preemption& p, int64_t now_ms) {
  JobEntry* found = owner_->FindJob(p.victim);
  if (found == nullptr) return;
  JobEntry& victim = *found;
  v1::JobStatus& st = victim.record.status;
  static constexpr std::string_view kPrefix = "Preempted by ";
  std::string by = p.message;
  if (by.rfind(kPrefix, 0) == 0) by = by.substr(kPrefix.size());
  const JobPhase phase = PhaseOf(st);
  const bool running =
      phase == JobPhase::kStarting || phase == JobPhase::kRunning || phase == JobPhase::kRestarting;
  if (!running && (phase != JobPhase::kPending || st.deleting())) {
    // Already being stopped (preempted by an earlier pass, suspended, deleted or ended) and
    // still holding its quota: its ranks are in their grace, or may still run on a node that
    // went silent (JobAdmitter::HoldsQuota). ReleaseQuota lets it go once they are gone, and the
    // preemptor waits for that (Preempting). Preempted again, it would let the quota go now.
    return;
  }
  ++stats_.preemptions[st.admission().cluster_queue()];
  if (running) {
    auto done = owner_->Preempt(p.victim, by, now_ms);
    if (!done.ok()) {
      spdlog::error("trainjob/{}: cannot preempt: {}", p.victim, done.status().message());
      return;
    }
  } else {
    // Admitted but not placed yet: no rank runs, so its quota goes back at once.
    st.clear_admission();
    st.clear_admission_checks_ready();
    AppendEvent(st, "Normal", "Preempted", std::string(kPrefix) + by + "; requeued", now_ms);
    owner_->MarkDirty(victim);
  }
  if (JobEntry* pre = owner_->FindJob(p.preemptor); pre != nullptr) {
    const JobRef victim_ref = JobKeyRef(p.victim);  // namespace/name, as the victim's event
    AppendEvent(pre->record.status, "Normal", "Preempting",
                "Preempting " + victim_ref.namespace_ + "/" + victim_ref.name + " (" +
                    admission::PreemptionRuleName(p.rule) + ")",
                now_ms);
    owner_->MarkDirty(*pre);
  }
}

void AdmissionStep::NoteWait(JobEntry& job, const admission::PendingWorkload& w,
                             const std::string& kind, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  v1::QueueWait* wait = st.mutable_queue_wait();
  const bool first = wait->since_unix_ms() == 0;
  if (first) wait->set_since_unix_ms(now_ms);
  if (kind == "NeverFits" && wait->kind() != kind) {
    AppendEvent(st, "Warning", "NeverFits", w.message, now_ms);
    owner_->MarkDirty(job);  // said once, and stored
  }
  // The rest changes with some passes (position, free amounts): kept in memory, and stored with
  // the job's next write, not on its own. Mostly it is the same: compared, not rewritten.
  if (wait->kind() != kind) wait->set_kind(kind);
  if (wait->message() != w.message) wait->set_message(w.message);
  wait->set_position(w.position);
  if (!w.cluster_queue.empty() && st.cluster_queue() != w.cluster_queue) {
    st.set_cluster_queue(w.cluster_queue);
  }
  if (first) {
    st.set_queue(job.spec.queue_name);
    st.set_priority(catalog_->PriorityValue(job.spec.priority_class).value_or(0));
    owner_->MarkDirty(job);
  }
}

Result<v1::Kueue14AdmitCheckResult> AdmissionStep::AdmitCheck(const std::string& key,
                                                              const std::string& check,
                                                              int64_t now_ms,
                                                              const std::string& by) {
  JobEntry* found = owner_->FindJob(key);
  if (found == nullptr) return NotFoundError("trainjob/" + JobDisplayName(key) + " not found");
  JobEntry& job = *found;
  const v1::JobStatus& st = job.record.status;
  if (IsTerminal(PhaseOf(st)) || st.deleting()) {
    return InvalidError("trainjob/" + JobDisplayName(key) + " has finished or is being deleted");
  }
  // Its ClusterQueue: the one that reserved its quota, else the one it waits in.
  const std::string cq = st.has_admission() ? st.admission().cluster_queue() : st.cluster_queue();
  const std::vector<std::string> checks = admitter_.ChecksOf(cq);
  if (std::find(checks.begin(), checks.end(), check) == checks.end()) {
    return InvalidError("trainjob/" + JobDisplayName(key) + ": " +
                        (cq.empty() ? std::string("waits in no ClusterQueue")
                                    : "ClusterQueue " + cq + " has no admission check " + check +
                                          (checks.empty() ? " (it has none)"
                                                          : " (it has " + Joined(checks) + ")")));
  }
  v1::Kueue14AdmitCheckResult result;
  result.set_name(key);
  const auto& ready = st.admission_checks_ready();
  if (std::find(ready.begin(), ready.end(), check) == ready.end()) {
    v1::JobStatus next = st;
    next.add_admission_checks_ready(check);
    AppendEvent(next, "Normal", "AdmissionCheckReady",
                "Admission check " + check + " marked Ready" + (by.empty() ? "" : " by " + by),
                now_ms);
    const std::vector<std::string> left = admitter_.PendingChecks(next);
    if (left.empty() && next.has_admission() && next.queue_wait().kind() == "AdmissionCheck") {
      next.clear_queue_wait();
      AppendEvent(next, "Normal", "Admitted",
                  "Admitted by ClusterQueue " + cq + ": every admission check is Ready", now_ms);
    } else if (!left.empty() && next.queue_wait().kind() == "AdmissionCheck") {
      next.mutable_queue_wait()->set_message(ChecksWaitMessage(key, left));
    }
    // Stored before it returns, as a suspend is: the admin's word survives a restart.
    TRAINLET_RETURN_IF_ERROR(store_->UpdateStatus(key, next));
    job.record.status = std::move(next);
    owner_->MarkDirty(job);
    result.set_changed(true);
    spdlog::info("trainjob/{}: admission check {} Ready{}{}", key, check, by.empty() ? "" : " by ",
                 by);
  }
  for (const auto& name : admitter_.PendingChecks(job.record.status)) result.add_waiting(name);
  return result;
}

}  // namespace trainlet::coordinator
