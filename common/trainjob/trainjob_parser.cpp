// ParseDocuments: YAML documents -> validated TrainJob / TrainingRuntime models.

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "common/trainjob/apply_merge.h"
#include "common/trainjob/crd_schema.h"
#include "common/trainjob/failure_policy.h"
#include "common/trainjob/object_names.h"
#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/v1_conversion.h"
#include "common/trainjob/v1_job.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {
namespace {

constexpr std::string_view kTrainJob = "TrainJob";
constexpr std::string_view kTrainingRuntime = "TrainingRuntime";
constexpr std::string_view kClusterTrainingRuntime = "ClusterTrainingRuntime";

// Per-document state while a model is built: where warnings go and how they are labelled.
class DocContext {
 public:
  DocContext(std::string label, std::vector<std::string>* warnings)
      : label_(std::move(label)), warnings_(warnings) {}

  const std::string& label() const { return label_; }
  void Warn(const std::string& path, const std::string& what) {
    warnings_->push_back(label_ + ": " + path + ": " + what);
  }
  Status Error(const std::string& path, const std::string& what) const {
    return InvalidError(label_ + ": " + path + ": " + what);
  }
  // For readers deep in a model that return values, not Status: the first refusal is kept, and
  // ParseOne returns it once the model is built.
  void Refuse(const std::string& path, const std::string& what) {
    if (refused_.ok()) refused_ = Error(path, what);
  }
  const Status& refused() const { return refused_; }

 private:
  Status refused_ = Status::Ok();
  std::string label_;
  std::vector<std::string>* warnings_;
};

std::optional<int64_t> Int(const YAML::Node& n) {
  if (!n.IsScalar() || Classify(n) != YamlKind::kInt) return std::nullopt;
  return ParseInt64(n.Scalar());
}

std::optional<int32_t> Int32(const YAML::Node& n) {
  std::optional<int64_t> v = Int(n);
  if (!v || *v < INT32_MIN || *v > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*v);
}

bool Bool(const YAML::Node& n) {
  const std::string s = ScalarText(n);
  return s == "true" || s == "True" || s == "TRUE";
}

// Walks a chain of map keys; undefined when any link is missing.
YAML::Node Dig(const YAML::Node& start, std::initializer_list<std::string_view> keys) {
  YAML::Node n = start;
  // reset(), not operator=: assigning to a yaml-cpp node overwrites the node it refers to.
  for (std::string_view key : keys) n.reset(MapGet(n, key));
  return n;
}

// Label and annotation keys whose only meaning is to an external Kubernetes scheduler.
std::optional<std::string> SchedulerOfKey(const std::string& key) {
  if (key.starts_with("kueue.x-k8s.io/")) return "Kueue";
  if (key.starts_with("scheduling.volcano.sh/") || key.starts_with("volcano.sh/")) return "Volcano";
  if (key.starts_with("scheduling.x-k8s.io/")) return "the coscheduling plugin";
  return std::nullopt;
}

// The labels of Kueue's that name a LocalQueue and a WorkloadPriorityClass (kueue_model.h).
bool IsQueueLabel(std::string_view key) {
  return key == "kueue.x-k8s.io/queue-name" || key == "kueue.x-k8s.io/priority-class";
}

// Documents of Kueue's API are common/kueue's to parse (kueue::IsQueueDocument says the same):
// ParseDocuments sets them aside in ParsedFile::queue_documents.
bool IsQueueDocument(const YAML::Node& node) {
  if (!node.IsMap()) return false;
  const std::string api_version = ScalarText(MapGet(node, "apiVersion"));
  const std::string kind = ScalarText(MapGet(node, "kind"));
  return api_version.starts_with("kueue.x-k8s.io/") || kind == "ResourceFlavor" ||
         kind == "ClusterQueue" || kind == "LocalQueue" || kind == "WorkloadPriorityClass";
}

Status ReadStringMap(const YAML::Node& n, const std::string& path, const DocContext& ctx,
                     std::map<std::string, std::string>* out) {
  if (!IsSet(n)) return Status::Ok();
  if (!n.IsMap()) return ctx.Error(path, "must be an object, got " + DescribeValue(n));
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return ctx.Error(path, "has a key that is not a string");
    std::string child = AppendKey(path, it->first.Scalar());
    if (Classify(it->second) != YamlKind::kString) {
      return ctx.Error(child, "must be a string, got " + DescribeValue(it->second));
    }
    if (!out->emplace(it->first.Scalar(), it->second.Scalar()).second) {
      return ctx.Error(child, "duplicate key");
    }
  }
  return Status::Ok();
}

// The parts of metadata trainlet uses. The CRD schema says only `type: object` here; the API
// server's own rules for ObjectMeta are checked instead.
struct Metadata {
  std::string name, namespace_;
  std::map<std::string, std::string> labels, annotations;
};

