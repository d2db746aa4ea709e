// The run-as rules of the access policy (access_policy.h) applied to a held job: which uids and
// gids its ranks would run as, and whether its user may ask them in its namespace.
//
// A job asks ids only through its runtime's containers (securityContext runAsUser / runAsGroup of
// the container trainlet runs, else of its pod, and its pod's fsGroup, a group like runAsGroup):
// the main one (the launcher's with a launcher, else node's; PlanRequest run_as_user /
// run_as_group) and each other replicated job's (StepsOf). A TrainJob cannot set them (its
// runtimePatches are read only for nodeSelector and tolerations), and the Training Operator's v1
// kinds ignore securityContext with a warning, so they ask none.
//
// Pure functions of their arguments; any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/access_policy.h"
#include "coordinator/job_entry.h"

namespace trainlet::coordinator {

// Every id `job` asks, each with the path of its field in the job's runtime, e.g.
// "ClusterTrainingRuntime/torch-distributed: spec.template.spec.replicatedJobs[node].template.spec
// .template.spec.containers[node].securityContext.runAsUser". Empty: it asks none.
std::vector<RunAsAsk> RunAsAsksOf(const JobEntry& job);

// `policy`.CheckRunAs for `job`'s asks in its namespace, for `user` (the operator who applies it,
// or JobStatus.applied_by at placement). The refusal names TrainJob/<name> first.
Status CheckJobRunAs(const AccessPolicy& policy, const JobEntry& job, const std::string& user);

}  // namespace trainlet::coordinator
