#include "agent/step/step_users.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/step/rank_files.h"

namespace trainlet::step {
namespace {

std::string Who(const RankIdentity& id) {
  std::string out = "uid " + std::to_string(id.uid);
  if (!id.name.empty()) out += " (" + id.name + ")";
  return out;
}

std::string GroupText(const std::optional<gid_t>& g) {
  return g ? std::to_string(*g) : std::string("none");
}

constexpr char kLockPrefix[] = "uid-";
constexpr char kLockSuffix[] = ".lock";

// The uid a lock file's name holds ("uid-1000.lock"), or nullopt for any other name.
std::optional<uid_t> LockUid(const std::string& name) {
  const size_t p = std::strlen(kLockPrefix), q = std::strlen(kLockSuffix);
  if (name.size() <= p + q || name.compare(0, p, kLockPrefix) != 0 ||
      name.compare(name.size() - q, q, kLockSuffix) != 0) {
    return std::nullopt;
  }
  const std::string digits = name.substr(p, name.size() - p - q);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 10)
    return std::nullopt;
  return static_cast<uid_t>(std::stoull(digits));
}

// The fsGroup a held lock file says its user's ranks run with ("" or junk: none).
std::optional<gid_t> LockGroup(int fd) {
  char buf[16] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0 || buf[0] < '0' || buf[0] > '9') return std::nullopt;
  return static_cast<gid_t>(std::strtoul(buf, nullptr, 10));
}

Status Errno(const std::string& what) {
  return IoError("securityContext.fsGroup: " + what + ": " + std::strerror(errno));
}

}  // namespace

std::string WorkDirConflict(const std::string& work_dir, const RankIdentity& owner,
                            const std::vector<RankIdentity>& holders) {
  for (const RankIdentity& h : holders) {
    if (h.uid == owner.uid) continue;
    if (!owner.fs_group || !h.fs_group) {
      return "securityContext.fsGroup: ranks of " + Who(h) + " and " + Who(owner) +
             " would share the job's work dir " + work_dir +
             " on this node at the same time, and without fsGroup it belongs to one user at a "
             "time: set the same securityContext.fsGroup in the pods of both replicated jobs "
             "(their ranks then share it through that group, as on Kubernetes), or order them "
             "with dependsOn";
    }
    if (*owner.fs_group != *h.fs_group) {
      return "securityContext.fsGroup: ranks of " + Who(h) + " (fsGroup " + GroupText(h.fs_group) +
             ") and " + Who(owner) + " (fsGroup " + GroupText(owner.fs_group) +
             ") would share the job's work dir " + work_dir +
             " on this node at the same time, and it has one group: set the same fsGroup in the "
             "pods of both replicated jobs";
    }
  }
  return "";
}

Result<std::optional<RankIdentity>> StepUsers::IdentityFor(const RunAsRequest& request) {
  if (request.empty()) return std::optional<RankIdentity>();
  for (const auto& [asked, identity] : identities_) {
    if (asked == request) return identity;
  }
  auto identity = RankIdentity::Resolve(request, geteuid(), SystemAccounts());
  if (!identity.ok()) return identity.status();
  identities_.emplace_back(request, *identity);
  return *identity;
}

Status StepUsers::Admit(std::optional<size_t> index, const std::string& work_dir,
                        const std::string& state_dir, const RankIdentity& owner) {
  // No work dir (a launch without TRAINLET_WORK_DIR): nothing to share, nothing to give.
  if (work_dir.empty() || work_dir[0] != '/') return Status::Ok();
  std::vector<RankIdentity> holders;
  for (const auto& [i, h] : holders_) {
    if (h.work_dir == work_dir && (!index || i != *index)) holders.push_back(h.owner);
  }
  if (std::string why = WorkDirConflict(work_dir, owner, holders); !why.empty()) {
    return InvalidError(why);
  }
  if (index) {
    TRAINLET_RETURN_IF_ERROR(HoldAcrossSteps(work_dir, owner));
    holders_[*index] = Holder{work_dir, owner};  // a failure below is released with the rank
  }
  return GiveJobDirs(work_dir, state_dir, owner);
}

void StepUsers::Release(size_t index) {
  auto it = holders_.find(index);
  if (it == holders_.end()) return;
  const Holder gone = std::move(it->second);
  holders_.erase(it);
  for (const auto& [i, h] : holders_) {
    if (h.work_dir == gone.work_dir && h.owner.uid == gone.owner.uid) return;  // still held
  }
  for (auto l = locks_.begin(); l != locks_.end(); ++l) {
    if (l->work_dir == gone.work_dir && l->uid == gone.owner.uid) {
      close(l->fd);  // the user's last rank here is gone: so is this step's hold
      locks_.erase(l);
      return;
    }
  }
}

StepUsers::~StepUsers() {
  for (const UserLock& l : locks_) close(l.fd);
}

Status StepUsers::HoldAcrossSteps(const std::string& work_dir, const RankIdentity& owner) {
  for (const UserLock& l : locks_) {
    if (l.work_dir == work_dir && l.uid == owner.uid) return Status::Ok();  // checked before
  }
  auto dir = OpenStepSecretsDir(work_dir);
  if (!dir.ok()) return dir.status();
  const std::string mine = kLockPrefix + std::to_string(owner.uid) + kLockSuffix;
  const int fd = openat(*dir, mine.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  const std::string group = owner.fs_group ? std::to_string(*owner.fs_group) : "-";
  Status st = fd < 0 ? Errno(work_dir + "/" + kSecretsDirName + "/" + mine) : Status::Ok();
  // Shared: every step with ranks of this user here holds it; a probe (below) takes it alone.
  if (st.ok() && (flock(fd, LOCK_SH) != 0 || pwrite(fd, group.data(), group.size(), 0) < 0 ||
                  ftruncate(fd, static_cast<off_t>(group.size())) != 0)) {
    st = Errno("lock " + mine);
  }
  DIR* entries = st.ok() ? fdopendir(dup(*dir)) : nullptr;
  while (entries != nullptr && st.ok()) {
    const dirent* e = readdir(entries);
    if (e == nullptr) break;
    const std::optional<uid_t> uid = LockUid(e->d_name);
    if (!uid || *uid == owner.uid) continue;
    const int other = openat(*dir, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (other < 0) continue;
    // Taken at once: no step holds that user's ranks here any more (a stale file).
    if (flock(other, LOCK_EX | LOCK_NB) != 0) {
      RankIdentity held;
      held.uid = *uid;
      held.fs_group = LockGroup(other);
      if (std::string why = WorkDirConflict(work_dir, owner, {held}); !why.empty())
        st = InvalidError(why + " (that user's ranks run under another trainlet-step of the job)");
    }
    close(other);
  }
  if (entries != nullptr) closedir(entries);
  close(*dir);
  if (!st.ok()) {
    if (fd >= 0) close(fd);
    return st;
  }
  locks_.push_back(UserLock{work_dir, owner.uid, fd});
  return Status::Ok();
}

std::vector<uid_t> StepUsers::HoldersOf(const std::string& work_dir) const {
  std::vector<uid_t> out;
  for (const auto& [i, h] : holders_) {
    if (h.work_dir == work_dir && std::find(out.begin(), out.end(), h.owner.uid) == out.end())
      out.push_back(h.owner.uid);
  }
  return out;
}

}  // namespace trainlet::step
