#include "common/platform/process_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "common/platform/errno_status.h"

namespace trainlet::platform {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      const auto [end, ec] = std::from_chars(field.data() + i + 1, field.data() + i + 4, value, 8);
      if (ec == std::errc() && end == field.data() + i + 4) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

Result<std::string> ReadSmall(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, path, ErrorCode::kInternal);
  std::string out;
  char buf[4096];
  while (out.size() < (1u << 20)) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, path, ErrorCode::kInternal);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// cgroup files take one write(2) each: a value split across writes is two values.
Status WriteSmall(const std::string& path, std::string_view value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, path, ErrorCode::kInternal);
  ssize_t n;
  do {
    n = write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return ErrnoStatus(n < 0 ? err : EIO, "writing " + std::string(value) + " to " + path,
                       ErrorCode::kInternal);
  }
  return Status::Ok();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The directory of the caller's own cgroup in the hierarchy mounted at `mount`.
Result<std::string> OwnDirectory(const std::string& mount, std::string_view controller) {
  Result<std::string> self = ReadSmall("/proc/self/cgroup");
  if (!self.ok()) return self.status();
  const std::optional<std::string> own = ParseOwnCgroup(*self, controller);
  if (!own) {
    return Status(ErrorCode::kUnavailable,
                  "/proc/self/cgroup has no " +
                      (controller.empty() ? std::string("cgroup2") : std::string(controller)) +
                      " line");
  }
  return *own == "/" ? mount : mount + *own;
}

}  // namespace

std::optional<CgroupMode> ParseCgroupMode(std::string_view text) {
  if (text == "auto") return CgroupMode::kAuto;
  if (text == "v2") return CgroupMode::kV2;
  if (text == "v1") return CgroupMode::kV1Freezer;
  if (text == "none") return CgroupMode::kNone;
  return std::nullopt;
}

std::string_view CgroupModeName(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::kAuto:
      return "auto";
    case CgroupMode::kV2:
      return "v2";
    case CgroupMode::kV1Freezer:
      return "v1";
    case CgroupMode::kNone:
      return "none";
  }
  return "none";
}

CgroupMounts ParseCgroupMounts(std::string_view mountinfo) {
  // "36 35 0:30 / /sys/fs/cgroup/freezer rw,relatime shared:14 - cgroup cgroup rw,freezer":
  // the mount point is field 5; after the " - " separator come the type, source and options.
  CgroupMounts out;
  for (std::string_view line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> left = Split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> right = Split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    const std::string point = Unescape(left[4]);
    if (right[0] == "cgroup2" && out.v2.empty()) out.v2 = point;
    if (right[0] == "cgroup" && out.v1_freezer.empty()) {
      for (std::string_view option : Split(right[2], ',')) {
        if (option == "freezer") out.v1_freezer = point;
      }
    }
  }
  return out;
}

