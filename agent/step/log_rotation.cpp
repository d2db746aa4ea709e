#include "agent/step/log_rotation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trainlet::step {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Copies all of `from` (open for reading) to `to` (open for writing); the bytes copied, or -1.
int64_t CopyAll(int from, int to) {
  int64_t total = 0;
  char buf[1 << 16];
  while (true) {
    const ssize_t got = read(from, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) return total;
    for (ssize_t off = 0; off < got;) {
      const ssize_t put = write(to, buf + off, static_cast<size_t>(got - off));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return -1;
      off += put;
    }
    total += got;
  }
}

}  // namespace

std::string LogRotation::Note(uint64_t bytes, const std::string& rotated) {
  return "[trainlet] log rotated at " + std::to_string(bytes) + " bytes, earlier output in " +
         rotated + "\n";
}

std::string LogRotation::Rotate(const std::string& path, const std::function<void()>& meanwhile) {
  const std::string rotated = path + ".1";
  const std::string tmp = rotated + ".tmp";
  // Read and cut through one descriptor: its offset carries the catch-up copy on from the first.
  const int from = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (from < 0) return Errno(path);
  // 0600, as the log itself: a rank's output may hold what its env held.
  const int to = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (to < 0) {
    close(from);
    return Errno(tmp);
  }
  int64_t copied = CopyAll(from, to);
  int copy_errno = errno;
  if (close(to) != 0 && copied >= 0) {  // a write-back error shows at close
    copy_errno = errno;
    copied = -1;
  }
  if (copied < 0) {
    close(from);
    unlink(tmp.c_str());
    errno = copy_errno;
    return Errno("copy to " + tmp);  // a full disk: the log stays whole, tried again later
  }
  if (rename(tmp.c_str(), rotated.c_str()) != 0) {
    const std::string why = Errno(rotated);
    close(from);
    unlink(tmp.c_str());
    return why;
  }
  if (meanwhile) meanwhile();
  // The close and the rename take milliseconds on a busy disk (ext4 writes a file renamed over
  // another back first), and the rank writes on meanwhile: that tail is appended to <log>.1
  // too, and the log is cut at once after it.
  const int more = open(rotated.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  const int64_t tail = more < 0 ? -1 : CopyAll(from, more);
  const bool cut = tail >= 0 && ftruncate(from, 0) == 0;
  const std::string why = cut ? "" : Errno(tail < 0 ? "copy to " + rotated : "truncate " + path);
  if (more >= 0) close(more);
  close(from);
  // A failed catch-up leaves the log whole (its head also in <log>.1 until the next cut).
  if (!cut) return why;
  copied += tail;
  const int log = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (log < 0) return Errno(path);
  const std::string note =
      Note(static_cast<uint64_t>(copied), rotated.substr(rotated.rfind('/') + 1));
  const ssize_t put = write(log, note.data(), note.size());
  close(log);
  return put == static_cast<ssize_t>(note.size()) ? "" : Errno("note in " + path);
}

std::vector<std::string> LogRotation::Check() {
  std::vector<std::string> errors;
  if (max_bytes_ == 0) return errors;
  for (const std::string& path : paths_) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) continue;  // not created yet, or purged
    if (static_cast<uint64_t>(st.st_size) <= max_bytes_) continue;
    std::string why = Rotate(path);
    if (!why.empty() && last_error_[path] != why) errors.push_back("log rotation: " + why);
    last_error_[path] = std::move(why);
  }
  return errors;
}

}  // namespace trainlet::step
