#include "agent/process_sweep.h"

#include <signal.h>
#include <unistd.h>

#include "common/platform/process_info.h"

namespace trainlet::agent {
namespace {

bool HasTags(pid_t pid, const std::map<std::string, std::string>& tags) {
  const auto env = platform::ProcessEnvironment(pid);
  if (!env) return false;
  size_t found = 0;
  for (const std::string& entry : *env) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    auto it = tags.find(entry.substr(0, eq));
    if (it != tags.end() && entry.compare(eq + 1, std::string::npos, it->second) == 0) ++found;
  }
  return found == tags.size();
}

}  // namespace

std::vector<pid_t> FindTaggedProcesses(const std::map<std::string, std::string>& tags) {
  std::vector<pid_t> out;
  if (tags.empty()) return out;  // never everything
  const pid_t self = getpid();
  for (const pid_t pid : platform::ListProcesses()) {
    if (pid <= 1 || pid == self) continue;
    if (HasTags(pid, tags) && !platform::IsZombie(pid)) out.push_back(pid);
  }
  return out;
}

size_t KillTaggedProcesses(const std::map<std::string, std::string>& tags) {
  size_t n = 0;
  for (pid_t pid : FindTaggedProcesses(tags)) n += kill(pid, SIGKILL) == 0 ? 1 : 0;
  return n;
}

}  // namespace trainlet::agent