std::optional<std::string> ParseOwnCgroup(std::string_view proc_self_cgroup,
                                          std::string_view controller) {
  // "0::/system.slice/x.service" (unified) or "6:freezer:/" (v1; controllers comma-separated).
  for (std::string_view line : Split(proc_self_cgroup, '\n')) {
    const size_t first = line.find(':');
    const size_t second = line.find(':', first == std::string_view::npos ? first : first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (path.empty() || path[0] != '/') continue;
    if (controller.empty()) {
      if (line.substr(0, first) == "0" && controllers.empty()) return std::string(path);
      continue;
    }
    for (std::string_view c : Split(controllers, ',')) {
      if (c == controller) return std::string(path);
    }
  }
  return std::nullopt;
}

Result<std::unique_ptr<ProcessCgroup>> ProcessCgroup::Create(const std::string& name,
                                                             CgroupMode mode) {
  return Locate(name, mode, true);
}

Result<std::unique_ptr<ProcessCgroup>> ProcessCgroup::Open(const std::string& name,
                                                           CgroupMode mode) {
  return Locate(name, mode, false);
}

Result<std::unique_ptr<ProcessCgroup>> ProcessCgroup::Locate(const std::string& name,
                                                             CgroupMode mode, bool create) {
#if defined(__linux__)
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return Status(ErrorCode::kInvalid, "cgroup name '" + name + "' is not one path component");
  }
  if (mode == CgroupMode::kNone) return Status(ErrorCode::kUnavailable, "cgroups are off");
  Result<std::string> mountinfo = ReadSmall("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status();
  const CgroupMounts mounts = ParseCgroupMounts(*mountinfo);
  Status why(ErrorCode::kUnavailable, "no cgroup2 or v1 freezer hierarchy is mounted");
  for (const CgroupMode m : {CgroupMode::kV2, CgroupMode::kV1Freezer}) {
    if (mode != CgroupMode::kAuto && mode != m) continue;
    const std::string& mount = m == CgroupMode::kV2 ? mounts.v2 : mounts.v1_freezer;
    if (mount.empty()) {
      why = Status(ErrorCode::kUnavailable, m == CgroupMode::kV2 ? "no cgroup2 hierarchy is mounted"
                                                                 : "no v1 freezer is mounted");
      continue;
    }
    Result<std::string> home = OwnDirectory(mount, m == CgroupMode::kV2 ? "" : "freezer");
    if (!home.ok()) {
      why = home.status();
      continue;
    }
    // The parent is shared by every step and left in place; only the step's own goes.
    const std::string parent = *home + "/trainlet";
    if (!create) {
      const std::string path = parent + "/" + name;
      struct stat st {};
      if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return std::unique_ptr<ProcessCgroup>(new ProcessCgroup(m, path, *home));
      }
      why = Status(ErrorCode::kNotFound, "no cgroup " + path);
      continue;
    }
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      why = ErrnoStatus(errno, "mkdir " + parent, ErrorCode::kInternal);
      continue;
    }
    const std::string path = parent + "/" + name;
    if (mkdir(path.c_str(), 0755) != 0) {
      if (errno == EEXIST) return Status(ErrorCode::kExists, "cgroup " + path + " exists");
      why = ErrnoStatus(errno, "mkdir " + path, ErrorCode::kInternal);
      continue;
    }
    return std::unique_ptr<ProcessCgroup>(new ProcessCgroup(m, path, *home));
  }
  return why;
#else
  (void)name;
  (void)mode;
  (void)create;
  return Status(ErrorCode::kUnavailable, "this platform has no cgroups");
#endif
}

Status ProcessCgroup::Enter() {
  return WriteSmall(path_ + "/cgroup.procs", std::to_string(getpid()));
}

Status ProcessCgroup::Leave() {
  return WriteSmall(home_ + "/cgroup.procs", std::to_string(getpid()));
}

std::vector<pid_t> ProcessCgroup::Members() const {
  std::vector<pid_t> out;
  Result<std::string> procs = ReadSmall(path_ + "/cgroup.procs");
  if (!procs.ok()) return out;
  for (std::string_view line : Split(*procs, '\n')) {
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (ec == std::errc() && pid > 0) out.push_back(pid);
  }
  return out;
}

Status ProcessCgroup::Freeze(bool frozen) {
  const bool v2 = mode_ == CgroupMode::kV2;
  const std::string file = path_ + (v2 ? "/cgroup.freeze" : "/freezer.state");
  if (v2 && !Exists(file)) return Status::Ok();  // before 5.2: kill round by round instead
  Status st = WriteSmall(file, v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED"));
  if (!st.ok() || !frozen) return st;
  // The freeze is asynchronous: wait (briefly) until it has taken.
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < deadline) {
    if (v2) {
      Result<std::string> events = ReadSmall(path_ + "/cgroup.events");
      if (events.ok() && events->find("frozen 1") != std::string::npos) return Status::Ok();
    } else {
      Result<std::string> state = ReadSmall(file);
      if (state.ok() && state->rfind("FROZEN", 0) == 0) return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();  // killing a half-frozen group still works; a later round gets the rest
}

Status ProcessCgroup::Kill() {
  if (mode_ == CgroupMode::kV2 && Exists(path_ + "/cgroup.kill")) {
    return WriteSmall(path_ + "/cgroup.kill", "1");
  }
  // Frozen members cannot fork between the listing and the kill. Killed while frozen, they die
  // as soon as they are thawed.
  Status frozen = Freeze(true);
  for (const pid_t pid : Members()) kill(pid, SIGKILL);
  Status thawed = Freeze(false);
  if (!frozen.ok()) return frozen;
  return thawed;
}

bool ProcessCgroup::Populated() const {
  if (mode_ == CgroupMode::kV2) {
    Result<std::string> events = ReadSmall(path_ + "/cgroup.events");
    if (events.ok()) return events->find("populated 1") != std::string::npos;
  }
  return !Members().empty();
}

Status ProcessCgroup::Remove() {
  if (rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, "rmdir " + path_, ErrorCode::kInternal);
  }
  return Status::Ok();
}

}  // namespace trainlet::platform
