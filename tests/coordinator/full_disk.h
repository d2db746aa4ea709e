// FullDisk: a full disk under a test's state dir, without root (see the class).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include "coordinator/job_store.h"

namespace trainlet::coordinator {

// Makes every write past the current end of the state dir's files fail (EFBIG), as a full disk
// does, without root: RLIMIT_FSIZE caps the size of any file this process writes. SQLite then
// fails the commit that needs a new WAL frame. Restored when it goes out of scope.
class FullDisk {
 public:
  explicit FullDisk(const std::string& state_dir) {
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead of killing
    getrlimit(RLIMIT_FSIZE, &saved_);
    // Commits append to the WAL (no checkpoint resets it in a test this small).
    const auto wal = std::filesystem::path(state_dir) / (std::string(JobStore::kFileName) + "-wal");
    rlimit full = saved_;
    full.rlim_cur = static_cast<rlim_t>(std::filesystem::file_size(wal));
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &full), 0);
  }
  ~FullDisk() { setrlimit(RLIMIT_FSIZE, &saved_); }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

 private:
  rlimit saved_{};
};

}  // namespace trainlet::coordinator
