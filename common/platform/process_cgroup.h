// A cgroup of its own for the processes of one step, so that every process a rank starts, however
// it detaches (setsid, a double fork, `env -i`), is still found and killed when the step ends.
// A process group or a session is the rank's to leave; a cgroup is not (only root can move a
// process out of it, and the ranks' tree never needs to).
//
// Where: <hierarchy><the caller's own cgroup>/trainlet/<name>, so a step started by an agent in
// systemd's trainlet-agent.service lands under that service (the unit sets Delegate=yes). Which
// hierarchy, in the order kAuto tries them:
//  - kV2: the unified (cgroup2) hierarchy, mounted at /sys/fs/cgroup on a pure v2 host or at
//    /sys/fs/cgroup/unified on a hybrid one. Kill writes cgroup.kill (Linux 5.14); on older
//    kernels it freezes (cgroup.freeze), SIGKILLs each member and thaws.
//  - kV1Freezer: a v1 `freezer` hierarchy: freeze, SIGKILL each member, thaw. Frozen members
//    cannot fork while they are listed, so none is missed.
//  - kNone: no cgroup; Create fails with kUnavailable. Callers fall back to
//    KillOrphanedChildren (process_control.h), which finds what re-parented to a subreaper.
// A process that is not root usually may not create cgroups: Create fails with kPermission and
// the caller falls back the same way.
//
// Thread: one object, one thread. The cgroup outlives the object: Remove() deletes it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::platform {

enum class CgroupMode { kAuto, kV2, kV1Freezer, kNone };

// "auto", "v2", "v1" or "none"; nullopt for anything else.
std::optional<CgroupMode> ParseCgroupMode(std::string_view text);
std::string_view CgroupModeName(CgroupMode mode);

// The mount points of the hierarchies this file uses, from /proc/self/mountinfo's text (pure).
// "" when that hierarchy is not mounted.
struct CgroupMounts {
  std::string v2;          // a cgroup2 mount
  std::string v1_freezer;  // a v1 cgroup mount whose options include "freezer"
};
CgroupMounts ParseCgroupMounts(std::string_view mountinfo);

// The caller's path in the unified hierarchy (the "0::PATH" line) when `controller` is "", or in
// the v1 hierarchy holding `controller`, from /proc/self/cgroup's text (pure). nullopt if absent.
std::optional<std::string> ParseOwnCgroup(std::string_view proc_self_cgroup,
                                          std::string_view controller);

class ProcessCgroup {
 public:
  // Makes the cgroup `name` (one path component) under the caller's own cgroup in the hierarchy
  // `mode` asks for (kAuto: the first that works). Errors: kUnavailable when the hierarchy is not
  // there (or mode is kNone), kPermission when this process may not create cgroups, kExists when
  // `name` exists already, kInternal for any other failed call; each names the path.
  static Result<std::unique_ptr<ProcessCgroup>> Create(const std::string& name, CgroupMode mode);
  // The cgroup `name` that Create made there earlier, maybe in another process (the agent ending
  // a step that died: its ranks' cgroup outlives it). kNotFound when there is none; other errors
  // as Create's.
  static Result<std::unique_ptr<ProcessCgroup>> Open(const std::string& name, CgroupMode mode);
  ProcessCgroup(const ProcessCgroup&) = delete;
  ProcessCgroup& operator=(const ProcessCgroup&) = delete;

  CgroupMode mode() const { return mode_; }
  const std::string& path() const { return path_; }

  // Moves the calling process into the cgroup: what it forks from now on starts there.
  Status Enter();
  // Moves the calling process back to the cgroup it was in when Create ran. Until it has, Kill
  // would kill the caller too.
  Status Leave();
  // SIGKILL to every process in the cgroup, now. Does not wait for them to die: Populated says.
  Status Kill();
  // Whether any process is still in the cgroup (an exited process leaves it at once, even before
  // it is reaped).
  bool Populated() const;
  // Deletes the cgroup; it must be empty. kBusy-like errors come back as kInternal naming it.
  Status Remove();

 private:
  // Create (`create`) or Open.
  static Result<std::unique_ptr<ProcessCgroup>> Locate(const std::string& name, CgroupMode mode,
                                                       bool create);
  ProcessCgroup(CgroupMode mode, std::string path, std::string home)
      : mode_(mode), path_(std::move(path)), home_(std::move(home)) {}
  std::vector<pid_t> Members() const;
  // Freezes (true) or thaws (false) the cgroup's members and waits for the freeze to take.
  Status Freeze(bool frozen);

  const CgroupMode mode_;
  const std::string path_;  // the cgroup's directory
  const std::string home_;  // the directory of the cgroup the creator was in
};

}  // namespace trainlet::platform
