// ReadV1Job and the contract's JSON: a v1 document -> V1Job.

#include "common/trainjob/v1_job.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {
namespace {

// What differs between the kinds: where the replicas are, which types exist (in rank order),
// and the container and port the Training Operator reads.
struct KindTable {
  V1Kind kind;
  const char* name;
  const char* replicas_field;
  std::vector<std::string> types;
  const char* container;  // "" for MPIJob: its first container
  const char* port_name;  // "" for none
  const char* required_type;
};

const KindTable& TableOf(V1Kind kind) {
  static const KindTable kTables[] = {
      {V1Kind::kPyTorchJob,
       "PyTorchJob",
       "pytorchReplicaSpecs",
       {"Master", "Worker"},
       "pytorch",
       "pytorchjob-port",
       ""},
      {V1Kind::kTFJob,
       "TFJob",
       "tfReplicaSpecs",
       {"Chief", "Master", "PS", "Worker", "Evaluator"},
       "tensorflow",
       "tfjob-port",
       ""},
      {V1Kind::kXGBoostJob,
       "XGBoostJob",
       "xgbReplicaSpecs",
       {"Master", "Worker"},
       "xgboost",
       "xgboostjob-port",
       "Master"},
      {V1Kind::kPaddleJob,
       "PaddleJob",
       "paddleReplicaSpecs",
       {"Master", "Worker"},
       "paddle",
       "master",
       ""},
      {V1Kind::kJAXJob, "JAXJob", "jaxReplicaSpecs", {"Worker"}, "jax", "jaxjob-port", "Worker"},
      {V1Kind::kMPIJob, "MPIJob", "mpiReplicaSpecs", {"Launcher", "Worker"}, "", "", "Launcher"},
  };
  for (const auto& t : kTables) {
    if (t.kind == kind) return t;
  }
  TRAINLET_CHECK_MSG(false, "no table for a v1 kind");
  return kTables[0];
}

constexpr V1Kind kAllKinds[] = {V1Kind::kPyTorchJob, V1Kind::kTFJob,  V1Kind::kXGBoostJob,
                                V1Kind::kPaddleJob,  V1Kind::kJAXJob, V1Kind::kMPIJob};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

std::optional<int64_t> Int(const YAML::Node& n) {
  if (!n.IsScalar() || Classify(n) != YamlKind::kInt) return std::nullopt;
  return ParseInt64(n.Scalar());
}

std::optional<int32_t> Int32(const YAML::Node& n) {
  auto v = Int(n);
  if (!v || *v < INT32_MIN || *v > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*v);
}

bool Bool(const YAML::Node& n) { return Text(n) == "true"; }

// Reads the documents' messages with one label.
class V1Context {
 public:
  V1Context(const std::string& label, std::vector<std::string>* warnings)
      : label_(label), warnings_(warnings) {}
  void Warn(const std::string& path, const std::string& what) {
    warnings_->push_back(label_ + ": " + path + ": " + what);
  }
  Status Error(const std::string& path, const std::string& what) const {
    return InvalidError(label_ + ": " + path + ": " + what);
  }

