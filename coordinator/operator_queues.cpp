#include "coordinator/operator_queues.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "coordinator/queue_in_use.h"

namespace trainlet::coordinator {
namespace {

// "2026-11-25T13:39:47Z": how Kubernetes writes metadata.deletionTimestamp.
std::string Rfc3339(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

v1::QueueObject DescribeQueueObject(const kueue::QueueObject& o, const QueueCatalog& catalog,
                                    const std::vector<const v1::JobStatus*>& jobs, int64_t now_ms) {
  v1::QueueObject out;
  out.set_kind(kueue::KindName(o.kind));
  out.set_namespace_(o.namespace_);
  out.set_name(o.name);
  out.set_yaml(o.yaml);
  if (o.cluster_queue) {
    out.set_cohort(o.cluster_queue->cohort);
    out.set_queueing_strategy(kueue::QueueingStrategyName(o.cluster_queue->queueing_strategy));
    out.mutable_usage();  // present, empty: see QueueUsage
  }
  if (o.local_queue) {
    out.set_cluster_queue(o.local_queue->cluster_queue);
    out.mutable_usage();
  }
  if (o.flavor) {
    for (const auto& [k, v] : o.flavor->node_labels) (*out.mutable_node_labels())[k] = v;
  }
  if (o.priority_class) {
    out.set_value(o.priority_class->value);
    out.set_description(o.priority_class->description);
  }
  if (QueueCatalog::KeptWhileInUse(o.kind)) {
    out.add_finalizers(QueueCatalog::kResourceInUseFinalizer);
  }
  if (const QueueCatalog::Deletion* d = catalog.DeletionOf(o.kind, o.namespace_, o.name)) {
    out.set_deletion_timestamp(Rfc3339(d->unix_ms));
    for (auto& user : QueueObjectUsers(o, catalog, jobs, now_ms))
      out.add_in_use_by(std::move(user));
  }
  return out;
}

Result<v1::QueueObjectList> HandleQueueObjects(const v1::QueueObjectsRequest& req,
                                               QueueCatalog& catalog, JobStore& store,
                                               const std::vector<const v1::JobStatus*>& jobs,
                                               int64_t now_ms, const std::string& user) {
  const std::optional<kueue::Kind> kind = kueue::KindOf(req.kind());
  if (!kind) {
    return InvalidError("\"" + req.kind() +
                        "\" is not a queue kind (ResourceFlavor, ClusterQueue, LocalQueue or "
                        "WorkloadPriorityClass)");
  }
  const std::string ns = req.namespace_().empty() ? "default" : req.namespace_();
  v1::QueueObjectList list;
  if (req.remove()) {
    if (req.name().empty()) return InvalidError("delete " + req.kind() + ": a name is required");
    const kueue::QueueObject* o = catalog.Find(*kind, ns, req.name());
    const std::string ref = std::string(kueue::KindName(*kind)) + "/" + req.name();
    const std::string by = user.empty() ? "" : " by " + user;
    if (o != nullptr && QueueCatalog::KeptWhileInUse(*kind)) {
      // Kueue's resource-in-use finalizer: in use, it stays, Terminating, until unused.
      const std::vector<std::string> users = QueueObjectUsers(*o, catalog, jobs, now_ms);
      if (!users.empty()) {
        const bool already = catalog.DeletionOf(*kind, ns, req.name()) != nullptr;
        TRAINLET_RETURN_IF_ERROR(catalog.MarkDeleting(*kind, req.name(), now_ms, user, store));
        if (!already) {
          spdlog::info("{}: delete requested{}; Terminating while in use by {}", ref, by,
                       Joined(users));
        }
        *list.add_objects() = DescribeQueueObject(*o, catalog, jobs, now_ms);
        return list;
      }
    }
    if (o != nullptr) *list.add_objects() = DescribeQueueObject(*o, catalog, jobs, now_ms);
    TRAINLET_RETURN_IF_ERROR(catalog.Delete(*kind, ns, req.name(), store));
    spdlog::info("{} deleted{}", ref, by);
    return list;
  }
  if (!req.name().empty()) {
    const kueue::QueueObject* o = catalog.Find(*kind, ns, req.name());
    if (o == nullptr) {
      const std::string where = kueue::Namespaced(*kind) ? " in namespace " + ns : "";
      return NotFoundError(req.kind() + "/" + req.name() + " not found" + where);
    }
    *list.add_objects() = DescribeQueueObject(*o, catalog, jobs, now_ms);
    return list;
  }
  for (const kueue::QueueObject* o : catalog.List(*kind, req.all_namespaces() ? "" : ns)) {
    *list.add_objects() = DescribeQueueObject(*o, catalog, jobs, now_ms);
  }
  return list;
}

}  // namespace trainlet::coordinator
