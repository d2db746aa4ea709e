#include "agent/step/workspace_mount.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/step/private_file.h"
#include "agent/step/spare_files.h"

#ifdef __linux__
#include <sched.h>
#include <sys/mount.h>
#endif

namespace trainlet::step {
namespace {

constexpr char kWorkspaceEnv[] = "TRAINLET_WORKSPACE";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string LaunchWorkspace(const StepLaunch& launch) {
  std::string found;
  for (const StepRank& r : launch.ranks) {
    auto it = r.env.find(kWorkspaceEnv);
    if (it == r.env.end() || it->second.empty()) return "";
    if (!found.empty() && found != it->second) return "";
    found = it->second;
  }
  return found;
}

void PointRanksAtMount(StepLaunch& launch, const std::string& workspace) {
  const std::string mount = kWorkspaceMountPoint;
  for (StepRank& r : launch.ranks) {
    auto it = r.env.find(kWorkspaceEnv);
    if (it == r.env.end() || it->second != workspace) continue;
    r.env["TRAINLET_DATASET_DIR"] = mount + "/dataset";
    r.env["TRAINLET_MODEL_DIR"] = mount + "/model";
  }
}

std::string MountedDescription() {
  return std::string(kWorkspaceMountPoint) + " (private mount namespace)";
}

std::string EnvDescription(const std::string& workspace) {
  return std::string(kWorkspaceEnv) + "=" + workspace;
}

Status EnterWorkspaceNamespace(const std::string& workspace, const std::string& mount_point) {
#ifdef __linux__
  if (geteuid() != 0) return UnavailableError("not root");
  struct stat st {};
  if (stat(workspace.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return UnavailableError(Errno("workspace " + workspace));
  }
  // Created on the host, before the namespace: an empty dir, and only when missing.
  if (lstat(mount_point.c_str(), &st) != 0) {
    if (errno != ENOENT || mkdir(mount_point.c_str(), 0755) != 0) {
      return UnavailableError(Errno("cannot create " + mount_point));
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return UnavailableError(mount_point + " exists and is not a directory");
  }
  if (unshare(CLONE_NEWNS) != 0) return UnavailableError(Errno("unshare(CLONE_NEWNS)"));
  // Private: the bind below, and any mount a rank makes, never propagates back to the host.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return UnavailableError(Errno("making the mounts private"));
  }
  if (mount(workspace.c_str(), mount_point.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return UnavailableError(Errno("binding " + workspace + " on " + mount_point));
  }
  return Status::Ok();
#else
  (void)workspace;
  (void)mount_point;
  return UnavailableError("mount namespaces are Linux's");
#endif
}

std::string ApplyWorkspace(const std::string& step_dir, StepLaunch& launch, std::string* why_not,
                           SpareFiles* spares) {
  const std::string workspace = LaunchWorkspace(launch);
  if (workspace.empty()) return "";
  std::string description;
  if (Status entered = EnterWorkspaceNamespace(workspace); entered.ok()) {
    PointRanksAtMount(launch, workspace);
    description = MountedDescription();
  } else {
    if (why_not != nullptr) *why_not = entered.message();
    description = EnvDescription(workspace);
  }
  const std::string note = step_dir + "/" + kWorkspaceNoteFile;
  if (spares != nullptr) spares->TakeAs(note + ".tmp");  // ReplaceFile truncates what it opens
  if (Status s = ReplaceFile(note, description + "\n", "workspace note");
      !s.ok() && why_not != nullptr) {
    *why_not += (why_not->empty() ? "" : "; ") + s.message();
  }
  return description;
}

std::string ReadWorkspaceNote(const std::string& step_dir) {
  auto text = ReadPrivateFile(step_dir + "/" + kWorkspaceNoteFile, 4096, "workspace note");
  if (!text.ok()) return "";
  std::string note = *text;
  while (!note.empty() && (note.back() == '\n' || note.back() == '\r')) note.pop_back();
  return note;
}

}  // namespace trainlet::step