// metadata.name, checked before anything else so that later messages can name the object.
Status ReadName(const YAML::Node& doc, std::string_view kind, const DocContext& ctx,
                std::string* out) {
  YAML::Node meta = MapGet(doc, "metadata");
  if (IsSet(meta) && !meta.IsMap()) {
    return ctx.Error("metadata", "must be an object, got " + DescribeValue(meta));
  }
  YAML::Node name = MapGet(meta, "name");
  if (!IsSet(name)) return ctx.Error("metadata.name", "required field missing");
  if (Classify(name) != YamlKind::kString) {
    return ctx.Error("metadata.name", "must be a string, got " + DescribeValue(name));
  }
  *out = name.Scalar();
  if (kind == kTrainJob) {
    if (!IsDns1035Label(*out)) {
      return ctx.Error("metadata.name",
                       "must be a lowercase RFC 1035 label (a letter, then letters, digits or "
                       "'-', at most 63 characters), got " +
                           QuoteForMessage(*out));
    }
  } else if (!IsDns1123Subdomain(*out)) {
    return ctx.Error("metadata.name",
                     "must be a lowercase RFC 1123 subdomain (letters, digits, '-' and '.', at "
                     "most 253 characters), got " +
                         QuoteForMessage(*out));
  }
  return Status::Ok();
}

Status ReadMetadata(const YAML::Node& doc, std::string_view kind, DocContext& ctx, Metadata* out) {
  YAML::Node meta = MapGet(doc, "metadata");
  YAML::Node ns = MapGet(meta, "namespace");
  if (IsSet(ns)) {
    if (Classify(ns) != YamlKind::kString || !IsDns1123Label(ns.Scalar())) {
      return ctx.Error("metadata.namespace",
                       "must be a lowercase RFC 1123 label, got " + DescribeValue(ns));
    }
    if (kind == kClusterTrainingRuntime) {
      ctx.Warn("metadata.namespace", "ignored (a ClusterTrainingRuntime is cluster-scoped)");
    } else {
      out->namespace_ = ns.Scalar();
    }
  }
  TRAINLET_RETURN_IF_ERROR(
      ReadStringMap(MapGet(meta, "labels"), "metadata.labels", ctx, &out->labels));
  TRAINLET_RETURN_IF_ERROR(
      ReadStringMap(MapGet(meta, "annotations"), "metadata.annotations", ctx, &out->annotations));
  for (const auto* map : {&out->labels, &out->annotations}) {
    const char* field = map == &out->labels ? "metadata.labels" : "metadata.annotations";
    for (const auto& [key, value] : *map) {
      // Kueue's two job labels are trainlet's own now (TrainJob::queue_name, priority_class):
      // checked as Kueue's webhook checks them, not ignored.
      if (map == &out->labels && IsQueueLabel(key)) {
        if (!IsDns1123Subdomain(value)) {
          return ctx.Error(AppendKey(field, key),
                           "must name a Kueue object (a lowercase RFC 1123 subdomain), got " +
                               QuoteForMessage(value));
        }
        continue;
      }
      if (auto scheduler = SchedulerOfKey(key)) {
        ctx.Warn(
            AppendKey(field, key),
            "ignored (" + *scheduler + " is not used: trainlet queues and places jobs itself)");
      }
    }
  }
  return Status::Ok();
}

std::vector<EnvVar> ReadEnv(const YAML::Node& env, const std::string& path, DocContext& ctx) {
  std::vector<EnvVar> out;
  if (!env.IsSequence()) return out;
  size_t i = 0;
  for (auto it = env.begin(); it != env.end(); ++it, ++i) {
    std::string name = ScalarText(MapGet(*it, "name"));
    // What execve cannot carry: refused here, by path, rather than failing (or, for a NUL in a
    // value, being cut short) at the agent, an attempt later.
    const std::string at = AppendIndex(path, i);
    if (name.empty()) {
      ctx.Refuse(at + ".name", "must not be empty");
    } else if (name.find('\0') != std::string::npos) {
      ctx.Refuse(at + ".name", "must not contain a NUL byte");
    } else if (name.find('=') != std::string::npos) {
      ctx.Refuse(at + ".name", "must not contain '=', got " + QuoteForMessage(name));
    }
    if (ScalarText(MapGet(*it, "value")).find('\0') != std::string::npos) {
      ctx.Refuse(at + ".value", "must not contain a NUL byte");
    }
    if (IsSet(MapGet(*it, "valueFrom"))) {
      ctx.Warn(AppendIndex(path, i) + ".valueFrom",
               "variable " + name + " skipped (valueFrom needs the Kubernetes API)");
      continue;
    }
    out.push_back({name, ScalarText(MapGet(*it, "value"))});
  }
  return out;
}

