#include "coordinator/access_policy.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace trainlet::coordinator {
namespace {

// The kinds only admins may apply. Kueue's queue objects are listed so that whichever branch
// teaches apply to accept them finds them already guarded.
constexpr std::array<std::string_view, 6> kAdminOnlyKinds = {
    "ClusterTrainingRuntime", "TrainingRuntime", "ResourceFlavor",
    "ClusterQueue",           "LocalQueue",      "WorkloadPriorityClass",
};

bool IsNamespaceLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// Where a policy file's errors point: "<file>: line L, column C: <field>: <what>".
Status FieldError(const std::string& file, const YAML::Node& at, const std::string& field,
                  const std::string& what) {
  const YAML::Mark m = at.Mark();
  std::string where = file + ": ";
  if (m.line >= 0) {
    where +=
        "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ": ";
  }
  return InvalidError(where + field + ": " + what);
}

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

Result<AccessPolicy::Grant> ParseGrant(const YAML::Node& entry, const std::string& field,
                                       const std::string& file) {
  if (!entry.IsMap())
    return FieldError(file, entry, field, "must be a map, got " + Describe(entry));
  AccessPolicy::Grant grant;
  bool has_role = false;
  std::optional<YAML::Node> namespaces;
  for (const auto& kv : entry) {
    const std::string key = kv.first.Scalar();
    if (key == "role") {
      const std::string role = kv.second.IsScalar() ? kv.second.Scalar() : "";
      if (role != "admin" && role != "user") {
        return FieldError(file, kv.second, field + ".role",
                          "must be admin or user, got " + Describe(kv.second));
      }
      grant.role = role == "admin" ? AccessPolicy::Role::kAdmin : AccessPolicy::Role::kUser;
      has_role = true;
    } else if (key == "namespaces") {
      namespaces = kv.second;
    } else {
      return FieldError(file, kv.first, field + "." + key,
                        "unknown field (a user has role and namespaces)");
    }
  }
  if (!has_role) return FieldError(file, entry, field + ".role", "required (admin or user)");
  if (!namespaces.has_value()) return grant;
  if (grant.role == AccessPolicy::Role::kAdmin) {
    return FieldError(file, *namespaces, field + ".namespaces",
                      "only for role user (an admin may act in every namespace)");
  }
  if (!namespaces->IsSequence()) {
    return FieldError(file, *namespaces, field + ".namespaces",
                      "must be a list of namespaces, got " + Describe(*namespaces));
  }
  for (size_t i = 0; i < namespaces->size(); ++i) {
    const YAML::Node ns = (*namespaces)[i];
    if (!ns.IsScalar() || !IsNamespaceLabel(ns.Scalar())) {
      return FieldError(file, ns, field + ".namespaces[" + std::to_string(i) + "]",
                        "must be a lowercase RFC 1123 label, got " + Describe(ns));
    }
    grant.namespaces.insert(ns.Scalar());
  }
  return grant;
}

// The largest uid or gid (uid_t is 32 bits; 4294967295 is (uid_t)-1, "no id").
constexpr int64_t kMaxId = 4294967294;

std::optional<int64_t> IdText(const std::string& s) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int64_t v = std::stoll(s);
  if (v > kMaxId) return std::nullopt;
  return v;
}

// runAsUsers / runAsGroups: a list of ids (1000) and ranges ("1000-1999").
Result<std::vector<IdRange>> ParseIdList(const YAML::Node& list, const std::string& field,
                                         const std::string& file) {
  if (!list.IsSequence()) {
    return FieldError(file, list, field,
                      "must be a list of ids and ranges (\"1000-1999\"), got " + Describe(list));
  }
  std::vector<IdRange> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string text = n.IsScalar() ? n.Scalar() : "";
    const size_t dash = text.find('-');
    const auto first = IdText(text.substr(0, dash));
    const auto last = dash == std::string::npos ? first : IdText(text.substr(dash + 1));
    if (!first || !last || *last < *first) {
      return FieldError(
          file, n, field + "[" + std::to_string(i) + "]",
          "must be an id from 0 to 4294967294 or a range \"FIRST-LAST\", got " + Describe(n));
    }
    out.push_back({*first, *last});
  }
  return out;
}

