#include "agent/step/private_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trainlet::step {

Status WriteNewFile(int fd, const std::string& path, const std::string& text,
                    const std::string& what) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      close(fd);
      unlink(path.c_str());
      return IoError(what + " " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return Status::Ok();
}

Status ReplaceFile(const std::string& path, const std::string& text, const std::string& what) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return IoError(what + " " + tmp + ": " + std::strerror(errno));
  TRAINLET_RETURN_IF_ERROR(WriteNewFile(fd, tmp, text, what));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return IoError(what + " " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes,
                                    const std::string& what, bool follow_links) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    const int err = errno;
    std::string message = what + " " + path + ": " + std::strerror(err);
    return err == ENOENT ? NotFoundError(message) : IoError(message);
  }
  std::string text;
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return IoError(what + " " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      close(fd);
      return InvalidError(what + " " + path + ": larger than " + std::to_string(max_bytes >> 20) +
                          " MiB");
    }
  }
  close(fd);
  return text;
}

}  // namespace trainlet::step