// securityContext's runAsUser and runAsGroup (a container's or a pod's), a container's
// allowPrivilegeEscalation and a pod's fsGroup: set into `out` where given; every other key is
// ignored with a warning. A value that is not a non-negative integer (a boolean) is refused.
void ReadRunAs(const YAML::Node& sc, const std::string& path, DocContext& ctx, ContainerSpec& out,
               bool container = true) {
  for (auto it = sc.begin(); sc.IsMap() && it != sc.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (container && key == "allowPrivilegeEscalation") {
      const std::string v = ScalarText(it->second);
      if (v != "true" && v != "false") {
        ctx.Refuse(AppendKey(path, key), "must be true or false");
        continue;
      }
      out.allow_privilege_escalation = v == "true";
      continue;
    }
    std::optional<int64_t>* field = key == "runAsUser"               ? &out.run_as_user
                                    : key == "runAsGroup"            ? &out.run_as_group
                                    : !container && key == "fsGroup" ? &out.fs_group
                                                                     : nullptr;
    if (field == nullptr) {
      ctx.Warn(AppendKey(path, key),
               container ? "ignored (only runAsUser, runAsGroup and allowPrivilegeEscalation apply "
                           "on bare metal)"
                         : "ignored (only runAsUser, runAsGroup and fsGroup apply on bare metal)");
      continue;
    }
    std::optional<int64_t> v = Int(it->second);
    if (!v || *v < 0 || *v > int64_t{UINT32_MAX} - 1) {
      ctx.Refuse(AppendKey(path, key), "must be a uid/gid, an integer from 0 to 4294967294");
      continue;
    }
    *field = v;
  }
}

ContainerSpec ReadContainer(const YAML::Node& c, const std::string& path, DocContext& ctx) {
  ContainerSpec out;
  out.name = ScalarText(MapGet(c, "name"));
  out.image = ScalarText(MapGet(c, "image"));
  out.command = ScalarList(MapGet(c, "command"));
  out.args = ScalarList(MapGet(c, "args"));
  out.env = ReadEnv(MapGet(c, "env"), AppendKey(path, "env"), ctx);
  out.working_dir = ScalarText(MapGet(c, "workingDir"));
  if (out.working_dir.find('\0') != std::string::npos) {
    ctx.Refuse(AppendKey(path, "workingDir"), "must not contain a NUL byte");
  }
  ReadRunAs(MapGet(c, "securityContext"), AppendKey(path, "securityContext"), ctx, out);
  static const std::set<std::string, std::less<>> kModelled = {
      "name", "image", "command", "args", "env", "workingDir", "securityContext"};
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (key == "resources") {
      ctx.Warn(AppendKey(path, key),
               "ignored (trainlet places a job by its spec.trainer.resourcesPerNode)");
    } else if (!kModelled.contains(key)) {
      ctx.Warn(AppendKey(path, key), "ignored (container setting with no effect on bare metal)");
    }
  }
  return out;
}

std::vector<Toleration> ReadTolerations(const YAML::Node& list) {
  std::vector<Toleration> out;
  for (auto it = list.begin(); list.IsSequence() && it != list.end(); ++it) {
    out.push_back({ScalarText(MapGet(*it, "key")), ScalarText(MapGet(*it, "operator")),
                   ScalarText(MapGet(*it, "value")), ScalarText(MapGet(*it, "effect"))});
  }
  return out;
}

// Where the ranks of a pod spec may run: its nodeSelector and tolerations, added to `selector`
// (a key already there keeps its value) and `tolerations`.
Status ReadPlacement(const YAML::Node& pod_spec, const std::string& pod_path, const DocContext& ctx,
                     std::map<std::string, std::string>* selector,
                     std::vector<Toleration>* tolerations) {
  std::map<std::string, std::string> own;
  TRAINLET_RETURN_IF_ERROR(
      ReadStringMap(MapGet(pod_spec, "nodeSelector"), pod_path + ".nodeSelector", ctx, &own));
  for (auto& [k, v] : own) selector->emplace(k, std::move(v));
  for (auto& t : ReadTolerations(MapGet(pod_spec, "tolerations"))) {
    tolerations->push_back(std::move(t));
  }
  return Status::Ok();
}

