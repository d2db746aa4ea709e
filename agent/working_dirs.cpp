#include "agent/working_dirs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "agent/launch_planning.h"
#include "common/platform/env.h"

namespace trainlet::agent {
namespace fs = std::filesystem;

Status MakeStateDirPrivate(const std::string& dir, bool* tightened) {
  struct stat before {};
  const bool existed = ::stat(dir.c_str(), &before) == 0;
  TRAINLET_RETURN_IF_ERROR(platform::MakePrivateDirectory(dir, tightened));
  if (!existed) return Status::Ok();
  if (tightened != nullptr) *tightened = (before.st_mode & 066) != 0;
  // Only a dir with search alone (0711, as the step leaves it) keeps it: a dir given looser (0755)
  // is made 0700 exactly, as before.
  const mode_t search = (before.st_mode & 066) == 0 ? before.st_mode & (S_IXGRP | S_IXOTH) : 0;
  if (search != 0 && ::chmod(dir.c_str(), 0700 | search) != 0) {
    return IoError(dir + ": chmod: " + std::strerror(errno));
  }
  return Status::Ok();
}

namespace {

const std::string kSharedRef = std::string("$(") + kSharedWorkDirVar + ")";

// True when `path` is `base` or inside it (both as the agent wrote them, no symlinks resolved).
bool Under(const std::string& path, const std::string& base) {
  return !base.empty() && path.compare(0, base.size(), base) == 0 &&
         (path.size() == base.size() || path[base.size()] == '/');
}

}  // namespace

std::string SharedWorkDir(const std::string& shared_dir, const std::string& job) {
  if (shared_dir.empty()) return "";
  return (fs::path(shared_dir) / job).lexically_normal().string();
}

std::string ResolveWorkerCwd(const std::string& cwd, const std::string& work_dir,
                             const std::string& shared_work_dir) {
  if (cwd.empty()) return work_dir;
  if (cwd.compare(0, kSharedRef.size(), kSharedRef) == 0) {
    if (shared_work_dir.empty()) return cwd;  // PrepareWorkerCwds says why it cannot run
    return ExpandPlanVars(cwd, {{kSharedWorkDirVar, shared_work_dir}});
  }
  if (cwd.front() == '/') return cwd;
  return (fs::path(work_dir) / cwd).string();
}

bool UsesSharedDir(const v1::LaunchPlan& plan) {
  return std::any_of(plan.workers().begin(), plan.workers().end(), [](const auto& w) {
    return w.cwd().compare(0, kSharedRef.size(), kSharedRef) == 0;
  });
}

Status PrepareWorkerCwds(const std::vector<std::string>& cwds, const WorkerCwdContext& ctx) {
  const std::set<std::string> distinct(cwds.begin(), cwds.end());
  for (const std::string& cwd : distinct) {
    if (cwd.compare(0, kSharedRef.size(), kSharedRef) == 0) {
      return InvalidError("node " + ctx.node +
                          " has no shared directory: the job asks for trainlet.io/working-dir: "
                          "shared, and this node's agent config sets no shared_dir");
    }
    const bool shared = Under(cwd, ctx.shared_work_dir);
    if (shared) {
      // <shared_dir>/<job>: the job's own, private as its work dir is.
      if (Status s = platform::MakePrivateDirectory(ctx.shared_work_dir); !s.ok()) {
        return Status(s.code(), "node " + ctx.node + ": shared_dir: " + s.message());
      }
    }
    std::error_code ec;
    if (shared || Under(cwd, ctx.work_dir)) {
      // A relative workingDir is made, as a container runtime makes a missing workingDir.
      if (fs::create_directories(cwd, ec); ec) {
        return IoError("node " + ctx.node + ": working directory " + cwd +
                       " (the container's workingDir): cannot be made: " + ec.message());
      }
      continue;
    }
    if (!fs::is_directory(cwd, ec)) {
      return InvalidError("node " + ctx.node + ": working directory " + cwd +
                          " (the container's workingDir): " +
                          (fs::exists(cwd, ec) ? "not a directory" : "no such directory"));
    }
  }
  return Status::Ok();
}

}  // namespace trainlet::agent
