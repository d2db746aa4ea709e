#include "coordinator/queue_catalog.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace trainlet::coordinator {

namespace {

// How apply results name an object: "ClusterQueue/team-a", "LocalQueue/team-a/user-queue"
// ("LocalQueue/user-queue" in namespace default, as TrainJobs are named there).
std::string ResultName(const kueue::QueueObject& o) {
  std::string ns = o.namespace_.empty() || o.namespace_ == "default" ? "" : o.namespace_ + "/";
  return std::string(kueue::KindName(o.kind)) + "/" + ns + o.name;
}

// The Terminating mark's cluster value: key "queue-deleting/<Kind>/<name>" (only cluster-scoped
// kinds carry the finalizer), value {"version":1,"deletedMs":1764000000000,"by":"alice"}.
std::string DeletionKey(kueue::Kind kind, const std::string& name) {
  return std::string(QueueCatalog::kDeletionPrefix) + kueue::KindName(kind) + "/" + name;
}

std::string DeletionValue(const QueueCatalog::Deletion& d) {
  return nlohmann::json{{"version", 1}, {"deletedMs", d.unix_ms}, {"by", d.by}}.dump();
}

// The kind and name of a mark's key and its value; nullopt for anything else.
struct StoredDeletion {
  kueue::Kind kind;
  std::string name;
  QueueCatalog::Deletion deletion;
};
std::optional<StoredDeletion> DecodeDeletion(const std::string& key, const std::string& value) {
  const std::string prefix = QueueCatalog::kDeletionPrefix;
  if (key.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string rest = key.substr(prefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 == rest.size()) return std::nullopt;
  const std::optional<kueue::Kind> kind = kueue::KindOf(rest.substr(0, slash));
  if (!kind || !QueueCatalog::KeptWhileInUse(*kind)) return std::nullopt;
  const auto doc = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("version") || doc["version"] != 1 ||
      !doc.contains("deletedMs") || !doc["deletedMs"].is_number_integer() || !doc.contains("by") ||
      !doc["by"].is_string()) {
    return std::nullopt;
  }
  return StoredDeletion{*kind,
                        rest.substr(slash + 1),
                        {doc["deletedMs"].get<int64_t>(), doc["by"].get<std::string>()}};
}

}  // namespace

bool QueueCatalog::KeptWhileInUse(kueue::Kind kind) {
  return kind == kueue::Kind::kResourceFlavor || kind == kueue::Kind::kClusterQueue;
}

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
  TRAINLET_ASSIGN_OR_RETURN(auto marks, store.ListClusterValues(kDeletionPrefix));
  for (const auto& [key, value] : marks) {
    const std::optional<StoredDeletion> d = DecodeDeletion(key, value);
    if (d && Find(d->kind, "", d->name) != nullptr) {
      deletions_[KeyOf(d->kind, "", d->name)] = d->deletion;
      continue;
    }
    // A mark of no object held (one that no longer parses, or a value not ours): it would make
    // an object applied later under the name Terminating at once.
    spdlog::warn("stored mark {} names no queue object held, or does not parse: removed", key);
    if (Status s = store.DeleteClusterValue(key); !s.ok()) {
      spdlog::warn("removing stored mark {}: {}", key, s.message());
    }
  }
  if (!objects_.empty()) {
    spdlog::info("loaded {} queue objects ({} Terminating)", objects_.size(), deletions_.size());
  }
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
      if (DeletionOf(o.kind, o.namespace_, o.name) != nullptr) {
        warnings->push_back(std::string(kueue::KindName(o.kind)) + "/" + o.name +
                            ": is Terminating (deleted while in use): it is updated, stays "
                            "Terminating and is removed once nothing uses it; apply it again "
                            "after that to create it anew");
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
  const bool marked = deletions_.count(it->first) > 0;
  TRAINLET_RETURN_IF_ERROR(store.Transaction([&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(
        store.DeleteQueueObject(kueue::KindName(kind), it->second.namespace_, name));
    return marked ? store.DeleteClusterValue(DeletionKey(kind, name)) : Status::Ok();
  }));
  deletions_.erase(it->first);
  objects_.erase(it);
  ++generation_;
  return Status::Ok();
}

Status QueueCatalog::MarkDeleting(kueue::Kind kind, const std::string& name, int64_t now_ms,
                                  const std::string& by, JobStore& store) {
  if (!KeptWhileInUse(kind)) {
    return InvalidError(std::string(kueue::KindName(kind)) + "/" + name +
                        ": only ResourceFlavors and ClusterQueues stay Terminating while in use");
  }
  const Key key = KeyOf(kind, "", name);
  if (objects_.count(key) == 0) {
    return NotFoundError(std::string(kueue::KindName(kind)) + "/" + name + " not found");
  }
  if (deletions_.count(key) > 0) return Status::Ok();
  const Deletion d{now_ms, by};
  TRAINLET_RETURN_IF_ERROR(store.PutClusterValue(DeletionKey(kind, name), DeletionValue(d)));
  deletions_[key] = d;
  ++generation_;
  return Status::Ok();
}

const QueueCatalog::Deletion* QueueCatalog::DeletionOf(kueue::Kind kind,
                                                       const std::string& namespace_,
                                                       const std::string& name) const {
  auto it = deletions_.find(KeyOf(kind, namespace_, name));
  return it == deletions_.end() ? nullptr : &it->second;
}

std::vector<const kueue::QueueObject*> QueueCatalog::TerminatingObjects() const {
  std::vector<const kueue::QueueObject*> out;
  for (const auto& [key, d] : deletions_) {
    auto it = objects_.find(key);
    if (it != objects_.end()) out.push_back(&it->second);
  }
  return out;
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
