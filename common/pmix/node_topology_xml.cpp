#include "common/pmix/node_topology_xml.h"

#include <sys/stat.h>

namespace trainlet::pmix {

std::string NodeTopologyXmlPath(const std::string& state_dir) {
  if (state_dir.empty()) return "";
  return state_dir + "/" + kNodeTopologyXmlFile;
}

void AddNodeTopologyXmlEnv(std::vector<std::string>& envp, const std::string& state_dir) {
  const std::string path = NodeTopologyXmlPath(state_dir);
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::string prefix = std::string(kNodeTopologyXmlEnv) + "=";
  for (const std::string& kv : envp) {
    if (kv.rfind(prefix, 0) == 0) return;
  }
  envp.push_back(prefix + path);
}

}  // namespace trainlet::pmix
