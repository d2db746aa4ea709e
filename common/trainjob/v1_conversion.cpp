// ConvertV1Job: V1Job -> TrainJob + TrainingRuntime, both as documents ParseDocuments reads.

#include "common/trainjob/v1_conversion.h"

#include <algorithm>
#include <cctype>

#include "common/trainjob/failure_policy.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {
namespace {

constexpr int32_t kMaxBackoffLimit = 1000;  // the most restarts a trainlet job may have

// The mlPolicy key, or for the kinds v2 has no policy for, the framework label's value.
struct PluginChoice {
  const char* ml_policy;        // "" for none
  const char* framework_label;  // "" for none
  const char* plugin;
};

PluginChoice ChoiceOf(V1Kind kind) {
  switch (kind) {
    case V1Kind::kPyTorchJob:
      return {"torch", "", "torch"};
    case V1Kind::kTFJob:
      return {"", "tensorflow", "tensorflow"};
    case V1Kind::kXGBoostJob:
      return {"xgboost", "", "xgboost"};
    case V1Kind::kPaddleJob:
      return {"", "paddle", "paddle"};
    case V1Kind::kJAXJob:
      return {"jax", "", "jax"};
    case V1Kind::kMPIJob:
      return {"mpi", "", "mpi"};
  }
  return {"", "", "plain"};
}

// A string scalar that stays a string ("2", "true") when emitted and read back: the tag a quoted
// scalar gets (yaml_support.h's Classify).
YAML::Node Str(const std::string& s) {
  YAML::Node n(s);
  n.SetTag("!");
  return n;
}

YAML::Node StringMap(const std::map<std::string, std::string>& m) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [k, v] : m) n[k] = Str(v);
  return n;
}

YAML::Node StringList(const std::vector<std::string>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& s : v) n.push_back(Str(s));
  return n;
}

// The nodes of the gang: one per replica (an MPIJob: one per worker, and the launcher's own
// when it runs as a worker too).
int32_t NumNodes(const V1JobContract& c) {
  if (c.kind != V1Kind::kMPIJob) return c.TotalReplicas();
  const V1Replica* worker = c.Find("Worker");
  const int32_t workers = worker != nullptr ? worker->replicas : 0;
  return std::max(1, workers + (c.run_launcher_as_worker ? 1 : 0));
}

YAML::Node RuntimeDoc(const V1Job& job, int32_t num_nodes, int32_t max_restarts) {
  const V1JobContract& c = job.contract;
  const PluginChoice choice = ChoiceOf(c.kind);
  YAML::Node doc;
  doc["apiVersion"] = std::string(kApiVersion);
  doc["kind"] = "TrainingRuntime";
  doc["metadata"]["name"] = V1RuntimeName(c.kind);
  if (!job.namespace_.empty()) doc["metadata"]["namespace"] = job.namespace_;
  if (*choice.framework_label != '\0') {
    doc["metadata"]["labels"]["trainer.kubeflow.org/framework"] = choice.framework_label;
  }
  YAML::Node ml;
  ml["numNodes"] = num_nodes;
  if (c.kind == V1Kind::kMPIJob) {
    ml["mpi"]["numProcPerNode"] = c.slots_per_worker;
  } else if (*choice.ml_policy != '\0') {
    ml[choice.ml_policy] = YAML::Node(YAML::NodeType::Map);
  }
  doc["spec"]["mlPolicy"] = ml;
  YAML::Node jobset;
  jobset["failurePolicy"]["maxRestarts"] = max_restarts;
  if (job.run_policy.ttl_seconds_after_finished) {
    jobset["ttlSecondsAfterFinished"] = *job.run_policy.ttl_seconds_after_finished;
  }
  YAML::Node node_job;
  node_job["name"] = "node";
  YAML::Node container;
  container["name"] = "node";
  container["command"] = StringList(c.replicas.front().argv);
  // The first replica's (an MPIJob's launcher's) workingDir, which the v2 path honours for the
  // main workers; each other replica's is its rank's (coordinator/working_dir.h).
  if (!c.replicas.front().working_dir.empty()) {
    container["workingDir"] = Str(c.replicas.front().working_dir);
  }
  node_job["template"]["spec"]["template"]["spec"]["containers"].push_back(container);
  jobset["replicatedJobs"].push_back(node_job);
  doc["spec"]["template"]["spec"] = jobset;
  return doc;
}

