// Writes a command's output to a file descriptor (stdout) whole, or says why it could not.
//
// Why not std::cout: an ostream that meets a failed write sets badbit and drops everything after
// it without a word, and the command still exits 0. A stdout whose open file description is
// non-blocking (a terminal or pipe that another process set O_NONBLOCK on, as some tools leave
// a shared tty) fails with EAGAIN whenever the reader is behind: `trainletctl logs hello` then
// printed nothing and exited 0 for a job whose ranks had all written (issue 19). This waits
// for the descriptor to take more instead (poll), and reports real failures (EPIPE, EIO, ENOSPC)
// so the command can exit non-zero.
//
// Not thread-safe; one writer per descriptor. Blocks until written or failed.
#pragma once

#include <streambuf>
#include <string_view>

#include "common/status.h"

namespace trainlet::cli {

// Writes all of `data` to `fd`, retrying on EINTR and waiting for POLLOUT on EAGAIN. An error
// names the errno text; `*broken_pipe` (when given) is set for EPIPE, the reader having gone
// (`| head`), which callers end on quietly.
Status WriteAll(int fd, std::string_view data, bool* broken_pipe = nullptr);

// A stream buffer that writes every piece through WriteAll as it comes (no buffering of its own,
// so it keeps its order with direct WriteAll calls and with stderr). trainletctl's main puts it
// under std::cout, so every command's output (get, describe, apply, help) is written whole or
// the command fails. After the first failure it takes nothing more (the stream goes bad) and
// `status()` says why; `broken_pipe()` when that was EPIPE.
class FdOutputBuffer : public std::streambuf {
 public:
  explicit FdOutputBuffer(int fd) : fd_(fd) {}
  const Status& status() const { return status_; }
  bool broken_pipe() const { return broken_pipe_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  int fd_;
  Status status_ = Status::Ok();
  bool broken_pipe_ = false;
};

}  // namespace trainlet::cli