Result<AccessPolicy::RunAsRule> ParseRunAsRule(const YAML::Node& entry, const std::string& field,
                                               const std::string& file) {
  if (!entry.IsMap())
    return FieldError(file, entry, field, "must be a map, got " + Describe(entry));
  AccessPolicy::RunAsRule rule;
  for (const auto& kv : entry) {
    const std::string key = kv.first.Scalar();
    if (key == "runAsUsers") {
      TRAINLET_ASSIGN_OR_RETURN(rule.users, ParseIdList(kv.second, field + "." + key, file));
    } else if (key == "runAsGroups") {
      TRAINLET_ASSIGN_OR_RETURN(rule.groups, ParseIdList(kv.second, field + "." + key, file));
    } else {
      return FieldError(file, kv.first, field + "." + key,
                        "unknown field (a namespace has runAsUsers and runAsGroups)");
    }
  }
  return rule;
}

std::string RangesText(const std::vector<IdRange>& ranges) {
  std::string out;
  for (const IdRange& r : ranges) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r.first);
    if (r.last != r.first) out += "-" + std::to_string(r.last);
  }
  return out;
}

Status Refusal(std::string_view user, Verb verb, std::string_view ns, std::string_view what = {}) {
  std::string m = "user \"" + std::string(user) + "\" may not " + std::string(VerbPhrase(verb));
  if (!what.empty()) m += " " + std::string(what);
  if (!ns.empty()) m += " in namespace \"" + std::string(ns) + "\"";
  return PermissionError(std::move(m));
}

}  // namespace

std::string_view VerbPhrase(Verb verb) {
  switch (verb) {
    case Verb::kApply:
      return "apply trainjobs";
    case Verb::kSuspend:
      return "suspend trainjobs";
    case Verb::kResume:
      return "resume trainjobs";
    case Verb::kDelete:
      return "delete trainjobs";
    case Verb::kGet:
      return "get trainjobs";
    case Verb::kLogs:
      return "read logs of trainjobs";
    case Verb::kCordon:
      return "cordon nodes";
    case Verb::kDrain:
      return "drain nodes";
    case Verb::kManage:
      return "apply";
  }
  return "?";
}

bool AdminOnlyKind(std::string_view kind) {
  for (std::string_view k : kAdminOnlyKinds) {
    if (k == kind) return true;
  }
  return false;
}