YAML::Node TrainJobDoc(const V1Job& job, int32_t num_nodes) {
  const V1JobContract& c = job.contract;
  YAML::Node doc;
  doc["apiVersion"] = std::string(kApiVersion);
  doc["kind"] = "TrainJob";
  doc["metadata"]["name"] = c.name;
  if (!job.namespace_.empty()) doc["metadata"]["namespace"] = job.namespace_;
  if (!job.labels.empty()) doc["metadata"]["labels"] = StringMap(job.labels);
  std::map<std::string, std::string> annotations = job.annotations;
  annotations[std::string(kV1JobAnnotation)] = EncodeV1Contract(c);
  // MPIJob's mpiImplementation: v2's mlPolicy.mpi admits only OpenMPI, so the mpi runtime reads
  // MPICH and Intel from this annotation (docs/runtimes.md, "MPICH and Intel MPI").
  if (c.kind == V1Kind::kMPIJob && c.mpi_implementation != "OpenMPI") {
    annotations["trainlet.io/mpi-implementation"] = c.mpi_implementation;
  }
  // A replica's restartPolicy: ExitCode is the exit-code rule of the whole gang (failure_policy.h).
  if (std::any_of(c.replicas.begin(), c.replicas.end(),
                  [](const V1Replica& r) { return r.restart_policy == "ExitCode"; })) {
    annotations.emplace(std::string(kRestartPolicyAnnotation), "ExitCode");
  }
  doc["metadata"]["annotations"] = StringMap(annotations);
  YAML::Node spec;
  spec["runtimeRef"]["apiGroup"] = std::string(kApiGroup);
  spec["runtimeRef"]["kind"] = "TrainingRuntime";
  spec["runtimeRef"]["name"] = V1RuntimeName(c.kind);
  // The launcher's command for an MPIJob (Launcher comes first), else the first replica's; the
  // plugin gives every rank its own replica's.
  spec["trainer"]["command"] = StringList(c.replicas.front().argv);
  spec["trainer"]["numNodes"] = num_nodes;
  if (c.kind != V1Kind::kMPIJob) {
    spec["trainer"]["numProcPerNode"] = 1;
  } else if (!c.replicas.front().env.empty()) {
    // The launcher's env is the trainer env of the mpi plugin's one worker, mpirun.
    YAML::Node env(YAML::NodeType::Sequence);
    for (const auto& e : c.replicas.front().env) {
      YAML::Node entry;
      entry["name"] = Str(e.name);
      entry["value"] = Str(e.value);
      env.push_back(entry);
    }
    spec["trainer"]["env"] = env;
  }
  if (job.run_policy.suspend) spec["suspend"] = true;
  if (job.run_policy.active_deadline_seconds) {
    spec["activeDeadlineSeconds"] = *job.run_policy.active_deadline_seconds;
  }
  doc["spec"] = spec;
  return doc;
}

std::string Describe(const V1JobContract& c) {
  std::string out;
  for (const auto& r : c.replicas) {
    out += (out.empty() ? "" : " + ") + r.type + " " + std::to_string(r.replicas);
  }
  if (c.kind == V1Kind::kMPIJob) {
    return out + ": the launcher runs on node rank 0 and starts slotsPerWorker=" +
           std::to_string(c.slots_per_worker) + " ranks per worker through trainlet-exec";
  }
  return out + ", one process per replica";
}

}  // namespace

std::string V1RuntimeName(V1Kind kind) {
  std::string name = V1KindName(kind);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return name + ".kubeflow.org";
}

Result<ConvertedJob> ConvertV1Job(const V1Job& job, std::vector<std::string>* warnings) {
  const V1JobContract& c = job.contract;
  const std::string label = std::string(V1KindName(c.kind)) + "/" + c.name;
  const V1RunPolicy& rp = job.run_policy;
  if (rp.active_deadline_seconds && *rp.active_deadline_seconds < 1) {
    return InvalidError(label + ": spec.runPolicy.activeDeadlineSeconds: must be at least 1, got " +
                        std::to_string(*rp.active_deadline_seconds));
  }
  const int32_t backoff = rp.backoff_limit.value_or(0);
  if (backoff < 0 || backoff > kMaxBackoffLimit) {
    return InvalidError(label + ": spec.runPolicy.backoffLimit: must be from 0 to " +
                        std::to_string(kMaxBackoffLimit) + ", got " + std::to_string(backoff));
  }
  const int32_t num_nodes = NumNodes(c);
  const std::string text = EmitYaml(TrainJobDoc(job, num_nodes)) + "\n---\n" +
                           EmitYaml(RuntimeDoc(job, num_nodes, backoff));
  auto parsed = ParseDocuments(text);
  // Both documents are made here: one that does not parse is trainlet's bug, but it is reported
  // as the v1 job's refusal rather than brought down the coordinator.
  if (!parsed.ok()) {
    return InvalidError(label +
                        ": cannot be converted to a TrainJob: " + parsed.status().message());
  }
  TRAINLET_CHECK(parsed->jobs.size() == 1 && parsed->runtimes.size() == 1);
  ConvertedJob out;
  out.kind = V1KindName(c.kind);
  out.api_version = V1ApiVersion(c.kind);
  out.source_yaml = job.yaml;
  out.job = std::move(parsed->jobs[0]);
  out.runtime = std::move(parsed->runtimes[0]);
  warnings->push_back(label + ": became TrainJob " + c.name + " on runtime TrainingRuntime/" +
                      V1RuntimeName(c.kind) + " (plugin " + ChoiceOf(c.kind).plugin +
                      "): " + Describe(c));
  if (rp.backoff_limit) {
    warnings->push_back(label + ": spec.runPolicy.backoffLimit: " + std::to_string(backoff) +
                        " gang restarts (a failed replica restarts every replica)");
  }
  if (const V1Replica* worker = c.Find("Worker");
      c.kind == V1Kind::kMPIJob && worker != nullptr && !worker->env.empty()) {
    warnings->push_back(label +
                        ": spec.mpiReplicaSpecs.Worker: env ignored (mpirun starts the ranks on "
                        "the workers through trainlet-exec; give them env with mpirun -x)");
  }
  if (const V1Replica* worker = c.Find("Worker");
      c.kind == V1Kind::kMPIJob && worker != nullptr && !worker->working_dir.empty() &&
      worker->working_dir != c.replicas.front().working_dir) {
    warnings->push_back(label + ": spec.mpiReplicaSpecs.Worker: workingDir " +
                        QuoteForMessage(worker->working_dir) +
                        " ignored (mpirun starts the ranks on the workers in the launcher's "
                        "working directory; give them another with mpirun -wdir)");
  }
  if (c.kind == V1Kind::kMPIJob && c.launcher_creation_policy == "WaitForWorkersReady") {
    warnings->push_back(label +
                        ": spec.launcherCreationPolicy: WaitForWorkersReady holds without waiting: "
                        "the workers run nothing until mpirun starts them through their agents");
  }
  return out;
}

}  // namespace trainlet::trainjob
