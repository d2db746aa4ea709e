#include "agent/step/step_standby.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "agent/step/step_runner.h"
#include "common/platform/process_cgroup.h"

namespace trainlet::step {

std::optional<std::string> ReadHandOver(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    const ssize_t n = read(fd, &c, 1);  // byte by byte: nothing past the line is taken
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return std::nullopt;
}

int RunStandbyStep(const std::string& mode) {
  std::unique_ptr<platform::ProcessCgroup> cgroup;
  const auto parsed = platform::ParseCgroupMode(mode).value_or(platform::CgroupMode::kAuto);
  if (parsed != platform::CgroupMode::kNone) {
    auto made = platform::ProcessCgroup::Create("step-" + std::to_string(getpid()), parsed);
    if (made.ok() && (*made)->Enter().ok()) {
      cgroup = std::move(*made);
    } else if (made.ok()) {
      (void)(*made)->Remove();  // not entered: the step makes its own
    }
  }
  const std::optional<std::string> dir = ReadHandOver(STDOUT_FILENO);
  if (!dir || dir->empty() || (*dir)[0] != '/') {
    if (cgroup && cgroup->Leave().ok()) (void)cgroup->Remove();
    return 0;
  }
  // From here on this is the step of `dir`, and says what it says where any step does.
  const int log =
      open((*dir + "/step.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log >= 0) {
    dup2(log, STDERR_FILENO);
    close(log);
  }
  return RunStep(*dir, std::move(cgroup));
}

}  // namespace trainlet::step
