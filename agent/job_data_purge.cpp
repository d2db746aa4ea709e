#include "agent/job_data_purge.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "agent/launch_planning.h"
#include "agent/working_dirs.h"

namespace trainlet::agent {
namespace fs = std::filesystem;

bool IsJobKey(std::string_view job) {
  if (job.empty() || job.size() > 253 || job.front() == '.' ||
      job.find("..") != std::string_view::npos) {
    return false;
  }
  return std::all_of(job.begin(), job.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

JobDataPurge::JobDataPurge(std::string state_dir, std::string shared_dir,
                           std::function<bool(const std::string&)> runs)
    : state_dir_(std::move(state_dir)), runs_(std::move(runs)), shared_dir_(std::move(shared_dir)) {
  // A previous agent's graves: <job>.<uid>, a UID having no '.'.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(state_dir_) / "purging", ec)) {
    const std::string name = entry.path().filename().string();
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos && IsJobKey(name.substr(0, dot))) {
      graves_[name.substr(0, dot)].insert(entry.path().string());
    }
  }
}

std::string JobDataPurge::GravePath(const std::string& job, const std::string& uid) const {
  // The stamp is read from a file in the job's logs dir: anything but a plain token (a UID is 32
  // hex digits) names no path here, whoever wrote it.
  const bool token =
      !uid.empty() && uid.size() <= 64 && std::all_of(uid.begin(), uid.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-';
      });
  return (fs::path(state_dir_) / "purging" / (job + "." + (token ? uid : "unnamed"))).string();
}

Status JobDataPurge::Bury(const std::string& job, const std::string& stamp) {
  const fs::path grave = GravePath(job, stamp);
  std::error_code ec;
  fs::create_directories(grave, ec);
  if (ec) return IoError("cannot make " + grave.string() + ": " + ec.message());
  fs::permissions(grave.parent_path(), fs::perms::owner_all, ec);  // 0700, as logs/
  fs::permissions(grave, fs::perms::owner_all, ec);
  graves_[job].insert(grave.string());
  const fs::path logs = fs::path(StampPath(job)).parent_path();
  for (const auto& [dir, as] :
       {std::pair{logs, "logs"}, std::pair{fs::path(JobWorkDir(state_dir_, job)), "work"}}) {
    if (!fs::exists(dir, ec)) continue;
    fs::rename(dir, grave / as, ec);
    if (ec) return IoError("cannot move " + dir.string() + " aside: " + ec.message());
  }
  return Status::Ok();
}

Status JobDataPurge::Request(const std::string& job, const std::string& uid, bool shared) {
  if (!IsJobKey(job)) {
    return InvalidError("refusing to purge the data of \"" + job + "\": not a job name");
  }
  Waiting what;
  if (const std::string stamp = StampOf(job); !uid.empty() && !stamp.empty() && stamp != uid) {
    spdlog::info("trainjob/{} ({}) was deleted: the data here is of another job of the name ({})",
                 job, uid, stamp);
    what.local = false;
  }
  if (shared && !shared_dir_.empty()) {
    const std::string stamp = SharedStampOf(job);
    what.shared = uid.empty() || stamp.empty() || stamp == uid;
    if (!what.shared) {
      spdlog::info("trainjob/{} ({}) was deleted: {} is of another job of the name ({})", job, uid,
                   SharedWorkDir(shared_dir_, job), stamp);
    }
  }
  if (!what.local && !what.shared) return Status::Ok();
  if (runs_(job)) {
    spdlog::info("trainjob/{} was deleted: its data here goes once its workers have exited", job);
    waiting_[job] = what;
    return Status::Ok();
  }
  return Remove(job, what);
}

std::string JobDataPurge::SharedStampPath(const std::string& job) const {
  return (fs::path(shared_dir_) / ".trainlet-uids" / job).string();
}

std::string JobDataPurge::SharedStampOf(const std::string& job) const {
  if (shared_dir_.empty()) return "";
  std::ifstream in(SharedStampPath(job));
  std::string uid;
  if (in) std::getline(in, uid);
  return uid;
}

Status JobDataPurge::StampShared(const std::string& job, const std::string& uid) {
  if (shared_dir_.empty() || uid.empty() || !IsJobKey(job)) return Status::Ok();
  const std::string stamp = SharedStampOf(job);
  if (stamp == uid) return Status::Ok();
  if (!stamp.empty()) {
    // Its purge is still to come (a node that owns it was away) or was missed: the new job adopts
    // the directory, and that purge now leaves it alone.
    spdlog::warn("trainjob/{} ({}): {} was an earlier job's of the name ({}); it is this job's now",
                 job, uid, SharedWorkDir(shared_dir_, job), stamp);
  }
  const fs::path path = SharedStampPath(job);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return IoError("cannot make " + path.parent_path().string() + ": " + ec.message());
  // Written whole under another name, then renamed: a node reading it never sees half a UID.
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::trunc);
  out << uid << "\n";
  out.close();
  if (!out) return IoError("cannot write " + tmp);
  fs::rename(tmp, path, ec);
  if (ec) return IoError("cannot write " + path.string() + ": " + ec.message());
  return Status::Ok();
}

