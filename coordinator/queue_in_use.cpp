#include "coordinator/queue_in_use.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/job_admitter.h"
#include "coordinator/job_key.h"

namespace trainlet::coordinator {
namespace {

bool NamesFlavor(const kueue::ClusterQueue& cq, const std::string& flavor) {
  for (const auto& group : cq.resource_groups) {
    for (const auto& f : group.flavors) {
      if (f.name == flavor) return true;
    }
  }
  return false;
}

// Whether the job's admission holds quota and satisfies `uses`.
template <typename Uses>
bool AdmissionUses(const v1::JobStatus& st, int64_t now_ms, Uses uses) {
  if (!st.has_admission() || st.admission().unmanaged()) return false;
  return JobAdmitter::HoldsQuota(st, now_ms) && uses(st.admission());
}

}  // namespace

std::vector<std::string> QueueObjectUsers(const kueue::QueueObject& object,
                                          const QueueCatalog& catalog,
                                          const std::vector<const v1::JobStatus*>& jobs,
                                          int64_t now_ms) {
  std::vector<std::string> out;
  size_t more = 0;
  auto add = [&](std::string user) {
    if (out.size() < kInUseShown) {
      out.push_back(std::move(user));
    } else {
      ++more;
    }
  };
  if (object.kind == kueue::Kind::kResourceFlavor) {
    for (const kueue::QueueObject* o : catalog.List(kueue::Kind::kClusterQueue)) {
      if (NamesFlavor(*o->cluster_queue, object.name)) add("ClusterQueue " + o->name);
    }
    for (const v1::JobStatus* st : jobs) {
      if (AdmissionUses(*st, now_ms, [&](const v1::QueueAdmission& a) {
            return std::any_of(a.resources().begin(), a.resources().end(),
                               [&](const auto& r) { return r.flavor() == object.name; });
          })) {
        add("TrainJob " + JobDisplayName(st->name()));
      }
    }
  } else if (object.kind == kueue::Kind::kClusterQueue) {
    for (const v1::JobStatus* st : jobs) {
      if (AdmissionUses(*st, now_ms, [&](const v1::QueueAdmission& a) {
            return a.cluster_queue() == object.name;
          })) {
        add("TrainJob " + JobDisplayName(st->name()));
      }
    }
  }
  if (more > 0) out.push_back("... and " + std::to_string(more) + " more");
  return out;
}

QueueDeletesDone FinishUnusedQueueDeletes(QueueCatalog& catalog, JobStore& store,
                                          const std::vector<const v1::JobStatus*>& jobs,
                                          int64_t now_ms) {
  QueueDeletesDone done;
  for (const kueue::Kind kind : {kueue::Kind::kClusterQueue, kueue::Kind::kResourceFlavor}) {
    std::vector<std::string> unused;
    for (const kueue::QueueObject* o : catalog.TerminatingObjects()) {
      if (o->kind == kind && QueueObjectUsers(*o, catalog, jobs, now_ms).empty())
        unused.push_back(o->name);
    }
    for (const std::string& name : unused) {
      const char* kind_name = kueue::KindName(kind);
      if (Status s = catalog.Delete(kind, "", name, store); !s.ok()) {
        spdlog::error("{}/{} is no longer in use but could not be removed: {}", kind_name, name,
                      s.message());
        ++done.failed;
        continue;
      }
      spdlog::info("{}/{} deleted: no longer in use (finalizer {} released)", kind_name, name,
                   QueueCatalog::kResourceInUseFinalizer);
      ++done.removed;
    }
  }
  return done;
}

}  // namespace trainlet::coordinator
