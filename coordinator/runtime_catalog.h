// RuntimeCatalog: the (Cluster)TrainingRuntimes a TrainJob's runtimeRef can name.
//
// Two sources, loaded once at start: the runtimes trainlet ships (every *.yaml of a directory,
// read in name order) and those applied before (JobStore's runtime table), which win over a
// shipped one of the same kind and name. Apply adds more through a Stage: the runtimes of one
// applied file are visible to that file's jobs at once, written in the caller's store
// transaction, and enter the catalog only once that transaction committed.
//
// Owned by JobController, on the coordinator's loop; no locks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "coordinator/job_store.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

class RuntimeCatalog {
 public:
  // The runtimes of one applied file, keyed "<kind>/<name>" (a TrainingRuntime outside namespace
  // "default": "TrainingRuntime/<namespace>/<name>"), not yet stored.
  struct Stage {
    std::map<std::string, trainjob::TrainingRuntime> runtimes;
    bool empty() const { return runtimes.empty(); }
  };

  // Every *.yaml in `dir` ("" for none). kIo naming the dir when it cannot be listed; Invalid
  // naming the file when one does not parse (nothing after it is loaded).
  Status LoadShipped(const std::string& dir);
  // The runtimes `store` holds. A stored runtime that no longer parses is logged and skipped;
  // errors are the store's.
  Status LoadStored(JobStore& store);

  // The runtime `kind`/`name`, or null; `name` is "<namespace>/<name>" for a TrainingRuntime
  // outside namespace "default". The pointer is valid until the next Commit.
  const trainjob::TrainingRuntime* Find(const std::string& kind, const std::string& name) const;
  size_t size() const { return runtimes_.size(); }
  // Every runtime, keyed as Stage::runtimes.
  const std::map<std::string, trainjob::TrainingRuntime>& all() const { return runtimes_; }

  // Apply's runtime documents.
  static Stage StageRuntimes(const std::vector<trainjob::TrainingRuntime>& runtimes);
  // The runtime `ref` names, looked up in `stage` first, then here: a TrainingRuntime in the
  // job's namespace (`job_namespace`, "" meaning "default"), as Kubeflow resolves it; a
  // ClusterTrainingRuntime cluster-wide (the shipped runtimes are those). NotFound naming the job
  // (`job_name`) and every runtime of the catalog when neither has it. Valid as long as `stage`
  // and this catalog are unchanged.
  Result<const trainjob::TrainingRuntime*> Resolve(const Stage& stage,
                                                   const std::string& job_namespace,
                                                   const std::string& job_name,
                                                   const trainjob::TrainJob::RuntimeRef& ref) const;
  // The same for a job of namespace "default".
  Result<const trainjob::TrainingRuntime*> Resolve(
      const Stage& stage, const std::string& job_name,
      const trainjob::TrainJob::RuntimeRef& ref) const {
    return Resolve(stage, "", job_name, ref);
  }
  // Writes the staged runtimes; the caller holds the store transaction.
  static Status Store(const Stage& stage, JobStore& store);
  // After the transaction committed: the staged runtimes replace or join the catalog, each listed
  // in `result` as created or configured.
  void Commit(Stage stage, v1::ApplyResult& result);

 private:
  std::map<std::string, trainjob::TrainingRuntime> runtimes_;  // as Stage::runtimes
};

}  // namespace trainlet::coordinator
