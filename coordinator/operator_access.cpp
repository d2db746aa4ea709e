// OperatorService's checks of who may do what (access_policy.h), and the job changes that name
// the user who asked: apply, delete, suspend and resume.
#include <spdlog/spdlog.h>

#include "common/trainjob/object_names.h"
#include "coordinator/job_key.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {
namespace {

// JobController's messages name a job by its key ("trainjob/team-a.llm-7"); users see
// "trainjob/team-a/llm-7".
template <typename T>
Result<T> Shown(Result<T> result, const std::string& key) {
  if (result.ok() || JobDisplayName(key) == key) return result;
  std::string m = result.status().message();
  const std::string from = "trainjob/" + key, to = "trainjob/" + JobDisplayName(key);
  for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size())) {
    m.replace(at, from.size(), to);
  }
  return Status(result.status().code(), std::move(m));
}

// A request's job (name, namespace): "" is none (a list; namespace default).
Status CheckJobRef(const std::string& ns, const std::string& name) {
  if (!ns.empty() && !trainjob::IsDns1123Label(ns)) {
    return InvalidError("namespace \"" + ns +
                        "\": must be a lowercase RFC 1123 label (letters, digits and '-', at most "
                        "63 characters)");
  }
  if (!name.empty() && !trainjob::IsDns1035Label(name)) {
    return InvalidError("trainjob name \"" + name +
                        "\": must be a lowercase RFC 1035 label (a letter, then letters, digits "
                        "or '-', at most 63 characters); a job of another namespace is named "
                        "with -n");
  }
  return Status::Ok();
}

}  // namespace

