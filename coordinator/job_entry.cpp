#include "coordinator/job_entry.h"

#include "coordinator/attempt_steps.h"
#include "coordinator/cluster_identity.h"
#include "coordinator/failure_rules.h"
#include "coordinator/job_key.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/placement_inputs.h"
#include "coordinator/replicated_job_users.h"
#include "coordinator/working_dir.h"
#include "plugins/plugin_status.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet::coordinator {

Result<std::unique_ptr<JobEntry>> BuildJobEntry(const trainjob::TrainJob& spec,
                                                const trainjob::TrainingRuntime& runtime,
                                                const JobEntryOptions& options,
                                                std::vector<std::string>& warnings) {
  auto job = std::make_unique<JobEntry>();
  job->spec = spec;
  job->runtime = runtime;
  TRAINLET_ASSIGN_OR_RETURN(trainjob::ResolvedTrainer trainer, trainjob::Resolve(spec, runtime));
  if (trainer.num_nodes < 1) {
    return InvalidError("TrainJob/" + spec.name + ": spec.trainer.numNodes: must be at least 1");
  }
  // Agents, paths and the ranks' environment know the job by its key (job_key.h).
  const std::string key = JobKey(spec.namespace_, spec.name);
  job->plan_template.job = key;
  job->plan_template.argv = trainer.argv;
  for (const auto& e : trainer.env) job->plan_template.env.emplace_back(e.name, e.value);
  job->plan_template.num_proc_per_node = trainer.num_proc_per_node;
  job->plan_template.stop_grace_ms = options.stop_grace_ms;
  job->plan_template.labels = runtime.labels;
  job->plan_template.annotations = spec.annotations;
  job->plan_template.working_dir = trainer.working_dir;
  job->plan_template.run_as_user = trainer.run_as_user;
  job->plan_template.run_as_group = trainer.run_as_group;
  job->plan_template.allow_privilege_escalation = trainer.allow_privilege_escalation;
  job->plan_template.fs_group = trainer.fs_group;
  const std::string framework = trainjob::FrameworkName(runtime.ml_policy.framework);
  job->plugin = options.select_plugin ? options.select_plugin(framework, runtime.labels)
                                      : SelectRuntimePlugin(framework, runtime.labels);

  v1::JobStatus& st = job->record.status;
  st.set_name(key);
  st.set_namespace_(NamespaceOrDefault(spec.namespace_));
  st.set_num_nodes(static_cast<uint32_t>(trainer.num_nodes));
  st.set_runtime(runtime.kind + "/" + runtime.name);
  st.set_plugin(job->plugin != nullptr ? std::string(job->plugin->name()) : framework);
  TRAINLET_ASSIGN_OR_RETURN(uint32_t max_restarts, RestartLimit(spec, runtime));
  st.set_max_restarts(max_restarts);
  TRAINLET_RETURN_IF_ERROR(StopWarningOf(spec, std::chrono::milliseconds(0)).status());
  TRAINLET_RETURN_IF_ERROR(RestartPolicyOf(spec).status());  // failure_rules.h
  TRAINLET_ASSIGN_OR_RETURN(job->stall, StallPolicyOf(spec, runtime));
  for (const auto& a : trainer.argv) st.add_command(a);
  if (!trainer.image.empty()) {
    warnings.push_back("TrainJob/" + spec.name + ": spec.trainer.image (" + trainer.image +
                       "): ignored, trainlet runs the command directly on the node");
  }
  if (job->plugin != nullptr) {
    TRAINLET_ASSIGN_OR_RETURN(job->procs_per_node, ToResult(job->plugin->ProcsPerNode(
                                                       trainer.num_proc_per_node, nullptr)));
  } else {
    job->procs_per_node = 1;
  }
  st.set_procs_per_node(job->procs_per_node);
  TRAINLET_ASSIGN_OR_RETURN(job->gang, GangRequestOf(spec, runtime, warnings));
  // A shared working dir: only nodes whose agent has a shared_dir (working_dir.h).
  auto place = WorkDirPlaceOf(spec.annotations);
  if (!place.ok()) return InvalidError("TrainJob/" + spec.name + ": " + place.status().message());
  job->gang.node_selector.merge(SharedDirSelector(*place));
  return job;
}

Result<std::unique_ptr<JobEntry>> NewJobEntry(const trainjob::TrainJob& spec,
                                              const trainjob::TrainingRuntime& runtime,
                                              const JobEntryOptions& options,
                                              const std::string& source, int64_t now_ms,
                                              std::vector<std::string>& warnings) {
  const trainjob::TrainingRuntime* rt = &runtime;
  auto built = BuildJobEntry(spec, runtime, options, warnings);
  if (!built.ok()) {
    // Named by its document, as the parser's errors are: a file of many jobs says which one.
    const std::string prefix = "TrainJob/" + spec.name + ": ";
    const std::string& why = built.status().message();
    return Status(built.status().code(), why.starts_with(prefix) ? why : prefix + why);
  }
  auto job = std::move(*built);
  // Checked for new jobs only: a stored job that sets one still loads, and fails as it did.
  if (job->plugin != nullptr) {
    if (Status st =
            CheckReservedEnv(job->plan_template, job->plugin->name(), job->plugin->ReservedEnv());
        !st.ok()) {
      return InvalidError("TrainJob/" + spec.name + ": " + st.message());
    }
  }
  // The runtime's other replicated jobs must be runnable (attempt_steps.h): refused at apply
  // rather than when placed. A stored job still loads, and fails when placed.
  TRAINLET_RETURN_IF_ERROR(StepsOf(spec, *rt).status());
  // Two users that would share the work dir on every node at once without one fsGroup can never
  // both start (replicated_job_users.h): refused now, not when a rank fails to start.
  TRAINLET_RETURN_IF_ERROR(CheckReplicatedJobUsers(spec, *rt));
  for (auto& w : StepWarnings(spec, *rt)) warnings.push_back(std::move(w));
  for (auto& w : UserWarnings(spec, *rt)) warnings.push_back(std::move(w));
  job->record.name = JobKey(spec.namespace_, spec.name);
  job->record.spec_yaml = spec.yaml;
  job->record.runtime_kind = rt->kind;
  job->record.runtime_name = rt->name;
  job->record.runtime_yaml = rt->yaml;
  v1::JobStatus& st = job->record.status;
  st.set_job_phase(v1::JOB_PHASE_PENDING);
  st.set_created_unix_ms(now_ms);
  st.set_uid(NewClusterId());  // this incarnation: random, as a cluster id (issue 19, defect 9)
  for (const auto& w : warnings) {
    if (w.rfind("TrainJob/" + spec.name + ":", 0) == 0) st.add_notes(w);
  }
  if (job->plugin == nullptr) {
    st.set_reason("NoRuntimePlugin: runtime " + rt->kind + "/" + rt->name + " needs the '" +
                  st.plugin() + "' runtime plugin, which this trainlet build does not have");
  }
  auto* ev = st.add_events();
  ev->set_unix_ms(now_ms);
  ev->set_type("Normal");
  ev->set_reason("Created");
  ev->set_message("applied from " + (source.empty() ? std::string("stdin") : source));
  if (spec.suspend) {
    TRAINLET_RETURN_IF_ERROR(ApplyTransition(st, JobTrigger::kSuspend,
                                             std::string(kReasonSuspended),
                                             "created with spec.suspend: true", now_ms));
  }
  return job;
}

}  // namespace trainlet::coordinator
