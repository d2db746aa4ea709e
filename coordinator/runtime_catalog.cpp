#include "coordinator/runtime_catalog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "coordinator/job_key.h"

namespace trainlet::coordinator {
namespace fs = std::filesystem;
namespace {

std::string RuntimeKey(const std::string& kind, const std::string& name) {
  return kind + "/" + name;
}

// A TrainingRuntime lives in a namespace: outside "default" its name in the catalog and the store
// is "<namespace>/<name>" (a runtime name may hold dots, so JobKey's '.' would be ambiguous; a
// '/' is in neither). A ClusterTrainingRuntime is cluster-wide: its bare name.
std::string ScopedName(const std::string& kind, const std::string& ns, const std::string& name) {
  if (kind != "TrainingRuntime" || ns.empty() || ns == kDefaultNamespace) return name;
  return ns + "/" + name;
}

std::string RuntimeKeyOf(const trainjob::TrainingRuntime& rt) {
  return RuntimeKey(rt.kind, ScopedName(rt.kind, rt.namespace_, rt.name));
}

}  // namespace

Status RuntimeCatalog::LoadShipped(const std::string& dir) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  if (ec) return IoError("--runtimes-dir " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = trainjob::ParseDocuments(text.str());
    if (!parsed.ok()) return InvalidError(f.string() + ": " + parsed.status().message());
    for (auto& rt : parsed->runtimes) runtimes_[RuntimeKeyOf(rt)] = std::move(rt);
  }
  return Status::Ok();
}

Status RuntimeCatalog::LoadStored(JobStore& store) {
  TRAINLET_ASSIGN_OR_RETURN(auto stored, store.ListRuntimes());
  for (const auto& rec : stored) {
    auto parsed = trainjob::ParseDocuments(rec.yaml);
    if (!parsed.ok() || parsed->runtimes.size() != 1) {
      spdlog::error("stored runtime {}/{} no longer parses; skipped", rec.kind, rec.name);
      continue;
    }
    runtimes_[RuntimeKey(rec.kind, rec.name)] = std::move(parsed->runtimes[0]);
  }
  return Status::Ok();
}

const trainjob::TrainingRuntime* RuntimeCatalog::Find(const std::string& kind,
                                                      const std::string& name) const {
  auto it = runtimes_.find(RuntimeKey(kind, name));
  return it == runtimes_.end() ? nullptr : &it->second;
}

RuntimeCatalog::Stage RuntimeCatalog::StageRuntimes(
    const std::vector<trainjob::TrainingRuntime>& runtimes) {
  Stage stage;
  for (const auto& rt : runtimes) stage.runtimes[RuntimeKeyOf(rt)] = rt;
  return stage;
}

Result<const trainjob::TrainingRuntime*> RuntimeCatalog::Resolve(
    const Stage& stage, const std::string& job_namespace, const std::string& job_name,
    const trainjob::TrainJob::RuntimeRef& ref) const {
  // A TrainingRuntime is looked up in the job's own namespace, as Kubeflow does.
  const std::string name = ScopedName(ref.kind, job_namespace, ref.name);
  if (auto it = stage.runtimes.find(RuntimeKey(ref.kind, name)); it != stage.runtimes.end()) {
    return &it->second;
  }
  if (const trainjob::TrainingRuntime* rt = Find(ref.kind, name)) return rt;
  std::string known;
  for (const auto& [key, r] : runtimes_) known += (known.empty() ? "" : ", ") + key;
  const std::string in_ns = ref.kind == "TrainingRuntime"
                                ? " in namespace \"" + NamespaceOrDefault(job_namespace) + "\""
                                : "";
  return NotFoundError("TrainJob/" + job_name + ": spec.runtimeRef: " + ref.kind + " \"" +
                       ref.name + "\"" + in_ns + " not found (known: " + known + ")");
}

Status RuntimeCatalog::Store(const Stage& stage, JobStore& store) {
  for (const auto& [key, rt] : stage.runtimes) {
    TRAINLET_RETURN_IF_ERROR(
        store.PutRuntime({rt.kind, ScopedName(rt.kind, rt.namespace_, rt.name), rt.yaml}));
  }
  return Status::Ok();
}

void RuntimeCatalog::Commit(Stage stage, v1::ApplyResult& result) {
  for (auto& [key, rt] : stage.runtimes) {
    const bool existed = runtimes_.count(key) != 0;
    (existed ? result.add_configured(key) : result.add_created(key));
    runtimes_[key] = std::move(rt);
  }
}

}  // namespace trainlet::coordinator