 private:
  const std::string& label_;
  std::vector<std::string>* warnings_;
};

Result<std::vector<EnvVar>> ReadEnv(const YAML::Node& env, const std::string& path,
                                    V1Context& ctx) {
  std::vector<EnvVar> out;
  size_t i = 0;
  for (auto it = env.begin(); env.IsSequence() && it != env.end(); ++it, ++i) {
    const std::string at = AppendIndex(path, i);
    std::string name = Text(MapGet(*it, "name"));
    if (name.empty()) return ctx.Error(at + ".name", "must not be empty");
    if (name.find('\0') != std::string::npos) {
      return ctx.Error(at + ".name", "must not contain a NUL byte");
    }
    if (name.find('=') != std::string::npos) {
      return ctx.Error(at + ".name", "must not contain '=', got " + QuoteForMessage(name));
    }
    std::string value = Text(MapGet(*it, "value"));
    if (value.find('\0') != std::string::npos) {
      return ctx.Error(at + ".value", "must not contain a NUL byte");
    }
    if (IsSet(MapGet(*it, "valueFrom"))) {
      ctx.Warn(at + ".valueFrom",
               "variable " + name + " skipped (valueFrom needs the Kubernetes API)");
      continue;
    }
    out.push_back({name, value});
  }
  return out;
}

// Reports what of the replica's container trainlet does not act on.
void WarnContainerKeys(const YAML::Node& c, const std::string& c_path, V1Context& ctx) {
  static const std::set<std::string, std::less<>> kModelled = {"name", "image", "command",   "args",
                                                               "env",  "ports", "workingDir"};
  for (auto it = c.begin(); c.IsMap() && it != c.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (key == "image") {
      ctx.Warn(AppendKey(c_path, key), "ignored (trainlet runs the command directly on the node)");
    } else if (key == "ports") {
      ctx.Warn(AppendKey(c_path, key),
               "ignored (trainlet reserves the ports of each attempt and puts them in the env)");
    } else if (!kModelled.contains(key)) {
      ctx.Warn(AppendKey(c_path, key), "ignored (container setting with no effect on bare metal)");
    }
  }
}

// The replica of one type: its container (the kind's by name, else the first), command, env and
// named port. Everything else of the pod is reported, as for v2.
Result<V1Replica> ReadReplica(const YAML::Node& spec, const std::string& type,
                              const std::string& path, const KindTable& table, V1Context& ctx) {
  V1Replica r;
  r.type = type;
  // The Training Operator defaults replicas to 1; mpi-operator defaults Worker to 0.
  const int32_t fallback = table.kind == V1Kind::kMPIJob && type == "Worker" ? 0 : 1;
  r.replicas = Int32(MapGet(spec, "replicas")).value_or(fallback);
  if (r.replicas < 0) return ctx.Error(path + ".replicas", "must be 0 or more");
  r.restart_policy = Text(MapGet(spec, "restartPolicy"));
  const std::string pod_path = path + ".template.spec";
  YAML::Node pod = MapGet(MapGet(MapGet(spec, "template"), "spec"), "containers");
  YAML::Node pod_spec = MapGet(MapGet(spec, "template"), "spec");
  for (auto it = pod_spec.begin(); pod_spec.IsMap() && it != pod_spec.end(); ++it) {
    const std::string& key = it->first.Scalar();
    if (key != "containers") {
      ctx.Warn(AppendKey(pod_path, key), "ignored (pod setting with no effect on bare metal)");
    }
  }
  if (!pod.IsSequence() || pod.size() == 0) {
    return ctx.Error(pod_path + ".containers", "required: a replica needs a container to run");
  }
  size_t chosen = 0;
  for (size_t i = 0; *table.container != '\0' && i < pod.size(); ++i) {
    if (Text(MapGet(pod[i], "name")) == table.container) {
      chosen = i;
      break;
    }
  }
  for (size_t i = 0; i < pod.size(); ++i) {
    if (i != chosen) {
      ctx.Warn(AppendIndex(pod_path + ".containers", i),
               "ignored (trainlet runs one process per replica: the container " +
                   QuoteForMessage(Text(MapGet(pod[chosen], "name"))) + ")");
    }
  }
  const YAML::Node c = pod[chosen];
  const std::string c_path = AppendIndex(pod_path + ".containers", chosen);
  for (const char* key : {"command", "args"}) {
    YAML::Node list = MapGet(c, key);
    for (auto it = list.begin(); list.IsSequence() && it != list.end(); ++it) {
      r.argv.push_back(Text(*it));
    }
  }
  // Without a command a container runs its image's entrypoint with the args; trainlet has no
  // image. Args that start with a program (mpi-operator's MPICH and Intel examples: `args:
  // [mpirun, ...]`) run as the command, as they do in an image without an ENTRYPOINT; args that
  // are only options need the entrypoint and are refused. An MPIJob's workers run nothing of
  // their own (mpirun starts their ranks), so theirs may be empty.
  const bool needs_command = r.replicas > 0 && !(table.kind == V1Kind::kMPIJob && type == "Worker");
  if (needs_command && !IsSet(MapGet(c, "command"))) {
    if (r.argv.empty() || r.argv[0].starts_with("-")) {
      return ctx.Error(c_path + ".command",
                       "required on trainlet: it runs the command on the node, never an image's "
                       "entrypoint");
    }
    ctx.Warn(c_path + ".args",
             "run as the command (no command given; trainlet has no image entrypoint)");
  }
  TRAINLET_ASSIGN_OR_RETURN(r.env, ReadEnv(MapGet(c, "env"), c_path + ".env", ctx));
  r.working_dir = Text(MapGet(c, "workingDir"));
  if (r.working_dir.find('\0') != std::string::npos) {
    return ctx.Error(c_path + ".workingDir", "must not contain a NUL byte");
  }
  YAML::Node ports = MapGet(c, "ports");
  for (auto it = ports.begin(); ports.IsSequence() && it != ports.end(); ++it) {
    if (*table.port_name != '\0' && Text(MapGet(*it, "name")) == table.port_name) {
      r.port = Int32(MapGet(*it, "containerPort"));
    }
  }
  WarnContainerKeys(c, c_path, ctx);
  return r;
}

Status ReadReplicas(const YAML::Node& spec, const KindTable& table, V1Context& ctx,
                    V1JobContract* out) {
  const std::string field = std::string("spec.") + table.replicas_field;
  YAML::Node specs = MapGet(spec, table.replicas_field);
  std::map<std::string, std::pair<YAML::Node, std::string>> by_type;  // canonical type -> spec
  for (auto it = specs.begin(); specs.IsMap() && it != specs.end(); ++it) {
    const std::string& written = it->first.Scalar();
    const std::string path = AppendKey(field, written);
    auto type = std::find_if(table.types.begin(), table.types.end(),
                             [&](const std::string& t) { return Lower(t) == Lower(written); });
    if (type == table.types.end()) {
      std::string known;
      for (const auto& t : table.types) known += (known.empty() ? "" : ", ") + t;
      return ctx.Error(path,
                       std::string("unknown replica type: a ") + table.name + " has " + known);
    }
    if (!by_type.emplace(*type, std::make_pair(YAML::Node(it->second), path)).second) {
      return ctx.Error(path, "replica type " + *type + " given twice");
    }
  }
  if (*table.required_type != '\0' && !by_type.contains(table.required_type)) {
    return ctx.Error(AppendKey(field, table.required_type),
                     std::string("required: a ") + table.name + " needs a " + table.required_type);
  }
  if (by_type.empty()) return ctx.Error(field, "required: at least one replica type");
  for (const auto& type : table.types) {
    auto it = by_type.find(type);
    if (it == by_type.end()) continue;
    TRAINLET_ASSIGN_OR_RETURN(V1Replica r,
                              ReadReplica(it->second.first, type, it->second.second, table, ctx));
    if (r.restart_policy == "ExitCode") {
      ctx.Warn(it->second.second + ".restartPolicy",
               "ExitCode: as trainlet.io/restart-policy: ExitCode, for the whole gang: an exit "
               "code of 1-127 fails the job, others restart every replica, up to "
               "runPolicy.backoffLimit times");
    } else if (r.restart_policy == "Always") {
      ctx.Warn(it->second.second + ".restartPolicy",
               r.restart_policy +
                   ": a failed replica restarts the whole gang, up to "
                   "runPolicy.backoffLimit times");
    }
    if (table.kind == V1Kind::kMPIJob && type == "Launcher" && r.replicas != 1) {
      // Checked before 0-replica types are dropped: an MPIJob without its launcher has no
      // mpirun, and its workers no command (trainjob_parser_fuzz found "Launcher: replicas: 0").
      return ctx.Error(field + ".Launcher.replicas",
                       "must be 1 (one launcher runs mpirun), got " + std::to_string(r.replicas));
    }
    if (r.replicas > 0) out->replicas.push_back(std::move(r));
  }
  if (out->replicas.empty()) return ctx.Error(field, "every replica type has 0 replicas");
  if (table.kind == V1Kind::kPyTorchJob || table.kind == V1Kind::kXGBoostJob) {
    const V1Replica* master = out->Find("Master");
    if (master != nullptr && master->replicas != 1) {
      return ctx.Error(AppendKey(field, "Master") + ".replicas",
                       "must be 1 (one master: rank 0), got " + std::to_string(master->replicas));
    }
  }
  if (table.kind == V1Kind::kMPIJob && out->Find("Launcher") == nullptr) {
    return ctx.Error(field + ".Launcher", "required (one launcher runs mpirun)");
  }
  return Status::Ok();
}

Result<V1ElasticPolicy> ReadElastic(const YAML::Node& p, const V1JobContract& c, V1Context& ctx) {
  V1ElasticPolicy e;
  std::optional<int32_t> min = Int32(MapGet(p, "minReplicas"));
  std::optional<int32_t> max = Int32(MapGet(p, "maxReplicas"));
  const V1Replica* worker = c.Find("Worker");
  if (!min && !max) {
    if (worker == nullptr) {
      return ctx.Error("spec.pytorchReplicaSpecs.Worker",
                       "required with elasticPolicy and no minReplicas/maxReplicas");
    }
    min = max = worker->replicas;
  }
  e.min_replicas = min.value_or(*max);
  e.max_replicas = max.value_or(*min);
  if (e.min_replicas > e.max_replicas) {
    return ctx.Error("spec.elasticPolicy.minReplicas", "must not exceed maxReplicas");
  }
  if (IsSet(MapGet(p, "rdzvBackend"))) e.rdzv_backend = Text(MapGet(p, "rdzvBackend"));
  e.rdzv_port = Int32(MapGet(p, "rdzvPort"));
  if (IsSet(MapGet(p, "rdzvHost"))) e.rdzv_host = Text(MapGet(p, "rdzvHost"));
  if (IsSet(MapGet(p, "rdzvId"))) e.rdzv_id = Text(MapGet(p, "rdzvId"));
  YAML::Node conf = MapGet(p, "rdzvConf");
  for (auto it = conf.begin(); conf.IsSequence() && it != conf.end(); ++it) {
    e.rdzv_conf.emplace_back(Text(MapGet(*it, "key")), Text(MapGet(*it, "value")));
  }
  e.standalone = Bool(MapGet(p, "standalone"));
  e.n_proc_per_node = Int32(MapGet(p, "nProcPerNode"));
  e.max_restarts = Int32(MapGet(p, "maxRestarts"));
  if (IsSet(MapGet(p, "metrics"))) {
    ctx.Warn("spec.elasticPolicy.metrics",
             "ignored (no autoscaler: the job runs on the nodes it was placed on)");
  }
  if (e.rdzv_host) {
    ctx.Warn("spec.elasticPolicy.rdzvHost",
             "used as written in PET_RDZV_ENDPOINT; the default is worker 0's node address");
  }
  return e;
}

void ReadRunPolicy(const YAML::Node& rp, const std::string& path, V1Context& ctx,
                   V1RunPolicy* out) {
  out->backoff_limit = Int32(MapGet(rp, "backoffLimit"));
  out->active_deadline_seconds = Int(MapGet(rp, "activeDeadlineSeconds"));
  out->ttl_seconds_after_finished = Int32(MapGet(rp, "ttlSecondsAfterFinished"));
  out->suspend = Bool(MapGet(rp, "suspend"));
  out->clean_pod_policy = Text(MapGet(rp, "cleanPodPolicy"));
  if (out->ttl_seconds_after_finished) {
    ctx.Warn(path + ".ttlSecondsAfterFinished",
             std::to_string(*out->ttl_seconds_after_finished) +
                 " s: the job, its logs and work dirs are deleted that long after it finishes");
  }
  if (!out->clean_pod_policy.empty()) {
    ctx.Warn(path + ".cleanPodPolicy",
             "ignored: trainlet stops every rank of a finished or failed attempt (as "
             "\"All\"); nothing is left running");
  }
  if (IsSet(MapGet(rp, "schedulingPolicy"))) {
    ctx.Warn(path + ".schedulingPolicy",
             "ignored (trainlet always places a job as a gang, with its own queue)");
  }
  if (IsSet(MapGet(rp, "managedBy"))) {
    ctx.Warn(path + ".managedBy", "ignored (trainlet manages every job it is given)");
  }
}

void ReadKindFields(const YAML::Node& spec, V1Kind kind, V1Context& ctx, V1JobContract* c) {
  if (kind == V1Kind::kTFJob) {
    c->enable_dynamic_worker = Bool(MapGet(spec, "enableDynamicWorker"));
    if (IsSet(MapGet(spec, "successPolicy"))) {
      ctx.Warn("spec.successPolicy",
               "ignored: the job succeeds when every replica exits 0 (AllWorkers)");
    }
  }
  if (kind == V1Kind::kMPIJob) {
    c->slots_per_worker = Int32(MapGet(spec, "slotsPerWorker")).value_or(1);
    if (IsSet(MapGet(spec, "mpiImplementation"))) {
      c->mpi_implementation = Text(MapGet(spec, "mpiImplementation"));
    }
    if (IsSet(MapGet(spec, "launcherCreationPolicy"))) {
      c->launcher_creation_policy = Text(MapGet(spec, "launcherCreationPolicy"));
    }
    c->run_launcher_as_worker = Bool(MapGet(spec, "runLauncherAsWorker"));
    if (IsSet(MapGet(spec, "sshAuthMountPath"))) {
      ctx.Warn("spec.sshAuthMountPath",
               "ignored (mpirun reaches the workers through trainlet-exec, not SSH)");
    }
  }
}

}  // namespace