// The container of a replicatedJob that trainlet models: the one named `preferred` (when not
// empty), else "node", else the first one. `placement_read` says the caller reads this pod's
// nodeSelector and tolerations itself.
std::optional<ContainerSpec> ReadJobContainer(const YAML::Node& job, const std::string& job_path,
                                              DocContext& ctx, bool placement_read = false,
                                              const std::string& preferred = "") {
  YAML::Node pod_spec = Dig(job, {"template", "spec", "template", "spec"});
  std::string pod_path = job_path + ".template.spec.template.spec";
  for (auto it = pod_spec.begin(); pod_spec.IsMap() && it != pod_spec.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (placement_read && (key == "nodeSelector" || key == "tolerations")) continue;
    if (key != "containers" && key != "securityContext") {
      ctx.Warn(AppendKey(pod_path, key), "ignored (pod setting with no effect on bare metal)");
    }
  }
  YAML::Node containers = MapGet(pod_spec, "containers");
  if (!containers.IsSequence() || containers.size() == 0) return std::nullopt;
  size_t chosen = 0;
  for (size_t i = 0; i < containers.size(); ++i) {
    if (ScalarText(MapGet(containers[i], "name")) == "node") {
      chosen = i;
      break;
    }
  }
  for (size_t i = 0; !preferred.empty() && i < containers.size(); ++i) {
    if (ScalarText(MapGet(containers[i], "name")) == preferred) {
      chosen = i;
      break;
    }
  }
  ContainerSpec out =
      ReadContainer(containers[chosen], AppendIndex(pod_path + ".containers", chosen), ctx);
  // The pod's securityContext holds for a container that sets none of its own, as in Kubernetes.
  ContainerSpec pod;
  ReadRunAs(MapGet(pod_spec, "securityContext"), pod_path + ".securityContext", ctx, pod,
            /*container=*/false);
  if (!out.run_as_user) out.run_as_user = pod.run_as_user;
  if (!out.run_as_group) out.run_as_group = pod.run_as_group;
  out.fs_group = pod.fs_group;
  return out;
}

// JobSet's dependsOn rules (its webhook's, beyond the CRD schema): every name is another job of
// this runtime, and the jobs form no cycle. At most 5 entries and the status enum are the
// schema's; checked again here so that a runtime built in code is held to them too.
Status CheckDependencies(const std::vector<ReplicatedJob>& jobs, const DocContext& ctx) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index.emplace(jobs[i].name, i);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string path = AppendIndex("spec.template.spec.replicatedJobs", i) + ".dependsOn";
    if (jobs[i].depends_on.size() > 5) {
      return ctx.Error(path, "at most 5 entries, got " + std::to_string(jobs[i].depends_on.size()));
    }
    for (size_t d = 0; d < jobs[i].depends_on.size(); ++d) {
      const JobDependency& dep = jobs[i].depends_on[d];
      const std::string at = AppendIndex(path, d);
      if (dep.name == jobs[i].name) {
        return ctx.Error(at + ".name", "replicated job " + QuoteForMessage(dep.name) +
                                           " cannot depend on itself");
      }
      if (!index.contains(dep.name)) {
        return ctx.Error(at + ".name",
                         "no replicated job " + QuoteForMessage(dep.name) + " in this runtime");
      }
      if (dep.status != "Ready" && dep.status != "Complete") {
        return ctx.Error(at + ".status",
                         "must be Ready or Complete, got " + QuoteForMessage(dep.status));
      }
    }
  }
  // A cycle, found by a depth-first walk: 0 unvisited, 1 on the current path, 2 done.
  std::vector<int> mark(jobs.size(), 0);
  std::vector<size_t> path;
  std::function<std::optional<std::string>(size_t)> visit =
      [&](size_t i) -> std::optional<std::string> {
    mark[i] = 1;
    path.push_back(i);
    for (const JobDependency& dep : jobs[i].depends_on) {
      const size_t j = index.at(dep.name);
      if (mark[j] == 1) {
        std::string cycle;
        auto from = std::find(path.begin(), path.end(), j);
        for (auto it = from; it != path.end(); ++it) cycle += jobs[*it].name + " -> ";
        return cycle + jobs[j].name;
      }
      if (mark[j] == 0) {
        if (auto found = visit(j)) return found;
      }
    }
    path.pop_back();
    mark[i] = 2;
    return std::nullopt;
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (mark[i] != 0) continue;
    if (auto cycle = visit(i)) {
      return ctx.Error(AppendIndex("spec.template.spec.replicatedJobs", i) + ".dependsOn",
                       "dependency cycle: " + *cycle);
    }
  }
  return Status::Ok();
}

ReplicatedJob ReadReplicatedJob(const YAML::Node& job, const std::string& name) {
  ReplicatedJob out;
  out.name = name;
  if (auto replicas = Int32(MapGet(job, "replicas"))) out.replicas = *replicas;
  YAML::Node deps = MapGet(job, "dependsOn");
  for (auto it = deps.begin(); deps.IsSequence() && it != deps.end(); ++it) {
    out.depends_on.push_back({ScalarText(MapGet(*it, "name")), ScalarText(MapGet(*it, "status"))});
  }
  return out;
}

