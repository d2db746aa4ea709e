#include "coordinator/queue_usage_view.h"

#include <algorithm>
#include <string>

#include "coordinator/job_key.h"

namespace trainlet::coordinator {
namespace {

// The LocalQueue a job's status says it waits in or was admitted through.
std::string LocalQueueOf(const v1::JobStatus& st, const JobAdmitter& admitter) {
  return st.queue().empty() ? admitter.default_local_queue() : st.queue();
}

void FillClusterQueue(v1::QueueObject& o, const JobAdmitter& admitter,
                      const std::vector<const v1::JobStatus*>& jobs, bool with_jobs) {
  v1::QueueUsage* u = o.mutable_usage();
  for (const auto& cq : admitter.usage()) {
    if (cq.name != o.name()) continue;
    u->set_pending(cq.pending);
    u->set_admitted(cq.admitted);
    for (const auto& f : cq.usage) {
      auto* fu = u->add_flavors();
      fu->set_flavor(f.flavor);
      fu->set_resource(f.resource);
      fu->set_nominal(f.nominal);
      fu->set_used(f.used);
      fu->set_borrowed(f.borrowed);
      fu->set_borrowing_limit(f.borrowing_limit.value_or(-1));
      fu->set_lending_limit(f.lending_limit.value_or(-1));
    }
  }
  if (!with_jobs) return;
  for (const v1::JobStatus* st : jobs) {
    if (!st->has_admission() || st->admission().cluster_queue() != o.name()) continue;
    auto* e = u->add_jobs();
    e->set_job(JobKeyRef(st->name()).name);
    e->set_namespace_(NamespaceOrDefault(st->namespace_()));
    e->set_admitted(true);
    e->set_priority(st->priority());
  }
  std::vector<const admission::PendingWorkload*> waiting;
  for (const auto& p : admitter.last().result.pending) {
    if (p.cluster_queue == o.name()) waiting.push_back(&p);
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const auto* a, const auto* b) { return a->position < b->position; });
  int64_t not_shown = 0;
  for (const auto* p : waiting) {
    if (static_cast<size_t>(u->jobs_size()) >= kQueueEntriesShown) {
      ++not_shown;
      continue;
    }
    auto* e = u->add_jobs();
    const JobRef key = JobKeyRef(p->key);
    e->set_job(key.name);
    e->set_namespace_(key.namespace_);
    e->set_position(p->position);
    e->set_wait_kind(WaitKindName(p->kind));
    e->set_message(p->message);
  }
  u->set_jobs_not_shown(not_shown);
}

void FillLocalQueue(v1::QueueObject& o, const JobAdmitter& admitter,
                    const std::vector<const v1::JobStatus*>& jobs) {
  v1::QueueUsage* u = o.mutable_usage();
  const std::string ns = NamespaceOrDefault(o.namespace_());
  for (const v1::JobStatus* st : jobs) {
    if (NamespaceOrDefault(st->namespace_()) != ns || LocalQueueOf(*st, admitter) != o.name()) {
      continue;
    }
    if (st->has_admission() && !st->admission().unmanaged()) {
      u->set_admitted(u->admitted() + 1);
    } else if (st->has_queue_wait()) {
      u->set_pending(u->pending() + 1);
    }
  }
}

}  // namespace

void FillQueueUsage(v1::QueueObjectList& list, const JobAdmitter& admitter,
                    const std::vector<const v1::JobStatus*>& jobs, bool with_jobs) {
  for (auto& o : *list.mutable_objects()) {
    if (o.kind() == "ClusterQueue") FillClusterQueue(o, admitter, jobs, with_jobs);
    if (o.kind() == "LocalQueue") FillLocalQueue(o, admitter, jobs);
  }
}

}  // namespace trainlet::coordinator