std::string JobDataPurge::StampPath(const std::string& job) const {
  // Beside the rank logs (launch_planning.h's RankLogPath): <state dir>/logs/<job>/.trainlet-uid.
  return (fs::path(RankLogPath(state_dir_, job, 1, 0)).parent_path().parent_path() /
          ".trainlet-uid")
      .string();
}

std::string JobDataPurge::StampOf(const std::string& job) const {
  std::ifstream in(StampPath(job));
  std::string uid;
  if (in) std::getline(in, uid);
  return uid;
}

Status JobDataPurge::OnPlan(const std::string& job, const std::string& uid, bool shared,
                            step::SpareFiles* spares) {
  Status s = StampFor(job, uid, spares);
  if (s.ok() && shared) s = StampShared(job, uid);
  if (!s.ok()) spdlog::warn("trainjob/{}: {}", job, s.message());
  return s;
}

Status JobDataPurge::StampFor(const std::string& job, const std::string& uid,
                              step::SpareFiles* spares) {
  Cancel(job);
  if (uid.empty() || !IsJobKey(job)) return Status::Ok();
  const std::string stamp = StampOf(job);
  if (stamp == uid) return Status::Ok();
  if (!stamp.empty()) {
    if (runs_(job)) {
      // Its step still sweeps up after its ranks (a delete, then at once an apply), or its ranks
      // still run (a delete --force): its data moves aside, out of the new job's way.
      if (Status s = Bury(job, stamp); !s.ok()) {
        spdlog::warn(
            "trainjob/{} ({}): workers of an earlier job of the name ({}) still run here, and "
            "its data could not be moved aside, so the new job sees it: {}",
            job, uid, stamp, s.message());
      } else {
        spdlog::info(
            "trainjob/{} ({}): workers of an earlier job of the name ({}) still run here; its "
            "data moved to {}, removed once they have exited",
            job, uid, stamp, GravePath(job, stamp));
      }
    } else {
      spdlog::warn(
          "trainjob/{} ({}): removing the data of an earlier job of the name ({}), "
          "whose purge this node missed",
          job, uid, stamp);
      TRAINLET_RETURN_IF_ERROR(Remove(job, Waiting{}));
    }
  }
  const std::string path = StampPath(job);
  std::error_code ec;
  // A new job's logs/<job> is a spare dir renamed into place where one waits (spare_files.h).
  if (spares == nullptr || !spares->TakeDirAs(fs::path(path).parent_path().string()))
    fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return IoError("cannot make " + fs::path(path).parent_path().string() + ": " + ec.message());
  fs::permissions(fs::path(path).parent_path(), fs::perms::owner_all, ec);  // 0700, as logs/
  std::ofstream out(path, std::ios::trunc);
  out << uid << "\n";
  out.close();
  if (!out) return IoError("cannot write " + path);
  return Status::Ok();
}

void JobDataPurge::Cancel(const std::string& job) {
  if (waiting_.erase(job) != 0) {
    spdlog::info("trainjob/{}: a new job of this name came before the old one's data was removed",
                 job);
  }
}

void JobDataPurge::Poll() {
  for (auto it = graves_.begin(); it != graves_.end();) {
    if (runs_(it->first)) {
      ++it;
      continue;
    }
    for (const std::string& grave : it->second) {
      std::error_code ec;
      fs::remove_all(grave, ec);
      if (ec) {
        spdlog::warn("cannot remove {}: {}", grave, ec.message());
      } else {
        spdlog::info("trainjob/{}: removed {}, an earlier job's of the name", it->first, grave);
      }
    }
    it = graves_.erase(it);
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (runs_(it->first)) {
      ++it;
      continue;
    }
    const std::string job = it->first;
    const Waiting what = it->second;
    it = waiting_.erase(it);
    if (Status s = Remove(job, what); !s.ok()) spdlog::warn("{}", s.message());
  }
}

Status JobDataPurge::Remove(const std::string& job, Waiting what) {
  // Where launch_planning puts them: every attempt's logs under one dir per job, and the work dir;
  // the shared directory, then its stamp (a stamp left by a failed removal keeps it guarded).
  const fs::path logs = fs::path(RankLogPath(state_dir_, job, 1, 0)).parent_path().parent_path();
  std::vector<fs::path> dirs;
  if (what.local) dirs = {logs, fs::path(JobWorkDir(state_dir_, job))};
  if (what.shared) dirs.push_back(SharedWorkDir(shared_dir_, job));
  Status result = Status::Ok();
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    const auto removed = fs::remove_all(dir, ec);
    if (ec) {
      result = IoError("cannot remove " + dir.string() + ": " + ec.message());
      continue;
    }
    if (removed != 0) spdlog::info("trainjob/{} was deleted: removed {}", job, dir.string());
  }
  if (what.shared && result.ok()) {
    std::error_code ec;
    fs::remove(SharedStampPath(job), ec);
    if (ec) result = IoError("cannot remove " + SharedStampPath(job) + ": " + ec.message());
  }
  return result;
}

}  // namespace trainlet::agent
