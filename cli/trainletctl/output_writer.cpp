#include "trainletctl/output_writer.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainlet::cli {

Status WriteAll(int fd, std::string_view data, bool* broken_pipe) {
  if (broken_pipe != nullptr) *broken_pipe = false;
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, -1) < 0 && errno != EINTR) {
        return IoError(std::string("waiting to write: ") + std::strerror(errno));
      }
      continue;  // POLLERR/POLLHUP: the next write says what
    }
    const int err = n == 0 ? EIO : errno;
    if (err == EPIPE && broken_pipe != nullptr) *broken_pipe = true;
    return IoError(std::strerror(err));
  }
  return Status::Ok();
}

std::streamsize FdOutputBuffer::xsputn(const char* s, std::streamsize n) {
  if (!status_.ok()) return 0;
  status_ = WriteAll(fd_, std::string_view(s, static_cast<size_t>(n)), &broken_pipe_);
  return status_.ok() ? n : 0;
}

FdOutputBuffer::int_type FdOutputBuffer::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  const char c = traits_type::to_char_type(ch);
  return xsputn(&c, 1) == 1 ? ch : traits_type::eof();
}

}  // namespace trainlet::cli