const char* V1KindName(V1Kind kind) { return TableOf(kind).name; }

const char* V1ApiVersion(V1Kind kind) {
  return kind == V1Kind::kMPIJob ? "kubeflow.org/v2beta1" : "kubeflow.org/v1";
}

std::optional<V1Kind> V1KindOf(std::string_view kind) {
  for (V1Kind k : kAllKinds) {
    if (kind == V1KindName(k)) return k;
  }
  return std::nullopt;
}

std::optional<V1Kind> V1KindOfResource(std::string_view resource) {
  const std::string r = Lower(resource);
  for (V1Kind k : kAllKinds) {
    const std::string singular = Lower(V1KindName(k));
    if (r == singular || r == singular + "s") return k;
  }
  return std::nullopt;
}

const V1Replica* V1JobContract::Find(std::string_view type) const {
  for (const auto& r : replicas) {
    if (r.type == type) return &r;
  }
  return nullptr;
}

int32_t V1JobContract::TotalReplicas() const {
  int32_t n = 0;
  for (const auto& r : replicas) n += r.replicas;
  return n;
}

const V1Replica* V1JobContract::ReplicaOfRank(uint32_t rank) const {
  uint32_t first = 0;  // the first rank of `r`
  for (const auto& r : replicas) {
    const auto n = static_cast<uint32_t>(std::max(0, r.replicas));
    if (rank < first + n) return &r;
    first += n;
  }
  return nullptr;
}

