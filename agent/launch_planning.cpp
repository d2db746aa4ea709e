#include "agent/launch_planning.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/working_dirs.h"

namespace trainlet::agent {
namespace fs = std::filesystem;

std::string JobWorkDir(const std::string& state_dir, const std::string& job) {
  return state_dir + "/work/" + job;
}

std::string RankLogPath(const std::string& state_dir, const std::string& job, uint32_t attempt,
                        uint32_t rank) {
  return state_dir + "/logs/" + job + "/attempt-" + std::to_string(attempt) + "/rank-" +
         std::to_string(rank) + ".log";
}

std::string JobWorkspaceDir(const std::string& work_dir) { return work_dir + "/workspace"; }

std::string NodeCacheDir(const std::string& state_dir) { return state_dir + "/cache"; }

std::map<std::string, std::string> WorkspaceEnvFor(const std::string& work_dir,
                                                   const std::string& state_dir) {
  const std::string workspace = JobWorkspaceDir(work_dir);
  return {{"TRAINLET_WORKSPACE", workspace},
          {"TRAINLET_DATASET_DIR", workspace + "/dataset"},
          {"TRAINLET_MODEL_DIR", workspace + "/model"},
          {"TRAINLET_CACHE_DIR", NodeCacheDir(state_dir)}};
}

Status MakeJobWorkspace(const std::string& state_dir, const std::string& job,
                        step::SpareFiles* spares) {
  const std::string workspace = JobWorkspaceDir(JobWorkDir(state_dir, job));
  for (const std::string& dir :
       {NodeCacheDir(state_dir), workspace, workspace + "/dataset", workspace + "/model"}) {
    // A spare is an empty 0700 dir of ours; it never replaces anything (RENAME_NOREPLACE), a link
    // a rank left included, which the path below then meets as before.
    if (spares != nullptr && dir != NodeCacheDir(state_dir) && spares->TakeDirAs(dir)) continue;
    std::error_code ec;
    fs::create_directories(dir, ec);
    // nofollow: a rank running as run_as owns the work dir and could leave a link here.
    if (!ec) {
      fs::permissions(dir, fs::perms::owner_all,
                      fs::perm_options::replace | fs::perm_options::nofollow, ec);
    }
    if (ec) return IoError("workspace dir " + dir + ": " + ec.message());
  }
  return Status::Ok();
}

std::map<std::string, std::string> NodeEnvFor(const std::string& node, const std::string& work_dir,
                                              const std::string& exec_binary,
                                              const std::string& state_dir) {
  auto env = WorkspaceEnvFor(work_dir, state_dir);
  env["TRAINLET_NODE"] = node;
  env["TRAINLET_WORK_DIR"] = work_dir;
  env["TRAINLET_EXEC"] = exec_binary;
  return env;
}

std::string ExpandPlanVars(const std::string& value,
                           const std::map<std::string, std::string>& vars) {
  // Every value of every rank's env comes through here on a launch's path, and few name a
  // variable: the text between references is copied whole, not a character at a time.
  size_t ref = value.find("$(");
  if (ref == std::string::npos) return value;
  std::string out;
  out.reserve(value.size());
  size_t copied = 0;  // value[0, copied) is in `out`
  for (; ref != std::string::npos; ref = value.find("$(", ref + 2)) {
    const size_t close = value.find(')', ref + 2);
    if (close == std::string::npos) break;
    const auto it = vars.find(value.substr(ref + 2, close - ref - 2));
    if (it == vars.end()) continue;  // left as written
    out.append(value, copied, ref - copied).append(it->second);
    copied = close + 1;
    ref = close - 1;  // the next search starts after the ')'
  }
  out.append(value, copied, std::string::npos);
  return out;
}

Status CheckPlanFilePath(const std::string& path) {
  const fs::path rel(path);
  if (rel.empty() || rel.is_absolute() ||
      std::any_of(rel.begin(), rel.end(), [](const fs::path& p) { return p == ".."; })) {
    return InvalidError("plan file " + path + ": must be a relative path inside the work dir");
  }
  return Status::Ok();
}

PlannedLaunches PlanLaunches(const v1::LaunchPlan& plan, const NodeLaunchContext& node) {
  static const std::vector<std::unique_ptr<AcceleratorPlugin>> kNoPlugins;
  const auto& plugins = node.plugins != nullptr ? *node.plugins : kNoPlugins;
  PlannedLaunches out;
  const std::string work_dir = JobWorkDir(node.state_dir, plan.job());
  const auto node_env = NodeEnvFor(node.node, work_dir, node.exec_binary, node.state_dir);
  const std::vector<RankBinding> bindings =
      node.node_info != nullptr ? BindingsForPlan(plan, *node.node_info, &node.cpu_grant)
                                : std::vector<RankBinding>{};
  for (const auto& w : plan.workers()) {
    if (node.running.contains(w.rank())) continue;  // a repeated plan: that rank runs already
    WorkerLaunch launch;
    launch.job = plan.job();
    launch.attempt = plan.attempt();
    launch.rank = w.rank();
    launch.local_rank = w.local_rank();
    launch.argv.assign(w.argv().begin(), w.argv().end());
    if (!launch.argv.empty() && launch.argv[0] == kInitializerName &&
        !node.initializer_binary.empty()) {
      launch.argv[0] = node.initializer_binary;
    }
    // Its replicated job and what that waits for: the step holds it until then (step_gate.h).
    launch.step = w.step();
    if (w.has_run_as_user()) launch.run_as.job_run_as_user = w.run_as_user();
    if (w.has_run_as_group()) launch.run_as.job_run_as_group = w.run_as_group();
    if (w.has_allow_privilege_escalation())
      launch.run_as.allow_privilege_escalation = w.allow_privilege_escalation();
    if (w.has_fs_group()) launch.run_as.fs_group = w.fs_group();
    for (const auto& s : plan.steps()) {
      if (s.name() != w.step()) continue;
      for (const auto& d : s.depends_on()) launch.waits.push_back({d.step(), d.status()});
    }
    for (const auto& [k, v] : w.env()) launch.env[k] = ExpandPlanVars(v, node_env);
    for (const auto& [k, v] : node_env) launch.env[k] = v;
    for (const auto& [k, v] : node.rendezvous_env) launch.env[k] = v;
    for (const auto& [k, v] : node.progress_env) launch.env[k] = v;
    if (node.cache_max_bytes != 0) {
      launch.env["TRAINLET_CACHE_MAX_BYTES"] = std::to_string(node.cache_max_bytes);
    }
    launch.cwd = ResolveWorkerCwd(w.cwd(), work_dir, SharedWorkDir(node.shared_dir, plan.job()));
    launch.log_path = RankLogPath(node.state_dir, plan.job(), plan.attempt(), w.rank());
    std::optional<RankBinding> binding;
    // A step's workers (an initializer) are not the training's ranks: no devices, no CPU set.
    if (w.step().empty() && w.local_rank() < bindings.size()) binding = bindings[w.local_rank()];
    if (binding) {
      launch.env.merge(BindingEnv(*binding, plugins));  // the plan's own env wins
      if (!node.cpu_affinity) {
        out.cpus_unsupported = true;
      } else if (!node.cpus_available || node.cpus_available(binding->cpus)) {
        launch.cpus = binding->cpus;
      } else if (out.cpus_unavailable.empty()) {
        out.cpus_unavailable =
            plan.job() + ": CPU binding " + binding->CpuList() + " of local rank " +
            std::to_string(w.local_rank()) + " names CPUs this machine lacks (topology " +
            (node.node_info != nullptr ? node.node_info->topology().source() : "") +
            "): reported, not applied";
      }
    }
    out.launches.push_back(std::move(launch));
    out.bindings.push_back(std::move(binding));
  }
  return out;
}

// The work dir may belong to the ranks' user (run_as, agent/step/rank_files.h): the agent, root,
// must not follow a link a rank left there to write or chmod elsewhere. So every component is
// opened relative to its parent with O_NOFOLLOW, and the file is replaced, never written through.
Status WritePlanFiles(const v1::LaunchPlan& plan, const std::string& work_dir) {
  for (const auto& f : plan.files()) {
    TRAINLET_RETURN_IF_ERROR(CheckPlanFilePath(f.path()));
    const std::string full = (fs::path(work_dir) / fs::path(f.path())).string();
    auto failed = [&full](const std::string& what) {
      return IoError("cannot write " + full + ": " + what + ": " + std::strerror(errno));
    };
    int dir_fd = open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return failed(work_dir);
    std::vector<std::string> parts;
    for (const auto& part : fs::path(f.path())) {
      if (!part.empty() && part != ".") parts.push_back(part.string());
    }
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      mkdirat(dir_fd, parts[i].c_str(), 0755);
      const int next =
          openat(dir_fd, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      close(dir_fd);
      dir_fd = next;
      if (dir_fd < 0) return failed(parts[i] + " (a directory, not a link)");
    }
    const mode_t mode = f.mode() != 0 ? (f.mode() & 07777) : 0644;
    unlinkat(dir_fd, parts.back().c_str(), 0);
    const int fd = openat(dir_fd, parts.back().c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    close(dir_fd);
    if (fd < 0) return failed("create");
    const std::string& content = f.content();
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fd);
        return failed("write");
      }
      done += static_cast<size_t>(n);
    }
    const bool ok = fchmod(fd, mode) == 0;
    close(fd);
    if (!ok) return failed("chmod");
  }
  return Status::Ok();
}

}  // namespace trainlet::agent
