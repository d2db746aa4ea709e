#include "agent/process_sweep.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace trainlet::agent {
namespace {

bool IsZombie(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return true;
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z';
}

bool HasTags(pid_t pid, const std::map<std::string, std::string>& tags) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return false;
  size_t found = 0;
  std::string entry;
  while (std::getline(in, entry, '\0')) {
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
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  const pid_t self = getpid();
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 1 || pid == self) continue;
    if (HasTags(static_cast<pid_t>(pid), tags) && !IsZombie(static_cast<pid_t>(pid))) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return out;
}

size_t KillTaggedProcesses(const std::map<std::string, std::string>& tags) {
  size_t n = 0;
  for (pid_t pid : FindTaggedProcesses(tags)) n += kill(pid, SIGKILL) == 0 ? 1 : 0;
  return n;
}

}  // namespace trainlet::agent
