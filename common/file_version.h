// FileVersion: which version of a file a reader last read, to re-read the file only when it may
// have changed (the access policy, the CURVE allowlists: both reloaded without a restart).
//
// A change is seen by the file's stamps (inode, size, modification and change times). The
// kernel's file clock is coarse, though: a rewrite in place within one tick (`cat > file`, an
// append by `trainletctl keys create --allowlist`) can keep every stamp but perhaps the size, and
// a reader that came between the truncate and the write would keep the empty version for good.
// So while the version read is less than a second old ("unsettled"), the text is read again and
// compared. Not thread-safe: one owner.
#pragma once

#include <sys/stat.h>

#include <ctime>
#include <string>

#include "common/status.h"

namespace trainlet {

class FileVersion {
 public:
  // Whether the file, now `st`, is the version last remembered, settled: no need to read it.
  bool Unchanged(const struct stat& st) const;
  // The file, now `st`, was read as `text`. Returns whether that is a new version (stamps or
  // text differ from the one remembered); it is remembered either way.
  bool Update(const struct stat& st, std::string text);
  // Forgets the version: the next Update is new (the file is gone).
  void Forget() { *this = FileVersion(); }
  bool known() const { return known_; }
  const std::string& text() const { return text_; }

 private:
  bool SameStamps(const struct stat& st) const;

  bool known_ = false;
  timespec mtime_{}, ctime_{};
  ino_t ino_ = 0;
  off_t size_ = 0;
  std::string text_;
  bool settled_ = false;  // read a second or more after its mtime: its stamps tell every change
};

// The whole text of `path`, or an Io error naming it.
Result<std::string> ReadFileText(const std::string& path);

}  // namespace trainlet