Result<AccessPolicy> AccessPolicy::Parse(std::string_view yaml, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidError(file + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                        std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  AccessPolicy policy;
  policy.enforced_ = true;
  if (root.IsNull()) return policy;  // an empty file: nobody may do anything
  if (!root.IsMap()) return FieldError(file, root, "(top level)", "must be a map with users");
  for (const auto& kv : root) {
    if (kv.first.Scalar() == "namespaces") {
      TRAINLET_RETURN_IF_ERROR(policy.ParseNamespaces(kv.second, file));
      continue;
    }
    if (kv.first.Scalar() != "users") {
      return FieldError(file, kv.first, kv.first.Scalar(),
                        "unknown field (the file has users and namespaces)");
    }
    const YAML::Node users = kv.second;
    if (users.IsNull()) continue;
    if (!users.IsMap()) {
      return FieldError(file, users, "users",
                        "must be a map of user names, got " + Describe(users));
    }
    for (const auto& u : users) {
      const std::string name = u.first.Scalar();
      if (name.empty()) return FieldError(file, u.first, "users", "a user name is empty");
      TRAINLET_ASSIGN_OR_RETURN(Grant grant, ParseGrant(u.second, "users." + name, file));
      policy.grants_[name] = std::move(grant);
    }
  }
  return policy;
}

Status AccessPolicy::ParseNamespaces(const YAML::Node& namespaces, const std::string& file) {
  if (namespaces.IsNull()) return Status::Ok();
  if (!namespaces.IsMap()) {
    return FieldError(file, namespaces, "namespaces",
                      "must be a map of namespaces, got " + Describe(namespaces));
  }
  for (const auto& n : namespaces) {
    const std::string name = n.first.Scalar();
    if (!IsNamespaceLabel(name)) {
      return FieldError(file, n.first, "namespaces." + name,
                        "a namespace must be a lowercase RFC 1123 label");
    }
    TRAINLET_ASSIGN_OR_RETURN(run_as_rules_[name],
                              ParseRunAsRule(n.second, "namespaces." + name, file));
  }
  return Status::Ok();
}

Status AccessPolicy::CheckRunAs(std::string_view user, std::string_view ns,
                                const std::vector<RunAsAsk>& asks) const {
  if (!enforced_ || asks.empty()) return Status::Ok();
  auto grant = grants_.find(user);
  if (grant != grants_.end() && grant->second.role == Role::kAdmin) return Status::Ok();
  static const RunAsRule kNone;
  auto rule = run_as_rules_.find(ns);
  const RunAsRule& r = rule == run_as_rules_.end() ? kNone : rule->second;
  for (const RunAsAsk& ask : asks) {
    const std::vector<IdRange>& allowed = ask.group ? r.groups : r.users;
    if (std::any_of(allowed.begin(), allowed.end(),
                    [&](const IdRange& x) { return x.first <= ask.id && ask.id <= x.last; })) {
      continue;
    }
    std::string m = ask.path + ": " + (ask.group ? "gid " : "uid ") + std::to_string(ask.id) +
                    " is not allowed in namespace \"" + std::string(ns) + "\" for user \"" +
                    std::string(user) + "\"";
    m += allowed.empty() ? std::string(" (the access policy allows no ") +
                               (ask.group ? "runAsGroups" : "runAsUsers") +
                               " there: ranks run as the agent's run_as)"
                         : " (allowed: " + RangesText(allowed) + ")";
    return PermissionError(std::move(m));
  }
  return Status::Ok();
}

Status AccessPolicy::Check(std::string_view user, Verb verb, std::string_view ns) const {
  if (!enforced_) return Status::Ok();
  auto it = grants_.find(user);
  if (it == grants_.end()) {
    Status s = Refusal(user, verb, ns);
    return PermissionError(s.message() + " (the access policy does not name the user)");
  }
  const Grant& grant = it->second;
  if (grant.role == Role::kAdmin) return Status::Ok();
  switch (verb) {
    case Verb::kGet:
      return Status::Ok();
    case Verb::kApply:
    case Verb::kSuspend:
    case Verb::kResume:
    case Verb::kDelete:
    case Verb::kLogs:
      if (grant.namespaces.count(std::string(ns)) != 0) return Status::Ok();
      return Refusal(user, verb, ns);
    case Verb::kCordon:
    case Verb::kDrain:
    case Verb::kManage:
      return Refusal(user, verb, ns);
  }
  return Refusal(user, verb, ns);
}

Status AccessPolicy::CheckApply(std::string_view user, std::string_view kind,
                                std::string_view ns) const {
  if (!AdminOnlyKind(kind)) return Check(user, Verb::kApply, ns);
  Status s = Check(user, Verb::kManage, ns);
  if (s.ok()) return s;
  // "user "bob" may not apply trainingruntimes in namespace "team-a" (admins only)"
  std::string plural(kind);
  for (char& c : plural) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  plural += "s";
  return Refusal(user, Verb::kManage, ns, plural + " (admins only)");
}

Result<AccessPolicyFile> AccessPolicyFile::Open(const std::string& path) {
  AccessPolicyFile f;
  f.path_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return f;
    return IoError(path + ": " + std::strerror(errno));
  }
  TRAINLET_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  f.version_.Update(st, std::move(text));
  TRAINLET_ASSIGN_OR_RETURN(f.policy_, AccessPolicy::Parse(f.version_.text(), path));
  return f;
}

const AccessPolicy& AccessPolicyFile::Current() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (policy_.enforced() && version_.known()) {
      spdlog::error("access policy {} is gone; keeping the policy it held", path_);
      version_.Forget();
    }
    return policy_;
  }
  if (version_.Unchanged(st)) return policy_;
  auto text = ReadFileText(path_);
  if (!text.ok()) return policy_;  // tried again at the next request
  // Good or bad, this version is read once: the text tells a rewrite the stamps missed.
  if (!version_.Update(st, std::move(text).value())) return policy_;
  auto fresh = AccessPolicy::Parse(version_.text(), path_);
  if (!fresh.ok()) {
    spdlog::error("keeping the previous access policy: {}", fresh.status().message());
    return policy_;
  }
  policy_ = std::move(fresh).value();
  spdlog::info("reloaded access policy {} ({} users)", path_, policy_.users());
  return policy_;
}

}  // namespace trainlet::coordinator
