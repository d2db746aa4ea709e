#include "coordinator/replicated_job_users.h"

#include <functional>
#include <set>

namespace trainlet::coordinator {
namespace {

bool IsMain(const std::string& name) { return name == "node" || name == "launcher"; }

// The name the main one goes by: "launcher" when the runtime has one (its user runs everything).
std::string MainName(const trainjob::TrainingRuntime& runtime) {
  return runtime.launcher ? "launcher" : "node";
}

const ReplicatedJobUser* Find(const std::vector<ReplicatedJobUser>& users,
                              const std::string& name) {
  for (const ReplicatedJobUser& u : users) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

// Every job `from` waits for, transitively, by any status; `from` itself included.
std::set<std::string> WaitsFor(const std::vector<ReplicatedJobUser>& users, const std::string& from,
                               bool complete_only) {
  std::set<std::string> seen;
  std::function<void(const std::string&)> walk = [&](const std::string& name) {
    if (!seen.insert(name).second) return;
    const ReplicatedJobUser* u = Find(users, name);
    if (u == nullptr) return;
    for (const auto& d : u->depends_on) {
      if (!complete_only || d.status == "Complete") walk(d.name);
    }
  };
  walk(from);
  return seen;
}

// Whether `later` starts only after `earlier` has ended (see the header).
bool StartsAfterEnd(const std::vector<ReplicatedJobUser>& users, const std::string& later,
                    const std::string& earlier) {
  for (const std::string& w : WaitsFor(users, later, false)) {
    const ReplicatedJobUser* u = Find(users, w);
    if (u == nullptr) continue;
    for (const auto& d : u->depends_on) {
      if (d.status == "Complete" && WaitsFor(users, d.name, true).contains(earlier)) return true;
    }
  }
  return false;
}

std::string PodPath(const trainjob::TrainingRuntime& runtime, const ReplicatedJobUser& u) {
  return runtime.kind + "/" + runtime.name + ": spec.template.spec.replicatedJobs[" +
         std::to_string(u.index) + "].template.spec.template.spec.securityContext.fsGroup";
}

std::string Who(const ReplicatedJobUser& u) {
  std::string out = u.name + " (runAsUser " + std::to_string(*u.run_as_user);
  if (u.fs_group) out += ", fsGroup " + std::to_string(*u.fs_group);
  return out + ")";
}

}  // namespace

std::vector<ReplicatedJobUser> ReplicatedJobUsersOf(const trainjob::TrainingRuntime& runtime) {
  std::vector<ReplicatedJobUser> out;
  const std::string main = MainName(runtime);
  const std::optional<trainjob::ContainerSpec>& base =
      runtime.launcher ? runtime.launcher : runtime.node;
  for (size_t i = 0; i < runtime.jobs.size(); ++i) {
    const trainjob::ReplicatedJob& rj = runtime.jobs[i];
    const bool is_main = IsMain(rj.name);
    if (is_main && rj.name != main) continue;  // `node` of a launcher runtime: the launcher's
    const std::optional<trainjob::ContainerSpec>& c = is_main ? base : rj.container;
    if (!c) continue;
    ReplicatedJobUser u{rj.name, i, c->run_as_user, c->fs_group, {}};
    // The main one waits as `node` does (attempt_steps.h); a dependency on `node` or `launcher`
    // is one on the main one, and the launcher's on `node` is inside it.
    const trainjob::ReplicatedJob* deps = &rj;
    if (is_main) {
      deps = nullptr;
      for (const auto& j : runtime.jobs) {
        if (j.name == "node") deps = &j;
      }
    }
    for (const auto& d : deps != nullptr ? deps->depends_on : rj.depends_on) {
      if (is_main && IsMain(d.name)) continue;
      u.depends_on.push_back({IsMain(d.name) ? main : d.name, d.status});
    }
    out.push_back(std::move(u));
  }
  return out;
}

bool RunTogether(const std::vector<ReplicatedJobUser>& users, const std::string& a,
                 const std::string& b) {
  return !StartsAfterEnd(users, a, b) && !StartsAfterEnd(users, b, a);
}

std::string ReplicatedJobUsersConflict(const trainjob::TrainingRuntime& runtime) {
  const std::vector<ReplicatedJobUser> users = ReplicatedJobUsersOf(runtime);
  for (size_t i = 0; i < users.size(); ++i) {
    for (size_t j = i + 1; j < users.size(); ++j) {
      const ReplicatedJobUser &a = users[i], &b = users[j];
      if (!a.run_as_user || !b.run_as_user || *a.run_as_user == *b.run_as_user) continue;
      if (a.fs_group && b.fs_group && *a.fs_group == *b.fs_group) continue;
      if (!RunTogether(users, a.name, b.name)) continue;
      // The pod to fix: one without fsGroup (the later one when neither has it).
      const ReplicatedJobUser& fix = !b.fs_group || a.fs_group ? b : a;
      const std::string why =
          a.fs_group && b.fs_group
              ? "with two fsGroups the work dir has no one group they share: set the same "
                "securityContext.fsGroup in the pods of both"
              : "without one fsGroup in both pods the work dir belongs to one user at a time, so "
                "the second user's ranks could never start: set the same "
                "securityContext.fsGroup in the pods of both";
      return PodPath(runtime, fix) + ": replicated jobs " + Who(a) + " and " + Who(b) +
             " run at the same time, and trainlet runs every replicated job on every node of the "
             "job, where they share its work dir; " +
             why + ", or make one dependsOn the other with status: Complete";
    }
  }
  return "";
}

Status CheckReplicatedJobUsers(const trainjob::TrainJob& job,
                               const trainjob::TrainingRuntime& runtime) {
  const std::string why = ReplicatedJobUsersConflict(runtime);
  if (why.empty()) return Status::Ok();
  return InvalidError("TrainJob/" + job.name + ": " + why);
}

std::vector<std::string> UserWarnings(const trainjob::TrainJob& job,
                                      const trainjob::TrainingRuntime& runtime) {
  std::vector<std::string> out;
  if (!runtime.launcher || !runtime.node) return out;
  size_t index = 0;
  for (size_t i = 0; i < runtime.jobs.size(); ++i) {
    if (runtime.jobs[i].name == "node") index = i;
  }
  const std::string pod = "spec.template.spec.replicatedJobs[" + std::to_string(index) +
                          "].template.spec.template.spec";
  const std::string container = pod + ".containers[" + runtime.node->name + "]";
  const trainjob::ContainerSpec &l = *runtime.launcher, &n = *runtime.node;
  auto warn = [&](const std::string& field, const std::optional<int64_t>& node_value,
                  const std::optional<int64_t>& launcher_value) {
    if (!node_value || node_value == launcher_value) return;
    out.push_back("TrainJob/" + job.name + ": " + runtime.kind + "/" + runtime.name + ": " + field +
                  ": " + std::to_string(*node_value) +
                  " is not used: with a launcher, mpirun, every orted and every rank run as the "
                  "launcher container's user, with its pod's fsGroup (" +
                  (launcher_value ? std::to_string(*launcher_value) : std::string("unset")) +
                  " there); set it in the launcher's securityContext");
  };
  warn(container + ".securityContext.runAsUser", n.run_as_user, l.run_as_user);
  warn(container + ".securityContext.runAsGroup", n.run_as_group, l.run_as_group);
  warn(pod + ".securityContext.fsGroup", n.fs_group, l.fs_group);
  return out;
}

}  // namespace trainlet::coordinator
