#include "coordinator/access_policy_run_as.h"

#include "coordinator/attempt_steps.h"
#include "coordinator/job_key.h"

namespace trainlet::coordinator {
namespace {

// Where replicated job `rj`'s container sits in `runtime`'s document.
std::string ContainerPath(const trainjob::TrainingRuntime& runtime, const std::string& rj) {
  std::string container;
  for (const auto& j : runtime.jobs) {
    if (j.name == rj && j.container) container = j.container->name;
  }
  return runtime.kind + "/" + runtime.name + ": spec.template.spec.replicatedJobs[" + rj +
         "].template.spec.template.spec.containers[" + container + "].securityContext.";
}

void Add(std::vector<RunAsAsk>& out, const std::string& path, const std::optional<int64_t>& user,
         const std::optional<int64_t>& group, const std::optional<int64_t>& fs_group) {
  if (user) out.push_back({path + "runAsUser", false, *user});
  if (group) out.push_back({path + "runAsGroup", true, *group});
  // A group each rank gets (a supplementary one), as runAsGroup gives one: the same rule. Its
  // field is the pod's, not the container's.
  if (fs_group) {
    const std::string pod = path.substr(0, path.find(".containers[")) + ".securityContext.";
    out.push_back({pod + "fsGroup", true, *fs_group});
  }
}

}  // namespace

std::vector<RunAsAsk> RunAsAsksOf(const JobEntry& job) {
  std::vector<RunAsAsk> out;
  const std::string main = job.runtime.launcher ? "launcher" : "node";
  Add(out, ContainerPath(job.runtime, main), job.plan_template.run_as_user,
      job.plan_template.run_as_group, job.plan_template.fs_group);
  // A runtime whose steps cannot be laid out asks nothing of them: its placement fails anyway.
  auto steps = StepsOf(job.spec, job.runtime);
  if (steps.ok()) {
    for (const StepSpec& s : steps->steps) {
      Add(out, ContainerPath(job.runtime, s.name), s.run_as_user, s.run_as_group, s.fs_group);
    }
  }
  return out;
}

Status CheckJobRunAs(const AccessPolicy& policy, const JobEntry& job, const std::string& user) {
  if (!policy.enforced()) return Status::Ok();
  Status s = policy.CheckRunAs(user, job.record.status.namespace_(), RunAsAsksOf(job));
  if (s.ok()) return s;
  return PermissionError("TrainJob/" + JobDisplayName(job.record.name) + ": " + s.message());
}

}  // namespace trainlet::coordinator
