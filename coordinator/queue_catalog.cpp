#include "coordinator/queue_catalog.h"

#include <spdlog/spdlog.h>

namespace trainlet::coordinator {

namespace {

// How apply results name an object: "ClusterQueue/team-a", "LocalQueue/team-a/user-queue"
// ("LocalQueue/user-queue" in namespace default, as TrainJobs are named there).
std::string ResultName(const kueue::QueueObject& o) {
  std::string ns = o.namespace_.empty() || o.namespace_ == "default" ? "" : o.namespace_ + "/";
  return std::string(kueue::KindName(o.kind)) + "/" + ns + o.name;
}

}  // namespace

bool QueueCatalog::Stage::writes() const {
  for (const auto& [object, change] : objects) {
    if (change != Change::kUnchanged) return true;
  }
  return false;
}

QueueCatalog::Key QueueCatalog::KeyOf(kueue::Kind kind, const std::string& namespace_,
                                      const std::string& name) {
  return {kind, kueue::Namespaced(kind) ? namespace_ : std::string(), name};
}

Status QueueCatalog::LoadStored(JobStore& store) {
  TRAINLET_ASSIGN_OR_RETURN(auto records, store.ListQueueObjects());
  for (const auto& rec : records) {
    auto parsed = kueue::ParseQueueDocuments(rec.yaml);
    if (!parsed.ok() || parsed->objects.size() != 1) {
      spdlog::error("stored {}/{} no longer parses; left untouched in the store{}{}", rec.kind,
                    rec.name, parsed.ok() ? "" : ": ",
                    parsed.ok() ? "" : parsed.status().message());
      continue;
    }
    kueue::QueueObject& o = parsed->objects[0];
    objects_[KeyOf(o.kind, o.namespace_, o.name)] = std::move(o);
  }
  if (!objects_.empty()) spdlog::info("loaded {} queue objects", objects_.size());
  return Status::Ok();
}

Result<QueueCatalog::Stage> QueueCatalog::StageObjects(
    const std::vector<trainjob::YamlDocument>& docs, const std::string& source,
    std::vector<std::string>* warnings) const {
  Stage stage;
  if (docs.empty()) return stage;
  auto parsed = kueue::ParseQueueDocuments(docs);
  if (!parsed.ok()) {
    return InvalidError((source.empty() ? "" : source + ": ") + parsed.status().message());
  }
  for (auto& w : parsed->warnings) warnings->push_back(std::move(w));
  for (auto& o : parsed->objects) {
    const kueue::QueueObject* held = Find(o.kind, o.namespace_, o.name);
    Stage::Change change = Stage::Change::kCreated;
    if (held != nullptr) {
      change = held->yaml == o.yaml ? Stage::Change::kUnchanged : Stage::Change::kConfigured;
      if (o.local_queue && held->local_queue &&
          o.local_queue->cluster_queue != held->local_queue->cluster_queue) {
        return InvalidError((source.empty() ? "" : source + ": ") + "LocalQueue/" + o.name +
                            ": spec.clusterQueue: field is immutable (it is \"" +
                            held->local_queue->cluster_queue + "\"; delete the LocalQueue first)");
      }
    }
    stage.objects.emplace_back(std::move(o), change);
  }
  return stage;
}

Status QueueCatalog::Store(const Stage& stage, JobStore& store) {
  for (const auto& [o, change] : stage.objects) {
    if (change == Stage::Change::kUnchanged) continue;
    TRAINLET_RETURN_IF_ERROR(
        store.PutQueueObject({kueue::KindName(o.kind), o.namespace_, o.name, o.yaml}));
  }
  return Status::Ok();
}

void QueueCatalog::Commit(Stage stage, v1::ApplyResult& result) {
  for (auto& [o, change] : stage.objects) {
    const std::string name = ResultName(o);
    switch (change) {
      case Stage::Change::kCreated:
        result.add_created(name);
        break;
      case Stage::Change::kConfigured:
        result.add_configured(name);
        break;
      case Stage::Change::kUnchanged:
        result.add_unchanged(name);
        continue;
    }
    Key key = KeyOf(o.kind, o.namespace_, o.name);
    objects_[std::move(key)] = std::move(o);
    ++generation_;  // only for a change: every apply commits, most with no queue object
  }
}

Status QueueCatalog::Delete(kueue::Kind kind, const std::string& namespace_,
                            const std::string& name, JobStore& store) {
  auto it = objects_.find(KeyOf(kind, namespace_, name));
  if (it == objects_.end()) {
    const std::string ns = kueue::Namespaced(kind) ? " in namespace " + namespace_ : "";
    return NotFoundError(std::string(kueue::KindName(kind)) + "/" + name + " not found" + ns);
  }
  TRAINLET_RETURN_IF_ERROR(
      store.DeleteQueueObject(kueue::KindName(kind), it->second.namespace_, name));
  objects_.erase(it);
  ++generation_;
  return Status::Ok();
}

const kueue::QueueObject* QueueCatalog::Find(kueue::Kind kind, const std::string& namespace_,
                                             const std::string& name) const {
  auto it = objects_.find(KeyOf(kind, namespace_, name));
  return it == objects_.end() ? nullptr : &it->second;
}

const kueue::LocalQueue* QueueCatalog::FindLocalQueue(const std::string& namespace_,
                                                      const std::string& name) const {
  const kueue::QueueObject* o = Find(kueue::Kind::kLocalQueue, namespace_, name);
  return o == nullptr ? nullptr : &*o->local_queue;
}

const kueue::ClusterQueue* QueueCatalog::FindClusterQueue(const std::string& name) const {
  const kueue::QueueObject* o = Find(kueue::Kind::kClusterQueue, "", name);
  return o == nullptr ? nullptr : &*o->cluster_queue;
}

const kueue::ResourceFlavor* QueueCatalog::FindFlavor(const std::string& name) const {
  const kueue::QueueObject* o = Find(kueue::Kind::kResourceFlavor, "", name);
  return o == nullptr ? nullptr : &*o->flavor;
}

const kueue::WorkloadPriorityClass* QueueCatalog::FindPriorityClass(const std::string& name) const {
  const kueue::QueueObject* o = Find(kueue::Kind::kWorkloadPriorityClass, "", name);
  return o == nullptr ? nullptr : &*o->priority_class;
}

const kueue::ClusterQueue* QueueCatalog::ClusterQueueOf(const std::string& namespace_,
                                                        const std::string& local_queue) const {
  const kueue::LocalQueue* lq = FindLocalQueue(namespace_, local_queue);
  return lq == nullptr ? nullptr : FindClusterQueue(lq->cluster_queue);
}

std::optional<int32_t> QueueCatalog::PriorityValue(const std::string& name) const {
  const kueue::WorkloadPriorityClass* p = FindPriorityClass(name);
  if (p == nullptr) return std::nullopt;
  return p->value;
}

std::vector<const kueue::ClusterQueue*> QueueCatalog::CohortMembers(
    const std::string& cohort) const {
  std::vector<const kueue::ClusterQueue*> out;
  if (cohort.empty()) return out;
  for (const auto* o : List(kueue::Kind::kClusterQueue)) {
    if (o->cluster_queue->cohort == cohort) out.push_back(&*o->cluster_queue);
  }
  return out;
}

std::vector<const kueue::QueueObject*> QueueCatalog::List(kueue::Kind kind,
                                                          const std::string& namespace_) const {
  std::vector<const kueue::QueueObject*> out;
  for (const auto& [key, o] : objects_) {
    if (std::get<0>(key) != kind) continue;
    if (!namespace_.empty() && kueue::Namespaced(kind) && o.namespace_ != namespace_) continue;
    out.push_back(&o);
  }
  return out;
}

}  // namespace trainlet::coordinator
