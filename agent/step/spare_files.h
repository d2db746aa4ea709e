// Spare files: empty files made ahead of need in one directory, so that creating a rank's log on
// the launch's critical path is a rename instead of an inode allocation.
//
// Why: every rank of a step gets a new log file, one after the other, just before it is spawned.
// On ext4 without a journal (this project's benchmark host), allocating an inode walks past every
// inode of the block group freed in the last 60 to 360 seconds (the kernel's recently_deleted()),
// and each such step looks up a buffer: after the churn of deleted jobs and of builds, creating 64
// files took 15-100 ms, against about 1 ms to rename 64 files made before (bench/README.md,
// 2026-11-25). The inodes are then allocated by SpareFileFiller, off the critical path.
//
// The directory (<agent state dir>/spare-files, 0700) holds empty 0600 files of the agent's user,
// which is also the step's: a taken file is what OpenWorkerLog would have created. The filler
// makes each file under <dir>/.fill and renames it into <dir> when made, so a taker never waits on
// a directory lock held through an inode allocation.
//
// Spare directories, the same way: the agent makes a launch's private dirs (the job's work dir,
// its workspace/, dataset/ and model/, all 0700; logs/<job> and the step dir) and the step the
// attempt's log dir (logs/<job>/attempt-N) from empty 0700 dirs the filler made in
// <dir>/.dirs, where a new directory's inode costs most (ext4's Orlov allocator looks at every
// block group for a directory, as well as the recently freed inodes).
//
// Files are taken with rename(RENAME_NOREPLACE): a log that exists already (an earlier attempt's,
// appended to) is never replaced, and two steps taking at once each get a different file (the one
// that loses the race sees ENOENT and tries the next). Linux only; elsewhere Take never takes and
// the filler makes nothing.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace trainlet::step {

// The taking side, in trainlet-step. Plain libc; one thread. It keeps the spare dirs open
// (close-on-exec) once it has used them, so that a take is one renameat2 between two open dirs.
class SpareFiles {
 public:
  // `dir` "" means no spares: TakeAs never takes.
  explicit SpareFiles(std::string dir) : dir_(std::move(dir)) {}
  ~SpareFiles();
  SpareFiles(SpareFiles&& other) noexcept;
  SpareFiles& operator=(SpareFiles&& other) noexcept;
  SpareFiles(const SpareFiles&) = delete;
  SpareFiles& operator=(const SpareFiles&) = delete;

  // Renames one spare file to `path` (whose directory exists): true when `path` is now an empty
  // file that was a spare. False when there is none left, when `path` exists, or when the rename
  // fails otherwise (another file system: the spares are then given up for this step); the caller
  // then creates `path` as it would have.
  bool TakeAs(const std::string& path);
  // The same for a spare directory (0700, empty, the agent's user): true when `path` is now one.
  bool TakeDirAs(const std::string& path);
  // The same, to `name` under the open directory `dir_fd`.
  bool TakeAt(int dir_fd, const std::string& name);
  bool TakeDirAt(int dir_fd, const std::string& name);
  // A spare file opened (O_WRONLY, close-on-exec) in the spares' own dir, then renamed to `name`
  // under `dir_fd`: its descriptor, which names the taken file whatever is done to `name`
  // afterwards (for a file in a dir another user owns); -1 when none was taken.
  int TakeOpenAt(int dir_fd, const std::string& name);

 private:
  struct Pool {
    bool listed = false;
    std::vector<std::string> names;  // listed once, taken from the back
    int fd = -1;                     // the dir the names are in, once opened
  };
  // `open_fd`: not null for TakeOpenAt.
  bool Take(Pool& pool, bool dirs, int to_fd, const std::string& to, int* open_fd = nullptr);
  void GiveUp();
  void Close();

  std::string dir_;
  Pool files_, dirs_;
};

// `path` made as a private (0700) directory, from a spare when `spares` has one and `path` does
// not exist yet (its parent must); else as platform::MakePrivateDirectory makes it, parents and
// all. Errors as MakePrivateDirectory's.
Status MakePrivateDirectoryFromSpare(const std::string& path, SpareFiles* spares);

// The log of a rank, opened as OpenWorkerLog opens it (O_APPEND, 0600, close-on-exec), with its
// parent dir created first when `create_parent` (a spare dir when `spares` has one and the dir is
// new), and made from a spare when `spares` has one and the log does not exist yet. Errors as
// OpenWorkerLog's. With `parent_fd`, the parent dir is opened once (when `create_parent` or while
// *parent_fd is -1; the caller closes it) and the log is taken and opened relative to it, without
// walking its path again for every rank of the dir.
Result<int> OpenRankLog(const std::string& path, bool create_parent, SpareFiles* spares,
                        int* parent_fd = nullptr);

// The making side, in the agent: one thread that keeps `dir` holding at least the largest number
// of files asked for so far (Want), making what is missing at the lowest CPU priority (SCHED_IDLE,
// else nice 19), so that it takes only time the launches leave. Its errors are reported by Error()
// and stop it from making more until the next Want; the launches then create their logs as before.
// Want and Error may be called from any thread; the destructor stops the thread (after the file it
// is making).
class SpareFileFiller {
 public:
  // No file is made until the first Want, nor before `settle` has passed without another. At
  // most `max_files` are kept.
  explicit SpareFileFiller(std::string dir, size_t max_files = kDefaultMaxFiles,
                           std::chrono::milliseconds settle = kDefaultSettle);
  ~SpareFileFiller();
  SpareFileFiller(const SpareFileFiller&) = delete;
  SpareFileFiller& operator=(const SpareFileFiller&) = delete;

  // A step of `files` ranks was started: keep at least that many spares (up to max_files), and
  // make the missing ones now; as many dirs for `dirs` (also up to max_files).
  void Want(size_t files, size_t dirs = 0);
  // How many files (and dirs) the thread has made; for tests.
  size_t Made() const;
  // Blocks until the thread has nothing left to do; for tests.
  void WaitIdle();
  // The last error of the thread ("" when none).
  std::string Error() const;

  static constexpr size_t kDefaultMaxFiles = 1024;
  static constexpr std::chrono::milliseconds kDefaultSettle{50};

 private:
  void Run();
  // Moves leftovers of an interrupted fill into `dir_`, then makes files until `want` and dirs
  // until `want_dirs`; under no lock. Returns how many it made.
  Result<size_t> Fill(size_t want, size_t want_dirs);

  const std::string dir_;
  const size_t max_files_;
  const std::chrono::milliseconds settle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  size_t want_ = 0;
  size_t want_dirs_ = 0;
  bool work_ = false;
  bool busy_ = false;
  bool stop_ = false;
  size_t made_ = 0;
  std::string error_;
  unsigned long seq_ = 0;  // the thread's only: names it made
  std::thread thread_;     // last: starts once the members above exist
};

}  // namespace trainlet::step
