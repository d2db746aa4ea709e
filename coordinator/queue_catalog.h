// QueueCatalog: Kueue's queue objects the coordinator holds (ResourceFlavors, ClusterQueues,
// LocalQueues, WorkloadPriorityClasses; common/kueue/kueue_model.h), and the lookups admission
// makes on them.
//
// Loaded once at start from JobStore's queue objects. Apply adds or replaces objects through a
// Stage, as RuntimeCatalog does with runtimes: the staged objects are written in the caller's
// store transaction (with the TrainJobs of the same file) and enter the catalog only once that
// transaction committed, so a refused file changes nothing. A re-apply replaces the object, as
// kubectl apply does; Delete removes one (store first, then memory).
//
// Kueue's finalizer kueue.x-k8s.io/resource-in-use: a ResourceFlavor or ClusterQueue deleted
// while something uses it (queue_in_use.h says what) is not removed but marked for deletion,
// Terminating, as Kubernetes sets metadata.deletionTimestamp; MarkDeleting stores the mark (one
// cluster value per object, "queue-deleting/<Kind>/<name>") before memory takes it, so a
// restarted coordinator keeps it. It is removed (object and mark in one store transaction, by
// Delete) once unused. A re-apply of a Terminating object replaces it and leaves it Terminating,
// as an update of a terminating object does on Kubernetes.
//
// Cross-object references are not required to resolve: a LocalQueue may name a ClusterQueue not
// applied yet, a ClusterQueue a missing flavor, a TrainJob a missing LocalQueue or priority
// class. Kueue accepts all of these too (the queue is inactive, the job waits); the lookups below
// answer null for them.
//
// Owned by JobController, on the coordinator's loop; no locks. Pointers returned by lookups stay
// valid until the next Commit or Delete.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/kueue/kueue_model.h"
#include "common/status.h"
#include "coordinator/job_store.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

class QueueCatalog {
 public:
  // The queue objects of one applied file, checked against the catalog, not yet stored.
  struct Stage {
    enum class Change { kCreated, kConfigured, kUnchanged };
    std::vector<std::pair<kueue::QueueObject, Change>> objects;
    bool empty() const { return objects.empty(); }
    // Whether anything must be written (an unchanged object is not).
    bool writes() const;
  };

  // The objects `store` holds, and their Terminating marks. A stored object that no longer parses
  // is logged and skipped (left in the store); a mark whose object is not held is logged and
  // removed from the store; errors are the store's.
  Status LoadStored(JobStore& store);

  // Parses `docs` (the file's Kueue documents, trainjob::ParsedFile::queue_documents) and sorts
  // them against the catalog: created, configured (the document differs) or unchanged. Invalid
  // naming `source` and the object: a document the parser refuses (kueue_model.h), or a LocalQueue
  // whose spec.clusterQueue differs from the one held (immutable, as Kueue's CRD says). Warnings
  // are appended to `warnings`, one for each object given that is Terminating (it stays so).
  Result<Stage> StageObjects(const std::vector<trainjob::YamlDocument>& docs,
                             const std::string& source, std::vector<std::string>* warnings) const;
  // Writes the staged objects that changed; the caller holds the store transaction.
  static Status Store(const Stage& stage, JobStore& store);
  // After the transaction committed: the staged objects replace or join the catalog, each listed
  // in `result` as created, configured or unchanged ("ClusterQueue/team-a",
  // "LocalQueue/team-a/user-queue"; the namespace is left out when it is "default").
  void Commit(Stage stage, v1::ApplyResult& result);
  // Removes one object, and its Terminating mark, in one store transaction, then from memory.
  // NotFound "<kind>/<name> not found" when the catalog has none (the store is not asked); the
  // store's errors leave memory as it was. `namespace_` is ignored for the cluster-scoped kinds.
  Status Delete(kueue::Kind kind, const std::string& namespace_, const std::string& name,
                JobStore& store);

  // The finalizer Kueue puts on ResourceFlavors and ClusterQueues.
  static constexpr const char* kResourceInUseFinalizer = "kueue.x-k8s.io/resource-in-use";
  // The cluster values (JobStore) that hold the Terminating marks.
  static constexpr const char* kDeletionPrefix = "queue-deleting/";
  // Whether objects of `kind` carry the finalizer: ResourceFlavor and ClusterQueue.
  static bool KeptWhileInUse(kueue::Kind kind);
  // A Terminating object's mark.
  struct Deletion {
    int64_t unix_ms = 0;  // when the delete came: metadata.deletionTimestamp
    std::string by;       // the user who asked ("" when unknown)
  };
  // Marks the object (of a kind KeptWhileInUse) Terminating: stored first, then memory. NotFound
  // as Delete; Invalid for another kind; OK, changing nothing, when it is marked already.
  Status MarkDeleting(kueue::Kind kind, const std::string& name, int64_t now_ms,
                      const std::string& by, JobStore& store);
  // The object's mark; null when it is not Terminating.
  const Deletion* DeletionOf(kueue::Kind kind, const std::string& namespace_,
                             const std::string& name) const;
  bool Terminating(kueue::Kind kind, const std::string& name) const {
    return DeletionOf(kind, "", name) != nullptr;
  }
  // The Terminating objects, by kind then name.
  std::vector<const kueue::QueueObject*> TerminatingObjects() const;
  size_t terminating_count() const { return deletions_.size(); }

  // Lookups (null / nullopt / empty when absent).
  const kueue::QueueObject* Find(kueue::Kind kind, const std::string& namespace_,
                                 const std::string& name) const;
  const kueue::LocalQueue* FindLocalQueue(const std::string& namespace_,
                                          const std::string& name) const;
  const kueue::ClusterQueue* FindClusterQueue(const std::string& name) const;
  const kueue::ResourceFlavor* FindFlavor(const std::string& name) const;
  const kueue::WorkloadPriorityClass* FindPriorityClass(const std::string& name) const;
  // The ClusterQueue the LocalQueue (namespace, name) points at, when both exist.
  const kueue::ClusterQueue* ClusterQueueOf(const std::string& namespace_,
                                            const std::string& local_queue) const;
  // The value of the WorkloadPriorityClass `name`; nullopt when there is none.
  std::optional<int32_t> PriorityValue(const std::string& name) const;
  // The ClusterQueues whose spec.cohort is `cohort` (not ""), by name.
  std::vector<const kueue::ClusterQueue*> CohortMembers(const std::string& cohort) const;
  // Every object of `kind`, by namespace then name; only namespace `namespace_` unless it is ""
  // (cluster-scoped kinds have namespace "").
  std::vector<const kueue::QueueObject*> List(kueue::Kind kind,
                                              const std::string& namespace_ = "") const;
  size_t size() const { return objects_.size(); }
  // Bumped when a Commit creates or changes an object, by every Delete and MarkDeleting (a
  // Terminating ClusterQueue admits nothing new): jobs that found no
  // room are tried again, as their flavors' nodeLabels may have changed (flavor_constraint.h).
  uint64_t generation() const { return generation_; }
  bool empty() const { return objects_.empty(); }

 private:
  using Key = std::tuple<kueue::Kind, std::string, std::string>;  // kind, namespace, name
  static Key KeyOf(kueue::Kind kind, const std::string& namespace_, const std::string& name);

  std::map<Key, kueue::QueueObject> objects_;
  std::map<Key, Deletion> deletions_;  // the Terminating ones among objects_
  uint64_t generation_ = 0;
};

}  // namespace trainlet::coordinator
