#include "common/file_version.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace trainlet {
namespace {

bool Equal(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Whether a version with modification time `mtime` is a second or more old now: no write in the
// same tick of the kernel's file clock can follow unseen.
bool Settled(const timespec& mtime) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec - mtime.tv_sec >= 2 ||
         (now.tv_sec - mtime.tv_sec == 1 && now.tv_nsec >= mtime.tv_nsec);
}

}  // namespace

bool FileVersion::SameStamps(const struct stat& st) const {
  return known_ && Equal(st.st_mtim, mtime_) && Equal(st.st_ctim, ctime_) && st.st_ino == ino_ &&
         st.st_size == size_;
}

bool FileVersion::Unchanged(const struct stat& st) const { return settled_ && SameStamps(st); }

bool FileVersion::Update(const struct stat& st, std::string text) {
  const bool same = SameStamps(st) && text == text_;
  settled_ = Settled(st.st_mtim);
  if (same) return false;
  known_ = true;
  mtime_ = st.st_mtim;
  ctime_ = st.st_ctim;
  ino_ = st.st_ino;
  size_ = st.st_size;
  text_ = std::move(text);
  return true;
}

Result<std::string> ReadFileText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot be read: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(path + ": read failed");
  return text.str();
}

}  // namespace trainlet
