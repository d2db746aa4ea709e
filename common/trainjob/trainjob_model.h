// The TrainJob, TrainingRuntime and ClusterTrainingRuntime objects of Kubeflow Trainer v2
// (trainer.kubeflow.org/v1alpha1), as trainlet reads them from YAML.
//
// Only what trainlet acts on is modelled. Every document is first checked against the CRD schema
// that Kubeflow ships (embedded in the binary), so a file that the Kubernetes API server would
// refuse is refused here too, with the field path; a field trainlet does not act on is reported
// as a warning, never as an error.
//
// All functions are pure: no I/O, no global state besides the lazily compiled schemas, safe to
// call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {

inline constexpr std::string_view kApiVersion = "trainer.kubeflow.org/v1alpha1";
inline constexpr std::string_view kApiGroup = "trainer.kubeflow.org";

// An environment variable with a literal value. Entries that use valueFrom (a field or secret
// reference, which needs the Kubernetes API) are skipped with a warning.
struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

struct ContainerSpec {
  std::string name, image;
  std::vector<std::string> command, args;
  std::vector<EnvVar> env;
  // workingDir as written ("" when unset): relative to the job's work dir on each node, or an
  // absolute path used as is (the agent checks it is a directory when the rank starts).
  std::string working_dir;
  // securityContext.runAsUser / runAsGroup, the container's, else its pod's: the uid / gid its
  // processes run as on the node, overriding the agent's run_as (docs/config.md). The rest of
  // securityContext is ignored with a warning.
  std::optional<int64_t> run_as_user, run_as_group;
  // securityContext.allowPrivilegeEscalation (the container's; a pod has none): unset or false,
  // its processes run with no_new_privs (agent/step/rank_identity.h).
  std::optional<bool> allow_privilege_escalation;
  // Its pod's securityContext.fsGroup (a container has none): a supplementary group of its
  // processes, and the group the job's work dir is shared through (agent/step/step_users.h).
  std::optional<int64_t> fs_group;
};

// Which spec.mlPolicy key is set; kPlain when none is.
enum class Framework { kPlain, kTorch, kMpi, kJax, kXgboost, kFlux };
// "plain", "torch", "mpi", "jax", "xgboost", "flux".
const char* FrameworkName(Framework framework);

// spec.mlPolicy.mpi, with the CRD's defaults filled in for absent fields.
struct MpiPolicy {
  int32_t num_proc_per_node = 1;
  std::string implementation = "OpenMPI";  // an empty mpiImplementation also reads as OpenMPI
  bool run_launcher_as_node = false;
  std::string ssh_auth_mount_path = "/root/.ssh";
};

struct MlPolicy {
  std::optional<int32_t> num_nodes;
  Framework framework = Framework::kPlain;
  // From mpi.numProcPerNode or flux.numProcPerNode, as decimal text. The v1alpha1 torch policy
  // has no such field; "auto" never comes from a runtime of this API version.
  std::optional<std::string> num_proc_per_node;
  std::optional<MpiPolicy> mpi;  // set iff framework == kMpi
};

// A pod toleration (core/v1 Toleration). operator is "Equal" (the default, also for "") or
// "Exists"; effect "" tolerates every effect.
struct Toleration {
  std::string key, op, value, effect;
  bool operator==(const Toleration&) const = default;
};

// One entry of a replicatedJob's dependsOn (JobSet): the job waits until `name` is "Ready"
// (every worker of it on the node has started) or "Complete" (every one exited 0).
struct JobDependency {
  std::string name;
  std::string status;  // "Ready" or "Complete"
  bool operator==(const JobDependency&) const = default;
};

// One replicatedJob of a runtime's JobSet template, as trainlet runs it. `node` (and `launcher`,
// which runtime plugins handle) is the main one; every other is a step that runs `replicas`
// workers on every placed node (docs/runtimes.md, "Replicated jobs").
struct ReplicatedJob {
  std::string name;
  int32_t replicas = 1;  // JobSet's default
  // The container named like the job, else "node", else the first; nullopt without containers.
  std::optional<ContainerSpec> container;
  // Checked at parse time: every name is another job of the runtime, no cycle, at most 5.
  std::vector<JobDependency> depends_on;
};

