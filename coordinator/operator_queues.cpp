#include "coordinator/operator_queues.h"

namespace trainlet::coordinator {

v1::QueueObject DescribeQueueObject(const kueue::QueueObject& o) {
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
  return out;
}

Result<v1::QueueObjectList> HandleQueueObjects(const v1::QueueObjectsRequest& req,
                                               QueueCatalog& catalog, JobStore& store) {
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
    if (o != nullptr) *list.add_objects() = DescribeQueueObject(*o);
    TRAINLET_RETURN_IF_ERROR(catalog.Delete(*kind, ns, req.name(), store));
    return list;
  }
  if (!req.name().empty()) {
    const kueue::QueueObject* o = catalog.Find(*kind, ns, req.name());
    if (o == nullptr) {
      const std::string where = kueue::Namespaced(*kind) ? " in namespace " + ns : "";
      return NotFoundError(req.kind() + "/" + req.name() + " not found" + where);
    }
    *list.add_objects() = DescribeQueueObject(*o);
    return list;
  }
  for (const kueue::QueueObject* o : catalog.List(*kind, req.all_namespaces() ? "" : ns)) {
    *list.add_objects() = DescribeQueueObject(*o);
  }
  return list;
}

}  // namespace trainlet::coordinator