Result<V1Job> ReadV1Job(const YAML::Node& doc, V1Kind kind, const V1Metadata& meta,
                        const std::string& label, std::vector<std::string>* warnings) {
  const KindTable& table = TableOf(kind);
  V1Context ctx(label, warnings);
  V1Job job;
  job.namespace_ = meta.namespace_;
  job.labels = meta.labels;
  job.annotations = meta.annotations;
  if (job.annotations.contains(std::string(kV1JobAnnotation))) {
    return ctx.Error("metadata.annotations[" + std::string(kV1JobAnnotation) + "]",
                     "is trainlet's own (it carries the converted job's replicas)");
  }
  V1JobContract& c = job.contract;
  c.kind = kind;
  c.name = meta.name;
  YAML::Node spec = MapGet(doc, "spec");
  TRAINLET_RETURN_IF_ERROR(ReadReplicas(spec, table, ctx, &c));
  if (kind == V1Kind::kPyTorchJob) {
    if (IsSet(MapGet(spec, "elasticPolicy"))) {
      TRAINLET_ASSIGN_OR_RETURN(c.elastic, ReadElastic(MapGet(spec, "elasticPolicy"), c, ctx));
    }
    if (IsSet(MapGet(spec, "nprocPerNode"))) {
      c.nproc_per_node = Text(MapGet(spec, "nprocPerNode"));
    } else if (!c.elastic || !c.elastic->n_proc_per_node) {
      c.nproc_per_node = "auto";  // the Training Operator's default
    }
  }
  ReadKindFields(spec, kind, ctx, &c);
  ReadRunPolicy(MapGet(spec, "runPolicy"), "spec.runPolicy", ctx, &job.run_policy);
  if (IsSet(MapGet(doc, "status"))) ctx.Warn("status", "ignored (status is trainlet's to set)");
  job.yaml = EmitYaml(doc);
  return job;
}

