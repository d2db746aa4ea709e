#include "agent/log_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

namespace trainlet::agent {

size_t Utf8CharLength(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  const unsigned char c = s[0];
  size_t len = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
    len = 2;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
  } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
    len = 4;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return len;
}

uint64_t LogReadStart(const std::string& path, uint64_t offset) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return offset;
  return offset > static_cast<uint64_t>(st.st_size) ? 0 : offset;
}

std::optional<LogSlice> ReadLogSlice(const std::string& path, uint64_t offset, uint32_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const uint32_t max = std::min<uint32_t>(max_bytes == 0 ? 256 << 10 : max_bytes, 1 << 20);
  const uint64_t from = LogReadStart(path, offset);  // 0 once the log was cut
  in.seekg(static_cast<std::streamoff>(from));
  LogSlice slice;
  slice.data.assign(max, '\0');
  in.read(slice.data.data(), max);
  slice.data.resize(static_cast<size_t>(in.gcount()));
  slice.next_offset = from + slice.data.size();
  slice.eof = slice.data.size() < max;
  return slice;
}

std::string LastLogLine(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string tail;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const off_t size = st.st_size;
    const off_t from =
        size > static_cast<off_t>(kLogTailWindow) ? size - static_cast<off_t>(kLogTailWindow) : 0;
    tail.resize(static_cast<size_t>(size - from));
    ssize_t got;
    do {
      got = pread(fd, tail.data(), tail.size(), from);
    } while (got < 0 && errno == EINTR);
    tail.resize(got > 0 ? static_cast<size_t>(got) : 0);
  }
  close(fd);
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t end = tail.size();
  while (end > 0 && blank(tail[end - 1])) --end;
  if (end == 0) return "";
  size_t begin = tail.rfind('\n', end - 1);
  begin = begin == std::string::npos ? 0 : begin + 1;
  while (begin < end && blank(tail[begin])) ++begin;
  std::string out;
  const auto* bytes = reinterpret_cast<const unsigned char*>(tail.data());
  for (size_t i = begin; i < end;) {
    const size_t len = Utf8CharLength(bytes + i, end - i);
    const size_t take = len == 0 ? 1 : len;
    if (out.size() + take > max_bytes) break;
    if (len == 0) {
      out += '?';
    } else {
      out.append(tail, i, len);
    }
    i += take;
  }
  return out;
}

}  // namespace trainlet::agent