Status ReadMlPolicy(const YAML::Node& spec, DocContext& ctx, MlPolicy* out) {
  YAML::Node policy = MapGet(spec, "mlPolicy");
  out->num_nodes = Int32(MapGet(policy, "numNodes"));
  static const std::pair<const char*, Framework> kFrameworks[] = {{"torch", Framework::kTorch},
                                                                  {"mpi", Framework::kMpi},
                                                                  {"jax", Framework::kJax},
                                                                  {"xgboost", Framework::kXgboost},
                                                                  {"flux", Framework::kFlux}};
  int set = 0;
  for (const auto& [key, framework] : kFrameworks) {
    if (IsSet(MapGet(policy, key))) {
      out->framework = framework;
      ++set;
    }
  }
  if (set > 1) {
    return ctx.Error("spec.mlPolicy", "only one of torch, mpi, jax, xgboost and flux may be set");
  }
  if (out->framework == Framework::kMpi) {
    YAML::Node mpi = MapGet(policy, "mpi");
    MpiPolicy m;
    if (auto n = Int32(MapGet(mpi, "numProcPerNode"))) m.num_proc_per_node = *n;
    std::string impl = ScalarText(MapGet(mpi, "mpiImplementation"));
    if (!impl.empty()) m.implementation = impl;
    m.run_launcher_as_node = Bool(MapGet(mpi, "runLauncherAsNode"));
    if (IsSet(MapGet(mpi, "sshAuthMountPath"))) {
      m.ssh_auth_mount_path = ScalarText(MapGet(mpi, "sshAuthMountPath"));
    }
    out->num_proc_per_node = std::to_string(m.num_proc_per_node);
    out->mpi = m;
  } else if (out->framework == Framework::kFlux) {
    auto n = Int32(Dig(policy, {"flux", "numProcPerNode"}));
    out->num_proc_per_node = std::to_string(n.value_or(1));
  } else if (out->framework == Framework::kTorch) {
    if (IsSet(Dig(policy, {"torch", "envInjection"}))) {
      ctx.Warn("spec.mlPolicy.torch.envInjection",
               "ignored (PET_* variables go to the node container only)");
    }
  }
  return Status::Ok();
}

Result<TrainingRuntime> BuildRuntime(const YAML::Node& doc, const Metadata& meta,
                                     std::string_view kind, DocContext& ctx) {
  TrainingRuntime rt;
  rt.kind = std::string(kind);
  rt.name = meta.name;
  rt.namespace_ = meta.namespace_;
  rt.labels = meta.labels;
  YAML::Node spec = MapGet(doc, "spec");
  TRAINLET_RETURN_IF_ERROR(ReadMlPolicy(spec, ctx, &rt.ml_policy));
  if (IsSet(MapGet(spec, "podGroupPolicy"))) {
    ctx.Warn("spec.podGroupPolicy", "ignored (trainlet always places a job as a gang)");
  }
  YAML::Node jobset = Dig(spec, {"template", "spec"});
  if (IsSet(MapGet(jobset, "volumeClaimPolicies"))) {
    ctx.Warn("spec.template.spec.volumeClaimPolicies",
             "ignored (volume claims have no effect on bare metal)");
  }
  if (auto restarts = Int32(Dig(jobset, {"failurePolicy", "maxRestarts"}))) {
    rt.max_restarts = *restarts;
  }
  YAML::Node jobs = MapGet(jobset, "replicatedJobs");
  std::set<std::string> names;
  size_t i = 0;
  for (auto it = jobs.begin(); jobs.IsSequence() && it != jobs.end(); ++it, ++i) {
    std::string name = ScalarText(MapGet(*it, "name"));
    std::string path = AppendIndex("spec.template.spec.replicatedJobs", i);
    if (!names.insert(name).second) {
      return ctx.Error(path + ".name", "duplicate replicatedJob name " + QuoteForMessage(name));
    }
    rt.replicated_jobs.push_back(name);
    ReplicatedJob& job = rt.jobs.emplace_back(ReadReplicatedJob(*it, name));
    if (name == "node") {
      rt.node = ReadJobContainer(*it, path, ctx, /*placement_read=*/true);
      TRAINLET_RETURN_IF_ERROR(ReadPlacement(Dig(*it, {"template", "spec", "template", "spec"}),
                                             path + ".template.spec.template.spec", ctx,
                                             &rt.node_selector, &rt.tolerations));
      job.container = rt.node;
    } else if (name == "launcher") {
      rt.launcher = ReadJobContainer(*it, path, ctx);
      job.container = rt.launcher;
    } else {
      // A step (docs/runtimes.md, "Replicated jobs"): run on every node of the gang.
      job.container = ReadJobContainer(*it, path, ctx, false, name);
    }
  }
  TRAINLET_RETURN_IF_ERROR(CheckDependencies(rt.jobs, ctx));
  TRAINLET_RETURN_IF_ERROR(ReadFailurePolicy(
      jobset, ctx.label(), &rt,
      [&ctx](const std::string& path, const std::string& what) { ctx.Warn(path, what); }));
  rt.yaml = EmitYaml(doc);
  return rt;
}