// One entry of a runtime's JobSet failurePolicy.rules (failure_policy.h reads and checks them).
// Lists are as written; an empty list matches everything.
struct FailureRule {
  std::string name;
  // FailJobSet, RestartJobSet or RestartJobSetAndIgnoreMaxRestarts. JobSet's RestartJob and
  // RestartJobAndIgnoreMaxRestarts read as the JobSet-wide ones (trainlet restarts whole gangs).
  std::string action;
  std::vector<std::string> on_job_failure_reasons;           // Kubernetes Job failure reasons
  std::vector<std::string> on_job_failure_message_patterns;  // regexes over the Job's message
  std::vector<std::string> target_replicated_jobs;           // replicatedJob names
  bool operator==(const FailureRule&) const = default;
};

struct TrainingRuntime {
  std::string kind;              // "ClusterTrainingRuntime" or "TrainingRuntime"
  std::string name, namespace_;  // namespace_ is "" for cluster-scoped runtimes (and when unset)
  std::map<std::string, std::string> labels;
  MlPolicy ml_policy;
  // Container "node" of replicatedJob "node", else that job's first container.
  std::optional<ContainerSpec> node;
  // Container "node" (else the first) of replicatedJob "launcher", when the runtime has one.
  std::optional<ContainerSpec> launcher;
  std::vector<std::string> replicated_jobs;  // names, in file order
  std::vector<ReplicatedJob> jobs;           // the same jobs, modelled, in file order
  // nodeSelector and tolerations of replicatedJob "node"'s pod template
  // (spec.template.spec.replicatedJobs[node].template.spec.template.spec): where ranks may run.
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  int32_t max_restarts = 0;  // spec.template.spec.failurePolicy.maxRestarts; 0 if absent
  std::vector<FailureRule> failure_rules;  // spec.template.spec.failurePolicy.rules, in order
  // spec.template.spec.ttlSecondsAfterFinished: a finished job is deleted this long after it
  // finished. nullopt: the coordinator's default (keep).
  std::optional<int32_t> ttl_seconds_after_finished;
  std::string yaml;  // this document, re-emitted as YAML (comments are not kept)
};

struct TrainJob {
  std::string name, namespace_;  // namespace_ "" when unset
  std::map<std::string, std::string> labels, annotations;
  struct RuntimeRef {
    std::string api_group = std::string(kApiGroup);
    std::string kind = "ClusterTrainingRuntime";
    std::string name;
  } runtime_ref;
  struct Trainer {
    std::string image;
    std::vector<std::string> command, args;
    std::vector<EnvVar> env;
    std::optional<int32_t> num_nodes;
    std::optional<std::string> num_proc_per_node;  // decimal text ("4") in v1alpha1
    // resourcesPerNode.requests, falling back to .limits for a resource with no request (as
    // Kubernetes defaults requests to limits). Values as written: cpu -> "2", memory -> "4Gi",
    // nvidia.com/gpu -> "8".
    std::map<std::string, std::string> resources_per_node;
  } trainer;
  // metadata.labels kueue.x-k8s.io/queue-name and kueue.x-k8s.io/priority-class ("" when unset):
  // the LocalQueue the job waits in and its WorkloadPriorityClass. Either may name an object not
  // applied (yet): Kueue accepts that too, and the job waits.
  std::string queue_name, priority_class;
  // From spec.runtimePatches[*]: the nodeSelector and tolerations patched into replicatedJob
  // "node"'s pod spec. They narrow where ranks run on top of the runtime's own (a key set by both
  // takes the TrainJob's value).
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  bool suspend = false;
  std::optional<int64_t> active_deadline_seconds;
  // spec.initializer.dataset and .model: what the runtime's dataset-initializer and
  // model-initializer steps fetch (STORAGE_URI) and the env they add. nullopt when unset.
  struct Initializer {
    std::string storage_uri;
    std::vector<EnvVar> env;
  };
  std::optional<Initializer> dataset_initializer, model_initializer;
  std::string yaml;  // this document, re-emitted as YAML (comments are not kept)
};

// A Training Operator job (kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, or
// mpi-operator's kubeflow.org/v2beta1 MPIJob) converted into a TrainJob and the runtime made for
// it alone (v1_conversion.h). The runtime is not a catalog runtime: it is stored with the job.
struct ConvertedJob {
  std::string kind;         // "PyTorchJob", ...
  std::string api_version;  // "kubeflow.org/v1", "kubeflow.org/v2beta1"
  std::string source_yaml;  // the document as applied, re-emitted
  TrainJob job;
  TrainingRuntime runtime;
};

