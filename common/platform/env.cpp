#include "common/platform/env.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/platform/descriptors.h"
#include "common/platform/errno_status.h"
#include "common/platform/process_control.h"
#include "common/platform/process_info.h"

extern char** environ;

namespace trainlet::platform {
namespace {

// `what`: the path (and the step that failed, where there are several). Io for what is not a
// missing path or a refusal.
Status ErrnoStatus(int err, const std::string& what) {
  return platform::ErrnoStatus(err, what, ErrorCode::kIo);
}

// Closes on every return path.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

class FlockedFile final : public FileLock {
 public:
  FlockedFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~FlockedFile() override { close(fd_); }  // closing the last descriptor drops the flock
  const std::string& path() const override { return path_; }
  Status Touch() override {
    if (futimens(fd_, nullptr) != 0) return ErrnoStatus(errno, "stamping " + path_);
    return Status::Ok();
  }

 private:
  const std::string path_;
  const int fd_;
};

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

PosixEnv::PosixEnv() : spawner_(MakePosixProcessSpawner()) {}
PosixEnv::~PosixEnv() = default;

std::chrono::steady_clock::time_point PosixEnv::MonotonicNow() {
  return std::chrono::steady_clock::now();
}

int64_t PosixEnv::WallUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void PosixEnv::SleepFor(std::chrono::microseconds duration) {
  if (duration.count() > 0) usleep(static_cast<useconds_t>(duration.count()));
}

Result<std::string> PosixEnv::Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return ErrnoStatus(errno, "gethostname");
  if (buf[0] == '\0') return NotFoundError("gethostname: the host has no name");
  return std::string(buf);
}

Status PosixEnv::BecomeChildSubreaper() { return platform::BecomeChildSubreaper(); }

std::vector<std::string> PosixEnv::Environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

std::string PosixEnv::ExecutablePath() { return platform::ExecutablePath(); }

pid_t PosixEnv::ProcessId() { return getpid(); }

Status PosixEnv::CreateDirectories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoStatus(ec.value(), path);
  return Status::Ok();
}

Result<std::string> PosixEnv::ReadFile(const std::string& path, size_t max_bytes) {
  Descriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return ErrnoStatus(errno, path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, path);
  if (!S_ISREG(st.st_mode)) return InvalidError(path + ": not a regular file");
  std::string out;
  char buf[16384];
  while (true) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, path);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return InvalidError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

Status PosixEnv::WriteFileAtomically(const std::string& path, std::string_view data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  {
    Descriptor fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode));
    if (fd.get() < 0) return ErrnoStatus(errno, tmp);
    Status written = WriteAll(fd.get(), data, tmp);
    if (written.ok() && fchmod(fd.get(), mode) != 0) written = ErrnoStatus(errno, tmp);
    if (written.ok() && SyncData(fd.get()) != 0) written = ErrnoStatus(errno, tmp);
    if (written.ok() && close(fd.release()) != 0) written = ErrnoStatus(errno, tmp);
    if (!written.ok()) {
      unlink(tmp.c_str());
      return written;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, path);
  }
  return Status::Ok();
}

Result<std::unique_ptr<FileLock>> PosixEnv::LockFile(const std::string& path) {
  Descriptor fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (fd.get() < 0) return ErrnoStatus(errno, path);
  for (int attempt = 1;; ++attempt) {
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno != EWOULDBLOCK && errno != EINTR) return ErrnoStatus(errno, path + ": flock");
    if (attempt == kLockAttempts) {
      return Status(ErrorCode::kExists, path + " is locked by another process");
    }
    SleepFor(kLockRetryInterval);
  }
  return std::unique_ptr<FileLock>(std::make_unique<FlockedFile>(path, fd.release()));
}

ProcessSpawner& PosixEnv::processes() { return *spawner_; }

Status MakePrivateDirectory(const std::string& path, bool* tightened) {
  if (tightened != nullptr) *tightened = false;
  std::error_code ec;
  const bool created = std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoStatus(ec.value(), path);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path);
  if (!S_ISDIR(st.st_mode)) return IoError(path + ": exists and is not a directory");
  if ((st.st_mode & 07777) == 0700) return Status::Ok();
  if (chmod(path.c_str(), 0700) != 0) return ErrnoStatus(errno, path + ": chmod 0700");
  if (tightened != nullptr) *tightened = !created && (st.st_mode & 077) != 0;
  return Status::Ok();
}

Env& RealEnv() {
  static Env* const env = new PosixEnv();  // never destroyed: used until the process exits
  return *env;
}

}  // namespace trainlet::platform