Result<TrainJob> BuildTrainJob(const YAML::Node& doc, const Metadata& meta, DocContext& ctx) {
  TrainJob job;
  job.name = meta.name;
  job.namespace_ = meta.namespace_;
  job.labels = meta.labels;
  job.annotations = meta.annotations;
  if (auto q = job.labels.find("kueue.x-k8s.io/queue-name"); q != job.labels.end()) {
    job.queue_name = q->second;
  }
  if (auto p = job.labels.find("kueue.x-k8s.io/priority-class"); p != job.labels.end()) {
    job.priority_class = p->second;
  }
  YAML::Node spec = MapGet(doc, "spec");

  YAML::Node ref = MapGet(spec, "runtimeRef");
  job.runtime_ref.name = ScalarText(MapGet(ref, "name"));
  if (IsSet(MapGet(ref, "apiGroup")))
    job.runtime_ref.api_group = ScalarText(MapGet(ref, "apiGroup"));
  if (IsSet(MapGet(ref, "kind"))) job.runtime_ref.kind = ScalarText(MapGet(ref, "kind"));
  if (job.runtime_ref.api_group != kApiGroup) {
    return ctx.Error("spec.runtimeRef.apiGroup", "must be " + std::string(kApiGroup) + ", got " +
                                                     QuoteForMessage(job.runtime_ref.api_group));
  }
  if (job.runtime_ref.kind != kClusterTrainingRuntime && job.runtime_ref.kind != kTrainingRuntime) {
    return ctx.Error("spec.runtimeRef.kind",
                     "must be ClusterTrainingRuntime or TrainingRuntime, got " +
                         QuoteForMessage(job.runtime_ref.kind));
  }

  YAML::Node trainer = MapGet(spec, "trainer");
  job.trainer.image = ScalarText(MapGet(trainer, "image"));
  job.trainer.command = ScalarList(MapGet(trainer, "command"));
  job.trainer.args = ScalarList(MapGet(trainer, "args"));
  job.trainer.env = ReadEnv(MapGet(trainer, "env"), "spec.trainer.env", ctx);
  job.trainer.num_nodes = Int32(MapGet(trainer, "numNodes"));
  if (auto n = Int32(MapGet(trainer, "numProcPerNode"))) {
    job.trainer.num_proc_per_node = std::to_string(*n);
  }
  YAML::Node resources = MapGet(trainer, "resourcesPerNode");
  for (const char* which : {"requests", "limits"}) {
    YAML::Node m = MapGet(resources, which);
    for (auto it = m.begin(); m.IsMap() && it != m.end(); ++it) {
      // emplace keeps a request when the limit names the same resource.
      job.trainer.resources_per_node.emplace(it->first.Scalar(), ScalarText(it->second));
    }
  }
  if (IsSet(MapGet(resources, "claims"))) {
    ctx.Warn("spec.trainer.resourcesPerNode.claims",
             "ignored (dynamic resource claims need Kubernetes)");
  }

  job.suspend = Bool(MapGet(spec, "suspend"));
  job.active_deadline_seconds = Int(MapGet(spec, "activeDeadlineSeconds"));

  if (IsSet(MapGet(spec, "runtimePatches"))) {
    // Of the pod customisation only where the node ranks may run means something on bare metal.
    YAML::Node patches = MapGet(spec, "runtimePatches");
    size_t i = 0;
    for (auto it = patches.begin(); patches.IsSequence() && it != patches.end(); ++it, ++i) {
      YAML::Node jobs = Dig(*it, {"trainingRuntimeSpec", "template", "spec", "replicatedJobs"});
      size_t j = 0;
      for (auto jt = jobs.begin(); jobs.IsSequence() && jt != jobs.end(); ++jt, ++j) {
        if (ScalarText(MapGet(*jt, "name")) != "node") continue;
        const std::string path =
            AppendIndex(AppendIndex("spec.runtimePatches", i) +
                            ".trainingRuntimeSpec.template.spec.replicatedJobs",
                        j) +
            ".template.spec.template.spec";
        TRAINLET_RETURN_IF_ERROR(ReadPlacement(Dig(*jt, {"template", "spec", "template", "spec"}),
                                               path, ctx, &job.node_selector, &job.tolerations));
      }
    }
    ctx.Warn("spec.runtimePatches",
             "ignored but for the nodeSelector and tolerations of replicatedJob node (pod "
             "customisation has no effect on bare metal)");
  }
  // Read for the runtime's dataset-initializer and model-initializer steps (attempt_steps.h
  // warns, once the runtime is known, when it has no step to run one).
  for (const char* which : {"dataset", "model"}) {
    YAML::Node init = Dig(spec, {"initializer", which});
    if (!IsSet(init)) continue;
    const std::string path = std::string("spec.initializer.") + which;
    TrainJob::Initializer out;
    out.storage_uri = ScalarText(MapGet(init, "storageUri"));
    out.env = ReadEnv(MapGet(init, "env"), path + ".env", ctx);
    if (IsSet(MapGet(init, "secretRef"))) {
      ctx.Warn(path + ".secretRef",
               "ignored (secrets need the Kubernetes API; set the token in "
               "env or in the agent's environment)");
    }
    (std::string(which) == "dataset" ? job.dataset_initializer : job.model_initializer) = out;
  }
  if (IsSet(MapGet(spec, "managedBy"))) {
    ctx.Warn("spec.managedBy", "ignored (trainlet manages every job it is given)");
  }
  if (IsSet(MapGet(doc, "status"))) ctx.Warn("status", "ignored (status is trainlet's to set)");
  job.yaml = EmitYaml(doc);
  return job;
}

