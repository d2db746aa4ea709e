#include "agent/step/step_users.h"

#include <unistd.h>

#include <algorithm>

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
  TRAINLET_RETURN_IF_ERROR(GiveJobDirs(work_dir, state_dir, owner));
  if (index) holders_[*index] = Holder{work_dir, owner};
  return Status::Ok();
}

void StepUsers::Release(size_t index) { holders_.erase(index); }

std::vector<uid_t> StepUsers::HoldersOf(const std::string& work_dir) const {
  std::vector<uid_t> out;
  for (const auto& [i, h] : holders_) {
    if (h.work_dir == work_dir && std::find(out.begin(), out.end(), h.owner.uid) == out.end())
      out.push_back(h.owner.uid);
  }
  return out;
}

}  // namespace trainlet::step
