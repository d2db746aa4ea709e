#include "agent/process_sweep.h"

#include <signal.h>
#include <unistd.h>

#include <string_view>
#include <utility>

#include "common/platform/process_info.h"

namespace trainlet::agent {
namespace {

// Whether the environment block of `pid` (read into `block`) holds every tag. The block is
// scanned in place: the sweep reads every process on the machine once per attempt end, and a
// string per entry of each was most of its time.
bool HasTags(pid_t pid, const std::vector<std::pair<std::string, std::string>>& tags,
             std::string& block) {
  if (!platform::ReadProcessEnvironment(pid, &block)) return false;
  std::vector<bool> found(tags.size(), false);
  size_t count = 0;
  const std::string_view all(block);
  for (size_t pos = 0; pos < all.size();) {
    size_t nul = all.find('\0', pos);
    if (nul == std::string_view::npos) nul = all.size();
    const std::string_view entry = all.substr(pos, nul - pos);
    pos = nul + 1;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = entry.substr(0, eq), value = entry.substr(eq + 1);
    for (size_t t = 0; t < tags.size(); ++t) {
      if (!found[t] && key == tags[t].first && value == tags[t].second) {
        found[t] = true;
        ++count;
      }
    }
  }
  return count == tags.size();
}

}  // namespace

std::vector<pid_t> FindTaggedProcesses(const std::map<std::string, std::string>& tags) {
  std::vector<pid_t> out;
  if (tags.empty()) return out;  // never everything
  const std::vector<std::pair<std::string, std::string>> wanted(tags.begin(), tags.end());
  std::string block;  // one buffer for every process
  const pid_t self = getpid();
  for (const pid_t pid : platform::ListProcesses()) {
    if (pid <= 1 || pid == self) continue;
    if (HasTags(pid, wanted, block) && !platform::IsZombie(pid)) out.push_back(pid);
  }
  return out;
}

size_t KillTaggedProcesses(const std::map<std::string, std::string>& tags) {
  size_t n = 0;
  for (pid_t pid : FindTaggedProcesses(tags)) n += kill(pid, SIGKILL) == 0 ? 1 : 0;
  return n;
}

}  // namespace trainlet::agent