std::string JoinErrors(const std::string& label, const std::vector<std::string>& errors) {
  std::string out = label + ": ";
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i > 0) out += "; ";
    out += errors[i];
  }
  return out;
}

// Validates a document of a v1 kind against its CRD schema, models it and converts it.
Status ParseV1(const YAML::Node& node, trainjob::V1Kind v1_kind, const Metadata& meta,
               const DocContext& ctx, ParsedFile* out) {
  const CrdSchema* schema = CrdSchema::ForKind(V1KindName(v1_kind));
  TRAINLET_CHECK(schema != nullptr);
  SchemaFindings findings = schema->Validate(node, {"metadata"});
  if (!findings.errors.empty()) return InvalidError(JoinErrors(ctx.label(), findings.errors));
  for (const auto& w : findings.warnings) out->warnings.push_back(ctx.label() + ": " + w);
  TRAINLET_ASSIGN_OR_RETURN(
      V1Job job,
      ReadV1Job(node, v1_kind, {meta.name, meta.namespace_, meta.labels, meta.annotations},
                ctx.label(), &out->warnings));
  TRAINLET_ASSIGN_OR_RETURN(ConvertedJob converted, ConvertV1Job(job, &out->warnings));
  out->converted.push_back(std::move(converted));
  return Status::Ok();
}

// apiVersion and kind, checked: one of the v1alpha1 kinds, or a v1 kind with its own apiVersion
// (then `v1_kind` is set).
Status CheckKind(const YAML::Node& node, const DocContext& unnamed, std::string* kind,
                 std::optional<V1Kind>* v1_kind) {
  YAML::Node kind_node = MapGet(node, "kind");
  if (!IsSet(kind_node)) return unnamed.Error("kind", "required field missing");
  *kind = ScalarText(kind_node);
  *v1_kind = Classify(kind_node) == YamlKind::kString ? V1KindOf(*kind) : std::nullopt;
  if (!v1_kind->has_value() &&
      (Classify(kind_node) != YamlKind::kString ||
       (*kind != kTrainJob && *kind != kTrainingRuntime && *kind != kClusterTrainingRuntime))) {
    // The message predates the v1 kinds; tests and scripts match it whole.
    return unnamed.Error("kind", DescribeValue(kind_node) +
                                     " is not TrainJob, TrainingRuntime or ClusterTrainingRuntime");
  }
  const std::string want =
      v1_kind->has_value() ? V1ApiVersion(**v1_kind) : std::string(kApiVersion);
  YAML::Node api_version = MapGet(node, "apiVersion");
  if (!IsSet(api_version)) return unnamed.Error("apiVersion", "required field missing");
  if (Classify(api_version) != YamlKind::kString || api_version.Scalar() != want) {
    return unnamed.Error("apiVersion", "must be " + want +
                                           (v1_kind->has_value() ? " for a " + *kind : "") +
                                           ", got " + DescribeValue(api_version));
  }
  return Status::Ok();
}

