// FileWatch: one descriptor that becomes readable when any watched file is written to. inotify
// on Linux; kqueue EVFILT_VNODE on macOS. The portable build has no descriptor (fd() is -1):
// the owner re-reads its files on a timer instead (kPollInterval).
//
// Wake-ups only: the owner finds out what changed by reading its files. Owned by one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace trainlet::platform {

class FileWatch {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{100};

  // kInternal (naming the call) on failure.
  static Result<std::unique_ptr<FileWatch>> Open();
  // The older shape, for callers not yet moved to the Result above (agent/, trainlet-step):
  // nullptr with *error set to the Status's message. Goes when they have moved.
  static std::unique_ptr<FileWatch> Open(std::string* error) {
    auto opened = Open();
    if (!opened.ok()) *error = opened.status().message();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // Readable after a watched file was written to, until Drain(); -1 where changes are polled.
  int fd() const { return fd_; }
  // Watches `path` (which exists) for writes. Returns a handle for Remove, or -1 with errno set.
  // Where changes are polled it returns 0 and does nothing.
  int Add(const std::string& path);
  void Remove(int handle);
  void Drain();

 private:
  explicit FileWatch(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace trainlet::platform
