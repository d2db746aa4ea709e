#include "coordinator/working_dir.h"

#include "common/trainjob/v1_job.h"

namespace trainlet::coordinator {

Result<WorkDirPlace> WorkDirPlaceOf(const std::map<std::string, std::string>& annotations) {
  auto it = annotations.find(std::string(kWorkingDirAnnotation));
  if (it == annotations.end() || it->second.empty() || it->second == "node") {
    return WorkDirPlace::kNode;
  }
  if (it->second == "shared") return WorkDirPlace::kShared;
  return InvalidError("metadata.annotations[" + std::string(kWorkingDirAnnotation) +
                      "]: must be node or shared, got \"" + it->second + "\"");
}

std::map<std::string, std::string> SharedDirSelector(WorkDirPlace place) {
  if (place != WorkDirPlace::kShared) return {};
  return {{std::string(kSharedDirLabel), "true"}};
}

std::string WorkerCwdFor(WorkDirPlace place, const std::string& working_dir) {
  if (place != WorkDirPlace::kShared || (!working_dir.empty() && working_dir.front() == '/')) {
    return working_dir;
  }
  return working_dir.empty() ? std::string(kSharedWorkDirVar)
                             : std::string(kSharedWorkDirVar) + "/" + working_dir;
}

Status SetWorkerCwds(const PlanRequest& request, std::vector<v1::LaunchPlan>& plans) {
  TRAINLET_ASSIGN_OR_RETURN(const WorkDirPlace place, WorkDirPlaceOf(request.annotations));
  // A job converted from a v1 kind runs each replica in its own container's workingDir; an
  // MPIJob's one main worker is its launcher, whose workingDir is request.working_dir.
  TRAINLET_ASSIGN_OR_RETURN(const auto contract, trainjob::V1ContractOf(request.annotations));
  const bool per_replica = contract && contract->kind != trainjob::V1Kind::kMPIJob;
  for (auto& plan : plans) {
    for (auto& w : *plan.mutable_workers()) {
      if (!w.cwd().empty()) continue;  // the plugin's own choice
      // A step's container has its own workingDir, not the main container's.
      std::string dir = w.step().empty() ? request.working_dir : "";
      if (const trainjob::V1Replica* r = per_replica ? contract->ReplicaOfRank(w.rank()) : nullptr;
          r != nullptr && w.step().empty()) {
        dir = r->working_dir;
      }
      w.set_cwd(WorkerCwdFor(place, dir));
    }
  }
  return Status::Ok();
}

}  // namespace trainlet::coordinator