// Checks and models one non-empty document, appending to `out`. `identity` is set to
// kind/namespace/name and `label` to kind/name, for the caller's duplicate check. A TrainJob that
// `stored` knows is laid over its stored document first (apply_merge.h).
Status ParseOne(const YamlDocument& doc, const StoredDocument& stored, ParsedFile* out,
                std::string* identity, std::string* label) {
  DocContext unnamed("document " + std::to_string(doc.index), &out->warnings);
  YAML::Node node = doc.node;
  if (!node.IsMap()) {
    return InvalidError(unnamed.label() + ": must be an object with apiVersion and kind, got " +
                        DescribeValue(node));
  }
  std::string kind;
  std::optional<V1Kind> v1_kind;
  TRAINLET_RETURN_IF_ERROR(CheckKind(node, unnamed, &kind, &v1_kind));

  Metadata meta;
  // A v1 job becomes a TrainJob of the same name, so its name follows the TrainJob's rule.
  TRAINLET_RETURN_IF_ERROR(ReadName(node, v1_kind.has_value() ? kTrainJob : std::string_view(kind),
                                    unnamed, &meta.name));
  DocContext ctx(kind + "/" + meta.name, &out->warnings);
  // Laid over the stored document before anything else is read from it (looked up in the
  // namespace the document names).
  if (kind == kTrainJob && stored) {
    YAML::Node ns = MapGet(MapGet(node, "metadata"), "namespace");
    if (auto before = stored(kind, IsSet(ns) ? ScalarText(ns) : std::string(), meta.name)) {
      try {
        YAML::Node merged = MergeApplied(YAML::Load(*before), node);
        // spec.suspend is the applied document's alone: absent reads as false, so re-applying the
        // original file resumes a job an apply suspended, as kubectl's apply (which drops a field
        // its last applied document had) does.
        if (!IsSet(MapGet(MapGet(node, "spec"), "suspend")) && merged["spec"].IsMap()) {
          merged["spec"].remove("suspend");
        }
        node.reset(merged);
      } catch (const YAML::Exception& e) {
        return ctx.Error("metadata.name",
                         "the stored TrainJob of this name no longer parses: " + e.msg);
      }
    }
  }
  TRAINLET_RETURN_IF_ERROR(
      ReadMetadata(node, v1_kind.has_value() ? kTrainJob : std::string_view(kind), ctx, &meta));
  *label = ctx.label();
  // A converted job is a TrainJob of that name: one file cannot hold both.
  *identity = (v1_kind.has_value() ? std::string(kTrainJob) : kind) + "/" + meta.namespace_ + "/" +
              meta.name;
  if (v1_kind.has_value()) return ParseV1(node, *v1_kind, meta, ctx, out);

  const CrdSchema* schema = CrdSchema::ForKind(kind);
  TRAINLET_CHECK(schema != nullptr);
  SchemaFindings findings = schema->Validate(node, {"metadata"});
  if (!findings.errors.empty()) return InvalidError(JoinErrors(ctx.label(), findings.errors));
  for (const auto& w : findings.warnings) out->warnings.push_back(ctx.label() + ": " + w);

  if (kind == kTrainJob) {
    TRAINLET_ASSIGN_OR_RETURN(TrainJob job, BuildTrainJob(node, meta, ctx));
    TRAINLET_RETURN_IF_ERROR(ctx.refused());
    out->jobs.push_back(std::move(job));
  } else {
    TRAINLET_ASSIGN_OR_RETURN(TrainingRuntime rt, BuildRuntime(node, meta, kind, ctx));
    TRAINLET_RETURN_IF_ERROR(ctx.refused());
    out->runtimes.push_back(std::move(rt));
  }
  return Status::Ok();
}

}  // namespace

const char* FrameworkName(Framework framework) {
  switch (framework) {
    case Framework::kPlain:
      return "plain";
    case Framework::kTorch:
      return "torch";
    case Framework::kMpi:
      return "mpi";
    case Framework::kJax:
      return "jax";
    case Framework::kXgboost:
      return "xgboost";
    case Framework::kFlux:
      return "flux";
  }
  return "plain";
}

Result<ParsedFile> ParseDocuments(std::string_view yaml_text, const StoredDocument& stored) {
  try {
    TRAINLET_ASSIGN_OR_RETURN(std::vector<YamlDocument> docs, LoadDocuments(yaml_text));
    ParsedFile out;
    // kind/namespace/name -> document index, so a file cannot define one object twice.
    std::map<std::string, int> defined;
    for (const YamlDocument& doc : docs) {
      if (!IsSet(doc.node)) continue;
      if (IsQueueDocument(doc.node)) {
        out.queue_documents.push_back(doc);
        continue;
      }
      std::string identity, label;
      TRAINLET_RETURN_IF_ERROR(ParseOne(doc, stored, &out, &identity, &label));
      auto [it, inserted] = defined.emplace(identity, doc.index);
      if (!inserted) {
        return InvalidError(label + ": defined twice in this file (documents " +
                            std::to_string(it->second) + " and " + std::to_string(doc.index) + ")");
      }
    }
    return out;
  } catch (const YAML::Exception& e) {
    // The readers above do not throw by design; should yaml-cpp still throw, the input is refused
    // rather than the process brought down.
    return InvalidError("YAML error: " + e.msg);
  }
}

}  // namespace trainlet::trainjob
