#include "agent/step/spare_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/platform/directory_spread.h"
#include "common/platform/env.h"
#include "common/platform/process_spawner.h"

namespace trainlet::step {

namespace {

constexpr char kFillDir[] = ".fill";
constexpr char kDirsDir[] = ".dirs";  // the spare dirs

// The names of `dir`'s files (or, with `dirs`, its directories) that are not dot-names; empty
// when it cannot be read.
std::vector<std::string> List(const std::string& dir, bool dirs = false) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (e->d_type != (dirs ? DT_DIR : DT_REG) && e->d_type != DT_UNKNOWN) continue;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      const std::string full = dir + "/" + e->d_name;
      if (lstat(full.c_str(), &st) != 0 || (dirs ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
        continue;
    }
    names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

std::vector<std::string> ListFiles(const std::string& dir) { return List(dir); }

}  // namespace

SpareFiles::~SpareFiles() { Close(); }

SpareFiles::SpareFiles(SpareFiles&& other) noexcept
    : dir_(std::move(other.dir_)), files_(std::move(other.files_)), dirs_(std::move(other.dirs_)) {
  other.files_.fd = other.dirs_.fd = -1;
}

SpareFiles& SpareFiles::operator=(SpareFiles&& other) noexcept {
  if (this != &other) {
    Close();
    dir_ = std::move(other.dir_);
    files_ = std::move(other.files_);
    dirs_ = std::move(other.dirs_);
    other.files_.fd = other.dirs_.fd = -1;
  }
  return *this;
}

void SpareFiles::Close() {
  for (Pool* pool : {&files_, &dirs_}) {
    if (pool->fd >= 0) close(pool->fd);
    pool->fd = -1;
  }
}

void SpareFiles::GiveUp() {
  files_.names.clear();
  dirs_.names.clear();
  dir_.clear();
}

bool SpareFiles::TakeAs(const std::string& path) { return Take(files_, false, AT_FDCWD, path); }

bool SpareFiles::TakeDirAs(const std::string& path) { return Take(dirs_, true, AT_FDCWD, path); }

bool SpareFiles::TakeAt(int dir_fd, const std::string& name) {
  return Take(files_, false, dir_fd, name);
}

bool SpareFiles::TakeDirAt(int dir_fd, const std::string& name) {
  return Take(dirs_, true, dir_fd, name);
}

int SpareFiles::TakeOpenAt(int dir_fd, const std::string& name) {
  int fd = -1;
  return Take(files_, false, dir_fd, name, &fd) ? fd : -1;
}

bool SpareFiles::Take(Pool& pool, bool dirs, int to_fd, const std::string& to, int* open_fd) {
#ifdef __linux__
  if (dir_.empty()) return false;
  if (!pool.listed) {
    pool.listed = true;
    const std::string from_dir = dirs ? dir_ + "/" + kDirsDir : dir_;
    pool.names = List(from_dir, dirs);
    if (!pool.names.empty()) pool.fd = open(from_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pool.fd < 0) pool.names.clear();
  }
  while (!pool.names.empty()) {
    const std::string& from = pool.names.back();
    // Opened in the agent's own (0700) dir before the rename: the descriptor is this file's
    // whatever happens to `to` afterwards. One that another step renamed away is gone here.
    int fd = -1;
    if (open_fd != nullptr) {
      fd = openat(pool.fd, from.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT) {
        pool.names.pop_back();  // another step took it
        continue;
      }
      if (fd < 0) return false;
    }
    if (renameat2(pool.fd, from.c_str(), to_fd, to.c_str(), RENAME_NOREPLACE) == 0) {
      pool.names.pop_back();
      if (open_fd != nullptr) *open_fd = fd;
      return true;
    }
    const int err = errno;
    if (fd >= 0) close(fd);
    if (err == EEXIST) return false;  // the log exists: appended to, the spare kept
    if (err == ENOENT && faccessat(pool.fd, from.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
      pool.names.pop_back();  // another step took it
      continue;
    }
    // No such dir for `to`, another file system, no RENAME_NOREPLACE there: create as before.
    if (err != ENOENT) GiveUp();
    return false;
  }
#else
  (void)pool, (void)dirs, (void)to_fd, (void)to, (void)open_fd;
#endif
  return false;
}

Status MakePrivateDirectoryFromSpare(const std::string& path, SpareFiles* spares) {
  if (spares != nullptr && spares->TakeDirAs(path)) {
    // A spare is made 0700; checked all the same, as MakePrivateDirectory checks what it finds.
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700)
      return Status::Ok();
  }
  return platform::MakePrivateDirectory(path);
}

Result<int> OpenRankLog(const std::string& path, bool create_parent, SpareFiles* spares,
                        int* parent_fd) {
  if (path.empty()) return platform::OpenWorkerLog(path, false);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (create_parent) {
    // The attempt's log dir (logs/<job>/attempt-N) is a spare dir renamed into place where one
    // waits and the dir is new; one that exists is kept (EEXIST) and made as before otherwise.
    if (!parent.empty() && !(spares != nullptr && spares->TakeDirAs(parent.string()))) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      if (ec) return IoError("log dir " + parent.string() + ": " + ec.message());
    }
  }
  if (parent_fd == nullptr || parent.empty()) {
    if (spares != nullptr) spares->TakeAs(path);
    return platform::OpenWorkerLog(path, false);
  }
  if (create_parent || *parent_fd < 0) {
    if (*parent_fd >= 0) close(*parent_fd);
    *parent_fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*parent_fd < 0) return IoError("log dir " + parent.string() + ": " + std::strerror(errno));
  }
  const std::string name = std::filesystem::path(path).filename().string();
  if (spares != nullptr) spares->TakeAt(*parent_fd, name);
  // As OpenWorkerLog opens it, relative to the open dir.
  int fd =
      openat(*parent_fd, name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) return IoError("log file " + path + ": " + std::strerror(errno));
  if (fd <= STDERR_FILENO) {  // a closed stdio slot: keep the log off 0-2, as OpenWorkerLog does
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    const int err = errno;
    close(fd);
    if (high < 0) return IoError("log file " + path + ": " + std::strerror(err));
    fd = high;
  }
  return fd;
}

