#include "agent/job_data_purge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
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

Status JobDataPurge::Request(const std::string& job) {
  if (!IsJobKey(job)) {
    return InvalidError("refusing to purge the data of \"" + job + "\": not a job name");
  }
  if (runs_(job)) {
    spdlog::info("trainjob/{} was deleted: its data here goes once its workers have exited", job);
    waiting_.insert(job);
    return Status::Ok();
  }
  return Remove(job);
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
    if (runs_(*it)) {
      ++it;
      continue;
    }
    const std::string job = *it;
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
