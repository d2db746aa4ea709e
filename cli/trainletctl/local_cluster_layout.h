// What `trainletctl local up` decides for a cluster before it starts anything, and the one file
// it keeps of what the coordinator bound. Pure functions and plain file I/O; any thread.
//
//  - Slots: a test cluster is generous by default (as `kind` or `mpirun --oversubscribe`): an
//    agent without --slots and without --topology accepts max(PUs, kLocalAgentMinSlots) ranks,
//    so a 4-ranks-per-node example runs on a 2-core laptop. With --topology the agent keeps
//    its default (one per PU of the machine it impersonates).
//  - Hostnames: each agent gets its own UTS namespace and hostname (local_cluster.cpp), as a real
//    host has. OpenMPI names its shared-memory segments and session dirs after the hostname, so
//    agents that shared one mixed their ranks' shared memory (issue 19: SIGSEGV in
//    mca_btl_vader_poll_handle_frag). The name carries a hash of the cluster dir, so two local
//    clusters on one host differ too.
//  - Ports: the coordinator binds port 0 once; the endpoints it got are kept in
//    <dir>/coordinator-listen.json (beside, not in, the state dir) and asked for again by every
//    later start (`local up` on the same dir, `local restart coordinator`), so agents and clients
//    find it where they look.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace trainlet::cli {

inline constexpr uint32_t kLocalAgentMinSlots = 8;

// The --slots `local up` passes an agent: `asked` when given, 0 (the agent's own default) with a
// topology file, else max(pus, kLocalAgentMinSlots).
uint32_t LocalAgentSlots(uint32_t asked, bool has_topology, unsigned pus);

// "<node>-<8 hex digits of the cluster dir's hash>", at most 63 bytes (HOST_NAME_MAX 64).
std::string LocalAgentHostname(const std::string& cluster_dir, const std::string& node);

struct CoordinatorListen {
  std::string agent;  // tcp://127.0.0.1:PORT
  std::string op;
  std::string exec;
};

std::string CoordinatorListenPath(const std::string& cluster_dir);
// nullopt when the file is missing (a cluster never started); an error when it is unreadable or
// not what SaveCoordinatorListen writes, naming the file.
Result<std::optional<CoordinatorListen>> LoadCoordinatorListen(const std::string& path);
Status SaveCoordinatorListen(const std::string& path, const CoordinatorListen& listen);

}  // namespace trainlet::cli
