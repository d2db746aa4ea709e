#include "coordinator/exec_authority.h"

#include "common/curve_keys.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {

bool AttemptActive(const v1::JobStatus& st, uint32_t attempt) {
  const JobPhase p = PhaseOf(st);
  return st.attempt() == attempt && !st.deleting() &&
         (p == JobPhase::kStarting || p == JobPhase::kRunning);
}

ExecAuthority::ExecAuthority(const NodeRegistry* registry, Options options, FindJob find)
    : registry_(registry), options_(std::move(options)), find_(std::move(find)) {}

void ExecAuthority::Track(const std::string& job,
                          std::vector<std::pair<std::string, std::string>> env,
                          std::optional<int64_t> run_as_user, std::optional<int64_t> run_as_group,
                          std::optional<bool> allow_privilege_escalation,
                          std::optional<int64_t> fs_group) {
  launchers_[job] =
      Launcher{std::move(env), "", run_as_user, run_as_group, allow_privilege_escalation, fs_group};
}

void ExecAuthority::Forget(const std::string& job) {
  launchers_.erase(job);
  keyed_.erase(job);
}

void ExecAuthority::NoteStoredLauncherKey(const std::string& job) {
  if (launchers_.contains(job)) keyed_.insert(job);
}

Result<LauncherSecret> ExecAuthority::IssueLauncherKeys(PlanRequest& request) const {
  // A fresh launcher key per attempt: a stale launcher cannot start anything in the next one.
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
  request.exec_endpoint = options_.exec_endpoint;
  request.exec_server_key = options_.server_public_key;
  request.launcher_public_key = keys.public_z85;
  return LauncherSecret{keys.secret_z85};
}

void ExecAuthority::SetLauncherSecret(const std::string& job, std::string secret) {
  auto it = launchers_.find(job);
  TRAINLET_CHECK(it != launchers_.end());
  if (!secret.empty()) keyed_.insert(job);  // a launcher key was issued with it
  it->second.secret = std::move(secret);
}

LauncherSecret ExecAuthority::SecretOf(const std::string& job) const {
  auto it = launchers_.find(job);
  return LauncherSecret{it == launchers_.end() ? "" : it->second.secret};
}

bool ExecAuthority::AttemptActive(const std::string& job, uint32_t attempt) const {
  const v1::JobStatus* st = find_(job);
  return st != nullptr && coordinator::AttemptActive(*st, attempt);
}

std::map<std::string, std::string> ExecAuthority::LauncherKeys() const {
  std::map<std::string, std::string> keys;
  for (const std::string& name : keyed_) {
    const v1::JobStatus* st = find_(name);
    if (st == nullptr || st->launcher_key().empty()) continue;
    if (coordinator::AttemptActive(*st, st->attempt())) keys[st->launcher_key()] = name;
  }
  return keys;
}

Result<ExecTarget> ExecAuthority::ResolveExec(const std::string& launcher_key,
                                              const std::string& host) const {
  const v1::JobStatus* found = nullptr;
  const Launcher* launcher = nullptr;
  for (const std::string& name : keyed_) {
    const v1::JobStatus* st = find_(name);
    if (st != nullptr && !launcher_key.empty() && st->launcher_key() == launcher_key) {
      found = st;
      launcher = &launchers_.at(name);
    }
  }
  if (found == nullptr) return PermissionError("this key is not the launcher key of any trainjob");
  const v1::JobStatus& st = *found;
  if (!coordinator::AttemptActive(st, st.attempt())) {
    return PermissionError("trainjob/" + st.name() + " attempt " + std::to_string(st.attempt()) +
                           " is " + JobPhaseName(PhaseOf(st)) +
                           ", not running: nothing may be started for it");
  }
  ExecTarget t;
  std::string placed;
  for (int i = 0; i < st.placement_size(); ++i) {
    const NodeEntry* e = registry_->Find(st.placement(i));
    if (e == nullptr) continue;
    placed += (placed.empty() ? "" : ", ") + e->info.name() + " (" + e->info.address() + ")";
    if (host == e->info.name() || host == e->info.hostname() || host == e->info.address()) {
      t.node = e->info.name();
      t.env["TRAINLET_NODE_RANK"] = std::to_string(i);
    }
  }
  if (t.node.empty()) {
    return PermissionError("host " + host + " is not in the placement of trainjob/" + st.name() +
                           ": " + placed);
  }
  t.job = st.name();
  t.attempt = st.attempt();
  t.stop_grace_ms = options_.stop_grace_ms;
  t.run_as_user = launcher->run_as_user;
  t.run_as_group = launcher->run_as_group;
  t.allow_privilege_escalation = launcher->allow_privilege_escalation;
  t.fs_group = launcher->fs_group;
  for (const auto& [k, v] : launcher->env) t.env[k] = v;
  t.env["TRAINLET_JOB"] = st.name();
  t.env["TRAINLET_ATTEMPT"] = std::to_string(st.attempt());
  t.env["TRAINLET_NUM_NODES"] = std::to_string(st.num_nodes());
  // So an orted can itself start daemons further down a launch tree (OpenMPI's tree spawn).
  t.env["TRAINLET_EXEC_ENDPOINT"] = options_.exec_endpoint;
  t.env["TRAINLET_EXEC_SERVER_KEY"] = options_.server_public_key;
  t.env["TRAINLET_EXEC_PUBLIC_KEY"] = st.launcher_key();
  t.env["TRAINLET_EXEC_KEY"] = launcher->secret;
  return t;
}

}  // namespace trainlet::coordinator