SpareFileFiller::SpareFileFiller(std::string dir, size_t max_files,
                                 std::chrono::milliseconds settle)
    : dir_(std::move(dir)), max_files_(max_files), settle_(settle), thread_([this] { Run(); }) {}

SpareFileFiller::~SpareFileFiller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SpareFileFiller::Want(size_t files, size_t dirs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    want_ = std::max(want_, std::min(files, max_files_));
    want_dirs_ = std::max(want_dirs_, std::min(dirs, max_files_));
    work_ = true;
  }
  cv_.notify_all();
}

size_t SpareFileFiller::Made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

void SpareFileFiller::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (!work_ && !busy_); });
}

std::string SpareFileFiller::Error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void SpareFileFiller::Run() {
#ifdef __linux__
  // Only this thread (Linux's policies and nice are per thread): the launches come first. With
  // SCHED_IDLE, which any thread may take: below nice 19, and below the agent's own policy when
  // that is real-time (chrt), which its threads inherit and which nice does not lower. Else
  // nice 19.
  sched_param none{};
  if (sched_setscheduler(static_cast<pid_t>(gettid()), SCHED_IDLE, &none) != 0)
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
#endif
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || work_; });
    if (stop_) return;
    busy_ = true;
    // The launch that asked comes first: its ranks' exits and the coordinator's answer need the
    // CPUs more than the next launch needs its files. So the filler starts once no Want came for
    // `settle_`. Measured on this 2-CPU host, 40 paired 64-rank launches each: filling at once
    // (during that tail) cost +2.1 ms against main; after 50 ms quiet, -3.0 ms.
    while (!stop_ && work_) {
      work_ = false;
      cv_.wait_for(lock, settle_, [this] { return stop_ || work_; });
    }
    if (stop_) return;
    const size_t want = want_, want_dirs = want_dirs_;
    lock.unlock();
    Result<size_t> made = Fill(want, want_dirs);
    lock.lock();
    busy_ = false;
    if (made.ok()) {
      made_ += *made;
      error_.clear();
    } else {
      error_ = made.status().message();
    }
    cv_.notify_all();
  }
}

Result<size_t> SpareFileFiller::Fill(size_t want, size_t want_dirs) {
#ifdef __linux__
  const std::string fill = dir_ + "/" + kFillDir;
  const std::string dirs = dir_ + "/" + kDirsDir;
  TRAINLET_RETURN_IF_ERROR(platform::MakePrivateDirectory(dir_));
  // The fill dir is made anew for each fill, spread to a block group of its own (its files'
  // inodes are allocated in its group: directory_spread.h), so it is not the state dir's group,
  // which every deleted job and temporary file churns. Best effort: without the flag it only
  // costs the filler more.
  (void)platform::SpreadSubdirectories(dir_);
  // Files made before an interrupted rename (the agent stopped) are spares like the others.
  for (const std::string& name : ListFiles(fill)) {
    std::rename((fill + "/" + name).c_str(), (dir_ + "/" + name).c_str());
  }
  if (want_dirs > 0) TRAINLET_RETURN_IF_ERROR(platform::MakePrivateDirectory(dirs));
  for (const std::string& name : List(fill, /*dirs=*/true)) {
    if (want_dirs == 0 ||
        std::rename((fill + "/" + name).c_str(), (dirs + "/" + name).c_str()) != 0)
      rmdir((fill + "/" + name).c_str());
  }
  rmdir(fill.c_str());
  TRAINLET_RETURN_IF_ERROR(platform::MakePrivateDirectory(fill));
  struct RemoveFill {
    const std::string& dir;
    ~RemoveFill() { rmdir(dir.c_str()); }
  } remove_fill{fill};
  size_t have = ListFiles(dir_).size();
  size_t made = 0;
  const std::string prefix = std::to_string(getpid()) + "-";
  while (have < want) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    const std::string name = prefix + std::to_string(++seq_);
    const std::string made_path = fill + "/" + name;
    const int fd = open(made_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return IoError("spare files: " + made_path + ": " + std::strerror(errno));
    }
    close(fd);
    if (std::rename(made_path.c_str(), (dir_ + "/" + name).c_str()) != 0) {
      const int err = errno;
      unlink(made_path.c_str());
      return IoError("spare files: " + dir_ + "/" + name + ": " + std::strerror(err));
    }
    ++have;
    ++made;
  }
  // The dirs after the files: a launch takes its rank logs' files on its critical path too.
  size_t have_dirs = want_dirs > 0 ? List(dirs, /*dirs=*/true).size() : 0;
  while (have_dirs < want_dirs) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    const std::string name = prefix + std::to_string(++seq_);
    const std::string made_path = fill + "/" + name;
    if (mkdir(made_path.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return IoError("spare dirs: " + made_path + ": " + std::strerror(errno));
    }
    if (std::rename(made_path.c_str(), (dirs + "/" + name).c_str()) != 0) {
      const int err = errno;
      rmdir(made_path.c_str());
      return IoError("spare dirs: " + dirs + "/" + name + ": " + std::strerror(err));
    }
    ++have_dirs;
    ++made;
  }
  return made;
#else
  (void)want, (void)want_dirs;
  return size_t{0};
#endif
}

}  // namespace trainlet::step
