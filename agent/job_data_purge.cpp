#include "agent/job_data_purge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "agent/launch_planning.h"

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

JobDataPurge::JobDataPurge(std::string state_dir, std::function<bool(const std::string&)> runs)
    : state_dir_(std::move(state_dir)), runs_(std::move(runs)) {}

Status JobDataPurge::Request(const std::string& job, const std::string& uid) {
  if (!IsJobKey(job)) {
    return InvalidError("refusing to purge the data of \"" + job + "\": not a job name");
  }
  if (const std::string stamp = StampOf(job); !uid.empty() && !stamp.empty() && stamp != uid) {
    spdlog::info("trainjob/{} ({}) was deleted: the data here is of another job of the name ({})",
                 job, uid, stamp);
    return Status::Ok();
  }
  if (runs_(job)) {
    spdlog::info("trainjob/{} was deleted: its data here goes once its workers have exited", job);
    waiting_[job] = uid;
    return Status::Ok();
  }
  return Remove(job);
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

Status JobDataPurge::OnPlan(const std::string& job, const std::string& uid) {
  Status s = StampFor(job, uid);
  if (!s.ok()) spdlog::warn("trainjob/{}: {}", job, s.message());
  return s;
}

Status JobDataPurge::StampFor(const std::string& job, const std::string& uid) {
  Cancel(job);
  if (uid.empty() || !IsJobKey(job)) return Status::Ok();
  const std::string stamp = StampOf(job);
  if (stamp == uid) return Status::Ok();
  if (!stamp.empty()) {
    if (runs_(job)) {
      // Only after a delete --force: the old job's ranks still run here. Its data stays.
      spdlog::warn(
          "trainjob/{} ({}): workers of an earlier job of the name ({}) still run here; "
          "its data stays",
          job, uid, stamp);
    } else {
      spdlog::warn(
          "trainjob/{} ({}): removing the data of an earlier job of the name ({}), "
          "whose purge this node missed",
          job, uid, stamp);
      TRAINLET_RETURN_IF_ERROR(Remove(job));
    }
  }
  const std::string path = StampPath(job);
  std::error_code ec;
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
    spdlog::warn(
        "trainjob/{}: a new job of this name came before the old one's data was removed; "
        "the old data stays",
        job);
  }
}

void JobDataPurge::Poll() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (runs_(it->first)) {
      ++it;
      continue;
    }
    const std::string job = it->first;
    it = waiting_.erase(it);
    if (Status s = Remove(job); !s.ok()) spdlog::warn("{}", s.message());
  }
}

Status JobDataPurge::Remove(const std::string& job) {
  // Where launch_planning puts them: every attempt's logs under one dir per job, and the work dir.
  const fs::path logs = fs::path(RankLogPath(state_dir_, job, 1, 0)).parent_path().parent_path();
  Status result = Status::Ok();
  for (const fs::path& dir : {logs, fs::path(JobWorkDir(state_dir_, job))}) {
    std::error_code ec;
    const auto removed = fs::remove_all(dir, ec);
    if (ec) {
      result = IoError("cannot remove " + dir.string() + ": " + ec.message());
      continue;
    }
    if (removed != 0) spdlog::info("trainjob/{} was deleted: removed {}", job, dir.string());
  }
  return result;
}

}  // namespace trainlet::agent