// ---- the contract as JSON ----

namespace {

nlohmann::json EnvJson(const std::vector<EnvVar>& env) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : env) out.push_back({e.name, e.value});
  return out;
}

}  // namespace

std::string EncodeV1Contract(const V1JobContract& c) {
  nlohmann::json j;
  j["kind"] = V1KindName(c.kind);
  j["name"] = c.name;
  j["replicas"] = nlohmann::json::array();
  for (const auto& r : c.replicas) {
    nlohmann::json rj = {{"type", r.type},
                         {"replicas", r.replicas},
                         {"argv", r.argv},
                         {"env", EnvJson(r.env)},
                         {"restartPolicy", r.restart_policy}};
    if (r.port) rj["port"] = *r.port;
    // Only when set: the annotation of a job without one stays as it was.
    if (!r.working_dir.empty()) rj["workingDir"] = r.working_dir;
    j["replicas"].push_back(rj);
  }
  if (c.nproc_per_node) j["nprocPerNode"] = *c.nproc_per_node;
  if (c.elastic) {
    const V1ElasticPolicy& e = *c.elastic;
    nlohmann::json ej = {{"minReplicas", e.min_replicas},
                         {"maxReplicas", e.max_replicas},
                         {"rdzvBackend", e.rdzv_backend},
                         {"rdzvConf", e.rdzv_conf},
                         {"standalone", e.standalone}};
    if (e.rdzv_port) ej["rdzvPort"] = *e.rdzv_port;
    if (e.rdzv_host) ej["rdzvHost"] = *e.rdzv_host;
    if (e.rdzv_id) ej["rdzvId"] = *e.rdzv_id;
    if (e.n_proc_per_node) ej["nProcPerNode"] = *e.n_proc_per_node;
    if (e.max_restarts) ej["maxRestarts"] = *e.max_restarts;
    j["elasticPolicy"] = ej;
  }
  if (c.enable_dynamic_worker) j["enableDynamicWorker"] = true;
  if (c.kind == V1Kind::kMPIJob) {
    j["slotsPerWorker"] = c.slots_per_worker;
    j["mpiImplementation"] = c.mpi_implementation;
    j["launcherCreationPolicy"] = c.launcher_creation_policy;
    j["runLauncherAsWorker"] = c.run_launcher_as_worker;
  }
  return j.dump();
}

