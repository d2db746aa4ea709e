#include "common/platform/directory_spread.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#if defined(__linux__)
#include <linux/fs.h>
#include <sys/ioctl.h>
#endif

namespace trainlet::platform {

Status SpreadSubdirectories(const std::string& dir) {
#if defined(__linux__) && defined(FS_TOPDIR_FL)
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": " + std::strerror(errno));
  // The inode flags are an int to the kernel, whatever the ioctl's declared argument type.
  int flags = 0;
  std::string why;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    why = dir + ": reading its inode flags: " + std::strerror(errno);
  } else if ((flags & FS_TOPDIR_FL) == 0) {
    flags |= FS_TOPDIR_FL;
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0) {
      why = dir + ": setting FS_TOPDIR_FL: " + std::strerror(errno);
    }
  }
  close(fd);
  return why.empty() ? Status::Ok() : IoError(std::move(why));
#else
  return UnavailableError(dir + ": this system has no top-directory flag");
#endif
}

}  // namespace trainlet::platform
