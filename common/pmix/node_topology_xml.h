// The handover of the node's hwloc topology from the agent to trainlet-pmix (MPI direct launch).
//
// The agent discovers its machine with hwloc once, at start (agent/topology.h). Left to itself,
// libpmix discovers it again in every trainlet-pmix's PMIx_server_init, and about a quarter of
// that server's start-up CPU is hwloc reading PCI config space (bench/README.md, mpi-launch). So:
//   - the agent writes hwloc's XML export of the live machine to <state dir>/topology.xml
//     (kNodeTopologyXmlFile, mode 0644: a machine's topology is no secret, lstopo shows it to
//     every user; a rank user reaches it because trainlet-step makes the state dir searchable,
//     rank_files.h), and removes that file when it impersonates another machine (--topology-xml),
//     whose XML must never reach libpmix;
//   - trainlet-step names the file in trainlet-pmix's env (kNodeTopologyXmlEnv) when it exists;
//   - trainlet-pmix loads it (agent/pmix/agent_topology.h) and hands it to libpmix
//     (PMIX_TOPOLOGY2), which then shares it with the ranks without discovering anything. A file
//     it cannot load is not an error: libpmix discovers the machine as before.
//
// Plain functions; AddNodeTopologyXmlEnv stats one file. Safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace trainlet::pmix {

// The file's name in the agent's state dir.
inline constexpr const char* kNodeTopologyXmlFile = "topology.xml";
// The env key that names the file to trainlet-pmix.
inline constexpr const char* kNodeTopologyXmlEnv = "TRAINLET_PMIX_TOPOLOGY_XML";

// <state_dir>/topology.xml; "" when `state_dir` is "" (unknown).
std::string NodeTopologyXmlPath(const std::string& state_dir);

// Appends kNodeTopologyXmlEnv=<the file> to `envp` ("K=V" strings) when `state_dir` is known, the
// file exists, and `envp` does not set the key already (a job's own value wins).
void AddNodeTopologyXmlEnv(std::vector<std::string>& envp, const std::string& state_dir);

}  // namespace trainlet::pmix