struct ParsedFile {
  std::vector<TrainJob> jobs;
  std::vector<TrainingRuntime> runtimes;
  std::vector<ConvertedJob> converted;  // v1 jobs, in file order
  // Documents of Kueue's API (apiVersion kueue.x-k8s.io/..., or a kind ResourceFlavor,
  // ClusterQueue, LocalQueue or WorkloadPriorityClass), set aside unread, in file order, for
  // common/kueue's parser (kueue::ParseQueueDocuments): the caller parses them and refuses the
  // file when they are invalid.
  std::vector<YamlDocument> queue_documents;
  // Fields trainlet ignores, each naming its document and path, e.g.
  // "TrainJob/runtime-patches-example: spec.runtimePatches: ignored (pod customisation has no
  // effect on bare metal)".
  std::vector<std::string> warnings;
};

// The document already stored for an object applied again ("TrainJob", namespace, name), or
// nullopt when there is none. See ParseDocuments.
using StoredDocument = std::function<std::optional<std::string>(
    std::string_view kind, const std::string& namespace_, const std::string& name)>;

// Parses one or more YAML documents separated by `---` (empty and comment-only documents are
// skipped). Each document must be a TrainJob, TrainingRuntime or ClusterTrainingRuntime of
// apiVersion trainer.kubeflow.org/v1alpha1, or a Training Operator job of a kind and apiVersion
// of v1_job.h (converted, into ParsedFile::converted), and valid under its CRD schema. Any invalid
// document fails the whole call: nothing is half-accepted. Errors (kInvalid) name the document, as
// "<Kind>/<name>" or "document N", and the field path:
//   "TrainJob/hello: spec.trainer.numNodes: must be an integer, got \"three\""
//   "document 1: line 4, column 3: YAML syntax error: ..."
//   "document 1: apiVersion: must be trainer.kubeflow.org/v1alpha1, got \"v1\""
//   "document 1: kind: \"Pod\" is not TrainJob, TrainingRuntime or ClusterTrainingRuntime"
// metadata.name is required: for a TrainJob an RFC 1035 label (lowercase letter first, then
// lowercase alphanumerics and '-', at most 63), as the TrainJob CRD demands; for runtimes a
// DNS-1123 subdomain (dots allowed, at most 253), as Kubeflow's own runtime names need.
// Inputs over 4 MiB, nested deeper than 64 levels or with aliases expanding past a million nodes
// are refused.
//
// With `stored`, a TrainJob that `stored` knows is applied as kubectl applies it: the document is
// laid over the stored one (maps merge key by key, anything else is replaced, a null removes the
// key; MergeApplied in apply_merge.h) before it is checked, so fields it leaves out keep their
// stored values and are not changes. Kubeflow's lifecycle guide suspends a job that way, with a
// document of only the identifying fields and spec.suspend. spec.suspend itself is the applied
// document's (absent: false), so re-applying the original file resumes the job.
Result<ParsedFile> ParseDocuments(std::string_view yaml_text, const StoredDocument& stored = {});

// What a job runs, once the TrainJob's trainer is laid over its runtime.
struct ResolvedTrainer {
  int32_t num_nodes = 1;          // trainer.numNodes ?: mlPolicy.numNodes ?: 1
  std::string num_proc_per_node;  // trainer's ?: mlPolicy's ?: "1"
  std::vector<std::string> argv;  // command + args
  std::vector<EnvVar> env;        // runtime container env, then the trainer's (trainer wins)
  std::string image;              // trainer's ?: runtime container's
  // The runtime container's workingDir (the launcher's for mpi, as for the command); "" when
  // unset. A TrainJob cannot set it: Kubeflow's schema for a runtime patch's container has no
  // workingDir (the API server prunes it, and trainlet reports it as an unknown field, ignored).
  std::string working_dir;
  // The runtime container's securityContext.runAsUser / runAsGroup (ContainerSpec).
  std::optional<int64_t> run_as_user, run_as_group;
  // Its securityContext.allowPrivilegeEscalation (ContainerSpec).
  std::optional<bool> allow_privilege_escalation;
  // Its pod's securityContext.fsGroup (ContainerSpec).
  std::optional<int64_t> fs_group;
};

// Lays `job`'s trainer over `runtime`. The runtime container is the launcher's when the runtime
// has a launcher job (MPI: the node containers only run sshd, which trainlet replaces), else the
// node's. command and args are each the trainer's when set, else that container's. A variable set
// by both keeps the runtime's position and takes the trainer's value.
// Fails (kInvalid) when `runtime` is not the one job.runtime_ref names, when the resolved
// numNodes is below 1, and when no command results:
//   "TrainJob/x: spec.trainer.command: no command: neither the TrainJob nor runtime
//    ClusterTrainingRuntime/torch-distributed sets one"
Result<ResolvedTrainer> Resolve(const TrainJob& job, const TrainingRuntime& runtime);

}  // namespace trainlet::trainjob
