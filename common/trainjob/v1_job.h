// The Training Operator's job kinds (kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob,
// JAXJob) and mpi-operator's kubeflow.org/v2beta1 MPIJob, as trainlet reads them from YAML.
//
// A v1 document is checked against its own CRD schema (embedded, as the v2 ones are), so what
// the Kubernetes API server would refuse is refused here too, by path. What trainlet does not act
// on is a warning (a note), as for v2. V1Job is the model; v1_conversion.h turns it into the
// TrainJob and runtime the coordinator runs.
//
// V1JobContract is the part the runtime plugins need to give each replica the Training
// Operator's env: it travels with the converted TrainJob as JSON in the annotation
// kV1JobAnnotation, so a stored job keeps it and the plugin API needs nothing new.
//
// Pure functions, no I/O; safe from any thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {

enum class V1Kind { kPyTorchJob, kTFJob, kXGBoostJob, kPaddleJob, kJAXJob, kMPIJob };

// "PyTorchJob", ...
const char* V1KindName(V1Kind kind);
// "kubeflow.org/v1", or "kubeflow.org/v2beta1" for MPIJob.
const char* V1ApiVersion(V1Kind kind);
// The kind of that name ("PyTorchJob", ...), or nullopt.
std::optional<V1Kind> V1KindOf(std::string_view kind);
// The kind a `trainletctl get` resource name means: "pytorchjobs", "pytorchjob" (any case) ->
// PyTorchJob; nullopt for any other name.
std::optional<V1Kind> V1KindOfResource(std::string_view resource);

// The TrainJob annotation that carries a converted job's V1JobContract as JSON.
inline constexpr std::string_view kV1JobAnnotation = "trainlet.io/v1-job";

// One replica type of a v1 job. trainlet runs each replica as one process on its own node of the
// gang, as the Training Operator runs it as one pod.
struct V1Replica {
  std::string type;  // "Master", "Worker", "PS", "Chief", "Evaluator", "Launcher"
  int32_t replicas = 1;
  std::vector<std::string> argv;  // the kind's container: command, then args
  std::vector<EnvVar> env;        // that container's env (valueFrom entries skipped)
  // The kind's named container port ("pytorchjob-port", "tfjob-port", ...) when set. trainlet
  // never listens on it (ports are reserved per attempt); it is kept for the notes.
  std::optional<int32_t> port;
  std::string restart_policy;  // as written; "" when unset
  // The container's workingDir as written ("" when unset): where the replica's process runs
  // (relative to the job's work dir on its node, or absolute), as a v2 container's.
  std::string working_dir;
  bool operator==(const V1Replica&) const = default;
};

// PyTorchJob spec.elasticPolicy, with the Training Operator's defaults: minReplicas and
// maxReplicas fill each other, and both default to the Worker replicas.
struct V1ElasticPolicy {
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
  std::string rdzv_backend = "c10d";
  std::optional<int32_t> rdzv_port;
  std::optional<std::string> rdzv_host;
  std::optional<std::string> rdzv_id;
  std::vector<std::pair<std::string, std::string>> rdzv_conf;
  bool standalone = false;
  std::optional<int32_t> n_proc_per_node;  // deprecated nProcPerNode
  std::optional<int32_t> max_restarts;
  bool operator==(const V1ElasticPolicy&) const = default;
};

// What a runtime plugin needs to give each replica the env the Training Operator gives its pod.
struct V1JobContract {
  V1Kind kind = V1Kind::kPyTorchJob;
  std::string name;  // the job's name: PADDLE_JOB_ID
  // In the kind's order (Master, Chief, PS, Worker, Evaluator; MPIJob: Launcher, Worker), replica
  // types with 0 replicas left out. Rank r is the r-th replica counted in this order.
  std::vector<V1Replica> replicas;
  // PyTorchJob: spec.nprocPerNode ("auto" when neither it nor elasticPolicy.nProcPerNode is set).
  std::optional<std::string> nproc_per_node;
  std::optional<V1ElasticPolicy> elastic;
  bool enable_dynamic_worker = false;  // TFJob: the sparse TF_CONFIG
  // MPIJob
  int32_t slots_per_worker = 1;
  std::string mpi_implementation = "OpenMPI";  // OpenMPI, Intel or MPICH
  std::string launcher_creation_policy = "AtStartup";
  bool run_launcher_as_worker = false;
  bool operator==(const V1JobContract&) const = default;

  // The replica of `type`, or null.
  const V1Replica* Find(std::string_view type) const;
  // Replicas of every type, summed.
  int32_t TotalReplicas() const;
  // The replica that rank `rank` runs (the rank-th replica counted in this order, one process
  // per replica); null past the last. Not an MPIJob's ranks, which mpirun starts.
  const V1Replica* ReplicaOfRank(uint32_t rank) const;
};

// JSON of the contract, for the annotation (stable: the same contract gives the same text).
std::string EncodeV1Contract(const V1JobContract& contract);
// The contract a TrainJob's annotations carry; nullopt when kV1JobAnnotation is absent, Invalid
// naming the annotation when its JSON is not a contract.
Result<std::optional<V1JobContract>> V1ContractOf(
    const std::map<std::string, std::string>& annotations);

// spec.runPolicy (MPIJob: the same fields).
struct V1RunPolicy {
  std::optional<int32_t> backoff_limit;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int32_t> ttl_seconds_after_finished;
  bool suspend = false;
  std::string clean_pod_policy;  // as written; "" when unset
};

struct V1Job {
  V1JobContract contract;
  std::string namespace_;
  std::map<std::string, std::string> labels, annotations;
  V1RunPolicy run_policy;
  std::string yaml;  // the document as applied, re-emitted
};

// The metadata the caller (ParseDocuments) has already read and checked.
struct V1Metadata {
  std::string name, namespace_;
  std::map<std::string, std::string> labels, annotations;
};

// Models a document of a v1 kind that passed its CRD schema. `label` ("PyTorchJob/x") starts
// every message. Invalid, by path, for what the schema cannot say: a replica type the kind does
// not have ("spec.tfReplicaSpecs[Driver]: ..."), a kind without its required replica (a JAXJob
// without Worker, an MPIJob without Launcher), replicas below 0, a replica without a command
// (trainlet runs the command, not an image's entrypoint), an env entry no process can hold.
// Fields trainlet does not act on are appended to `warnings` as "<label>: <path>: ...".
Result<V1Job> ReadV1Job(const YAML::Node& doc, V1Kind kind, const V1Metadata& meta,
                        const std::string& label, std::vector<std::string>* warnings);

}  // namespace trainlet::trainjob