Status OperatorService::CheckJobNames(const v1::OperatorRequest& req) {
  switch (req.body_case()) {
    case v1::OperatorRequest::kGetJobs:
      return CheckJobRef(req.get_jobs().all_namespaces() ? "" : req.get_jobs().namespace_(),
                         req.get_jobs().name());
    case v1::OperatorRequest::kWaitJob:
      return CheckJobRef(req.wait_job().namespace_(), req.wait_job().name());
    case v1::OperatorRequest::kDeleteJob:
      return CheckJobRef(req.delete_job().namespace_(), req.delete_job().name());
    case v1::OperatorRequest::kSuspendJob:
      return CheckJobRef(req.suspend_job().namespace_(), req.suspend_job().name());
    case v1::OperatorRequest::kLogs:
      return CheckJobRef(req.logs().namespace_(), req.logs().job());
    case v1::OperatorRequest::kAdmitCheck:
      return CheckJobRef(req.admit_check().namespace_(), req.admit_check().name());
    case v1::OperatorRequest::kQueueObjects: {
      const v1::QueueObjectsRequest& q = req.queue_objects();
      return q.kind() == "LocalQueue" && !q.all_namespaces() ? CheckJobRef(q.namespace_(), "")
                                                             : Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

Status OperatorService::Authorize(const std::string& user, const v1::OperatorRequest& req) const {
  const AccessPolicy& policy = Policy();
  if (!policy.enforced()) return Status::Ok();
  switch (req.body_case()) {
    case v1::OperatorRequest::kApply:
      // Each document once the file is parsed (AuthorizeApply); a user the policy does not name
      // is refused before the file is parsed at all (a re-apply is parsed over stored jobs).
      if (!policy.Check(user, Verb::kGet, "").ok()) return policy.Check(user, Verb::kApply, "");
      return Status::Ok();
    case v1::OperatorRequest::kGetNodes:
      return policy.Check(user, Verb::kGet, "");
    case v1::OperatorRequest::kGetJobs:
      return policy.Check(user, Verb::kGet, NamespaceOrDefault(req.get_jobs().namespace_()));
    case v1::OperatorRequest::kWaitJob:
      return policy.Check(user, Verb::kGet, NamespaceOrDefault(req.wait_job().namespace_()));
    case v1::OperatorRequest::kDeleteJob:
      return policy.Check(user, Verb::kDelete, NamespaceOrDefault(req.delete_job().namespace_()));
    case v1::OperatorRequest::kSuspendJob:
      return policy.Check(user, req.suspend_job().suspend() ? Verb::kSuspend : Verb::kResume,
                          NamespaceOrDefault(req.suspend_job().namespace_()));
    case v1::OperatorRequest::kLogs:
      return policy.Check(user, Verb::kLogs, NamespaceOrDefault(req.logs().namespace_()));
    case v1::OperatorRequest::kCordonNode:
      return policy.Check(user, Verb::kCordon, "");
    case v1::OperatorRequest::kDrainNode:
      return policy.Check(user, Verb::kDrain, "");
    case v1::OperatorRequest::kGetRuntimes:  // like queue objects: cluster configuration
      return policy.Check(user, Verb::kGet, "");
    case v1::OperatorRequest::kQueueObjects: {
      // Kueue's queue objects (operator_queues.h): anyone the policy names may list them; only
      // admins may delete one, as only admins may apply one.
      const v1::QueueObjectsRequest& q = req.queue_objects();
      if (!q.remove()) return policy.Check(user, Verb::kGet, "");
      return policy.CheckApply(user, q.kind(),
                               q.kind() == "LocalQueue" ? NamespaceOrDefault(q.namespace_()) : "");
    }
    case v1::OperatorRequest::kAdmitCheck: {
      // An admin acts as the admission check's controller (job_admitter.h): admins only.
      const std::string ns = NamespaceOrDefault(req.admit_check().namespace_());
      const Status s = policy.Check(user, Verb::kManage, ns);
      if (s.ok()) return s;
      const bool unnamed = s.message().find("does not name the user") != std::string::npos;
      return PermissionError("user \"" + user + "\" may not mark admission checks Ready in " +
                             "namespace \"" + ns + "\" (admins only" +
                             (unnamed ? "; the access policy does not name the user)" : ")"));
    }
    case v1::OperatorRequest::BODY_NOT_SET:
      return Status::Ok();  // answered Invalid
  }
  return Status::Ok();
}

Status OperatorService::AuthorizeApply(const std::string& user,
                                       const trainjob::ParsedFile& file) const {
  const AccessPolicy& policy = Policy();
  if (!policy.enforced()) return Status::Ok();
  for (const auto& rt : file.runtimes) {
    const bool namespaced = rt.kind == "TrainingRuntime";
    TRAINLET_RETURN_IF_ERROR(
        policy.CheckApply(user, rt.kind, namespaced ? NamespaceOrDefault(rt.namespace_) : ""));
  }
  for (const auto& job : file.jobs) {
    TRAINLET_RETURN_IF_ERROR(
        policy.CheckApply(user, "TrainJob", NamespaceOrDefault(job.namespace_)));
  }
  for (const auto& converted : file.converted) {
    TRAINLET_RETURN_IF_ERROR(
        policy.CheckApply(user, converted.kind, NamespaceOrDefault(converted.job.namespace_)));
  }
  // Kueue's documents, set aside unparsed by the TrainJob parser (they are parsed when the file is
  // stored): their kind and namespace as written.
  for (const auto& doc : file.queue_documents) {
    const std::string kind = trainjob::MapGet(doc.node, "kind").IsScalar()
                                 ? trainjob::MapGet(doc.node, "kind").Scalar()
                                 : std::string();
    const YAML::Node ns = trainjob::MapGet(trainjob::MapGet(doc.node, "metadata"), "namespace");
    TRAINLET_RETURN_IF_ERROR(policy.CheckApply(
        user, kind,
        kind == "LocalQueue" ? NamespaceOrDefault(ns.IsScalar() ? ns.Scalar() : "")
                             : std::string()));
  }
  return Status::Ok();
}

Result<v1::ApplyResult> OperatorService::ApplyAs(const std::string& user,
                                                 Result<trainjob::ParsedFile> file,
                                                 const std::string& source, int64_t now_ms) {
  if (!file.ok()) return file.status();
  if (Status allowed = AuthorizeApply(user, *file); !allowed.ok()) {
    spdlog::warn("refused apply of {}: {}", source.empty() ? "stdin" : source, allowed.message());
    return allowed;
  }
  return jobs_->Apply(std::move(file).value(), source, now_ms, user);
}

Result<v1::DeleteJobResult> OperatorService::DeleteJob(const v1::DeleteJobRequest& req,
                                                       int64_t now_ms, const std::string& user) {
  const std::string key = JobKey(req.namespace_(), req.name());
  if (jobs_->Find(key) == nullptr) {
    return NotFoundError("trainjob/" + JobDisplayName(key) + " not found");
  }
  TRAINLET_ASSIGN_OR_RETURN(v1::DeleteJobResult result,
                            Shown(jobs_->Delete(key, now_ms, user, req.force()), key));
  result.set_name(req.name());
  return result;
}

Result<v1::SuspendJobResult> OperatorService::SuspendJob(const v1::SuspendJobRequest& req,
                                                         int64_t now_ms, const std::string& user) {
  const std::string key = JobKey(req.namespace_(), req.name());
  if (jobs_->Find(key) == nullptr) {
    return NotFoundError("trainjob/" + JobDisplayName(key) + " not found");
  }
  TRAINLET_ASSIGN_OR_RETURN(v1::SuspendJobResult result,
                            Shown(jobs_->SetSuspend(key, req.suspend(), now_ms, user), key));
  result.set_name(req.name());
  if (result.changed() && !user.empty()) {
    spdlog::info("trainjob/{} {} by {}", JobDisplayName(key),
                 req.suspend() ? "suspended" : "resumed", user);
  }
  return result;
}

}  // namespace trainlet::coordinator