namespace {

template <typename T>
std::optional<T> Opt(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return j.at(key).get<T>();
}

V1JobContract ContractFromJson(const nlohmann::json& j) {
  V1JobContract c;
  auto kind = V1KindOf(j.at("kind").get<std::string>());
  if (!kind) throw std::invalid_argument("unknown kind");
  c.kind = *kind;
  c.name = j.at("name").get<std::string>();
  for (const auto& rj : j.at("replicas")) {
    V1Replica r;
    r.type = rj.at("type").get<std::string>();
    r.replicas = rj.at("replicas").get<int32_t>();
    r.argv = rj.at("argv").get<std::vector<std::string>>();
    for (const auto& e : rj.at("env")) {
      r.env.push_back({e.at(0).get<std::string>(), e.at(1).get<std::string>()});
    }
    r.restart_policy = rj.value("restartPolicy", "");
    r.port = Opt<int32_t>(rj, "port");
    r.working_dir = rj.value("workingDir", "");
    c.replicas.push_back(std::move(r));
  }
  c.nproc_per_node = Opt<std::string>(j, "nprocPerNode");
  if (j.contains("elasticPolicy")) {
    const auto& ej = j.at("elasticPolicy");
    V1ElasticPolicy e;
    e.min_replicas = ej.at("minReplicas").get<int32_t>();
    e.max_replicas = ej.at("maxReplicas").get<int32_t>();
    e.rdzv_backend = ej.at("rdzvBackend").get<std::string>();
    e.rdzv_conf = ej.at("rdzvConf").get<std::vector<std::pair<std::string, std::string>>>();
    e.standalone = ej.at("standalone").get<bool>();
    e.rdzv_port = Opt<int32_t>(ej, "rdzvPort");
    e.rdzv_host = Opt<std::string>(ej, "rdzvHost");
    e.rdzv_id = Opt<std::string>(ej, "rdzvId");
    e.n_proc_per_node = Opt<int32_t>(ej, "nProcPerNode");
    e.max_restarts = Opt<int32_t>(ej, "maxRestarts");
    c.elastic = e;
  }
  c.enable_dynamic_worker = j.value("enableDynamicWorker", false);
  c.slots_per_worker = j.value("slotsPerWorker", 1);
  c.mpi_implementation = j.value("mpiImplementation", "OpenMPI");
  c.launcher_creation_policy = j.value("launcherCreationPolicy", "AtStartup");
  c.run_launcher_as_worker = j.value("runLauncherAsWorker", false);
  return c;
}

}  // namespace

Result<std::optional<V1JobContract>> V1ContractOf(
    const std::map<std::string, std::string>& annotations) {
  auto it = annotations.find(std::string(kV1JobAnnotation));
  if (it == annotations.end()) return std::optional<V1JobContract>();
  try {
    return std::optional<V1JobContract>(ContractFromJson(nlohmann::json::parse(it->second)));
  } catch (const std::exception& e) {
    return InvalidError("metadata.annotations[" + std::string(kV1JobAnnotation) +
                        "]: not a v1 job contract: " + e.what());
  }
}

}  // namespace trainlet::trainjob
