#include "common/platform/process_info.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#if defined(__linux__)
#include <dirent.h>

#include <filesystem>
#include <fstream>
#elif defined(__APPLE__)
#include <libproc.h>
#include <mach-o/dyld.h>
#include <sys/proc.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#else
#error "trainlet reads process facts from /proc (Linux) or proc_pidinfo (macOS)"
#endif

namespace trainlet::platform {

#if defined(__linux__)
namespace {

// /proc/<pid>/stat from field 3 on (the state), or "" when gone. comm (field 2) may hold spaces
// and parentheses: the fields resume after the last ')'.
std::string StatAfterComm(pid_t pid) {
  if (pid <= 0) return "";
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return "";
  const std::string_view stat(buf, static_cast<size_t>(n));
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string_view::npos || close_paren + 2 >= stat.size()) return "";
  return std::string(stat.substr(close_paren + 2));
}

}  // namespace

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  const std::string fields = StatAfterComm(pid);
  std::string_view rest = fields;
  if (rest.empty()) return std::nullopt;
  for (int field = 3; field < 22; ++field) {
    const size_t sp = rest.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(sp + 1);
  }
  const std::string_view digits = rest.substr(0, rest.find(' '));
  uint64_t start = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), start);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return start;
}

bool IsZombie(pid_t pid) {
  const std::string fields = StatAfterComm(pid);
  return !fields.empty() && (fields[0] == 'Z' || fields[0] == 'X');
}

std::optional<pid_t> ParentOf(pid_t pid) {
  const std::string fields = StatAfterComm(pid);  // "S PPID ..."
  const size_t sp = fields.find(' ');
  if (sp == std::string::npos) return std::nullopt;
  const std::string_view rest = std::string_view(fields).substr(sp + 1);
  pid_t parent = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), parent);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  return parent;
}

std::string ExecutablePath() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

std::vector<pid_t> ListProcesses() {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    const std::string_view name = e->d_name;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec == std::errc() && end == name.data() + name.size() && pid > 0) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

bool ReadProcessEnvironment(pid_t pid, std::string* block) {
  char path[48] = "/proc/";
  char* end = std::to_chars(path + 6, path + 32, pid).ptr;
  std::memcpy(end, "/environ", 9);  // with its NUL
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  block->clear();
  size_t have = 0;
  while (true) {
    if (block->size() < have + 4096) block->resize(have + 4096);
    const ssize_t n = read(fd, block->data() + have, block->size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return false;
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  close(fd);
  block->resize(have);
  return true;
}

std::optional<std::vector<std::string>> ProcessEnvironment(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<std::string> env;
  std::string entry;
  while (std::getline(in, entry, '\0')) env.push_back(entry);
  return env;
}

#else  // macOS: not compiled on Linux

namespace {

std::optional<proc_bsdinfo> BsdInfo(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  proc_bsdinfo info{};
  // Zombies answer too (with pbi_status SZOMB); a pid that is gone does not.
  if (proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &info, PROC_PIDTBSDINFO_SIZE) !=
      PROC_PIDTBSDINFO_SIZE) {
    return std::nullopt;
  }
  return info;
}

}  // namespace

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  const auto info = BsdInfo(pid);
  if (!info) return std::nullopt;
  return static_cast<uint64_t>(info->pbi_start_tvsec) * 1000000u + info->pbi_start_tvusec;
}

bool IsZombie(pid_t pid) {
  const auto info = BsdInfo(pid);
  return info && info->pbi_status == SZOMB;
}

std::optional<pid_t> ParentOf(pid_t pid) {
  const auto info = BsdInfo(pid);
  if (!info) return std::nullopt;
  return static_cast<pid_t>(info->pbi_ppid);
}

std::string ExecutablePath() {
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);  // tells the size needed
  std::string path(size, '\0');
  if (_NSGetExecutablePath(path.data(), &size) != 0) return "";
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return "";
  return resolved;
}

std::vector<pid_t> ListProcesses() {
  const int n = proc_listallpids(nullptr, 0);  // the count now; leave room for a few more
  if (n <= 0) return {};
  std::vector<pid_t> pids(static_cast<size_t>(n) + 64);
  const int got = proc_listallpids(pids.data(), static_cast<int>(pids.size() * sizeof(pid_t)));
  pids.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return pids;
}

std::optional<std::vector<std::string>> ProcessEnvironment(pid_t pid) {
  // KERN_PROCARGS2: int argc, the exec path, NUL padding, argc argument strings, then the
  // environment strings, up to an empty one.
  int argmax = 0;
  size_t size = sizeof argmax;
  int max_mib[] = {CTL_KERN, KERN_ARGMAX};
  if (sysctl(max_mib, 2, &argmax, &size, nullptr, 0) != 0 || argmax <= 0) return std::nullopt;
  std::string buf(static_cast<size_t>(argmax), '\0');
  size = buf.size();
  int mib[] = {CTL_KERN, KERN_PROCARGS2, static_cast<int>(pid)};
  if (sysctl(mib, 3, buf.data(), &size, nullptr, 0) != 0 || size < sizeof(int)) {
    return std::nullopt;
  }
  int argc = 0;
  std::memcpy(&argc, buf.data(), sizeof argc);
  size_t pos = sizeof argc;
  const auto skip_string = [&] {
    while (pos < size && buf[pos] != '\0') ++pos;
  };
  const auto skip_nuls = [&] {
    while (pos < size && buf[pos] == '\0') ++pos;
  };
  skip_string();  // the exec path
  skip_nuls();
  for (int i = 0; i < argc && pos < size; ++i) {
    skip_string();
    ++pos;
  }
  std::vector<std::string> env;
  while (pos < size && buf[pos] != '\0') {
    const size_t start = pos;
    skip_string();
    env.emplace_back(buf.data() + start, pos - start);
    ++pos;
  }
  return env;
}

bool ReadProcessEnvironment(pid_t pid, std::string* block) {
  auto env = ProcessEnvironment(pid);
  if (!env) return false;
  block->clear();
  for (const std::string& e : *env) block->append(e).push_back('\0');
  return true;
}

#endif

bool SameProcessAlive(pid_t pid, uint64_t start_time) {
  const auto now = ProcessStartTime(pid);
  return now && *now == start_time && !IsZombie(pid);
}

}  // namespace trainlet::platform
