// trainlet-pmix: the PMIx server of one (job, attempt) on one node, for MPI ranks that trainlet
// starts directly (no mpirun, no orted). trainlet-step starts it before the ranks, inside the
// ranks' cgroup, and it lives as long as they do (docs/runtimes.md, "mpi", direct launch).
//
// PmixHost is the host side of libpmix's server: it registers the job's namespace from the job
// map (pmix_job_map.h) and each local rank as a client, hands each rank the env of
// PMIx_server_setup_fork, and answers libpmix's upcalls with trainlet's own machinery:
//   - fence_nb: the node's collected data rides the attempt's rendezvous fence (one put, one
//     fence per node: the host opens a rendezvous handle per local rank and joins the fence for
//     all of them, so the agent's per-node merge sends one FenceContribute), and the answer is
//     every node's data in node-rank order, which libpmix unpacks to serve PMIx_Get of any rank.
//     A rank that dies before the fence aborts it everywhere (the agent's rule); the fence then
//     fails with the agent's message and the ranks' PMIx_Fence returns an error.
//   - abort: says which rank aborted, with its status and message, on stderr (the first local
//     rank's log), tells the agent (trainlet_rdzv_abort as that rank: the agent aborts the node's
//     fences and names the call in the rank's exit event, so the attempt's cause reads "rank 3 on
//     node-b called MPI_Abort (errorcode 7): <message>"), and then releases the rank, which exits.
//     An abort with status 0 would look like a success where the agent missed it: the server
//     then exits (3), and trainlet-step, which stops the ranks whenever their server ends, kills
//     them.
//   - publish, lookup, unpublish: ride the rendezvous store's publish (trainlet_rdzv_publish), so
//     a name published on one node is seen on every node at once, without a fence.
//   - direct_modex, spawn, connect: not served. An MPI that collects its modex in the fence
//     (OpenMPI's default) needs none of them. A PMIx_Get of another node's rank for a key that
//     the fence did not bring is answered PMIX_ERR_NOT_FOUND at once by libpmix 4.2 (with no
//     direct_modex upcall it has no one to ask: pmix_server_get.c), never left waiting.
// The node's topology, the agent's (agent_topology.h) or else discovered by libpmix in
// PMIx_server_init, is shared with the ranks (PMIX_SERVER_SHARE_TOPOLOGY: a shared-memory segment
// and XML), so that OpenMPI adopts it instead of discovering the machine again in each rank's
// MPI_Init.
//
// Threads: libpmix calls the upcalls on its progress thread; they queue work (or start a thread
// of their own: abort, publish, lookup, unpublish, each with its own rendezvous handle) and
// return. fence_nb does the whole fence on libpmix's progress thread without blocking: it sends
// the node's requests to the agent, and waits for the replies as events on libpmix's own event
// base (one per rendezvous handle, on trainlet_rdzv_fd), whose callback answers libpmix. Fences
// come one at a time, in the same order on every node since every fence spans the job. Run()
// (the calling thread) serves, blocking, only a fence that comes while it is still connecting
// the handles after "ready".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/pmix/pmix_job_map.h"
#include "common/status.h"

namespace trainlet::pmix {

struct PmixHostConfig {
  PmixJobMap map;
  uint32_t node_rank = 0;  // this node's index in map.nodes
  std::string job;         // the rendezvous scope: TRAINLET_JOB, TRAINLET_ATTEMPT
  uint32_t attempt = 0;
  std::string rendezvous_endpoint;  // TRAINLET_RENDEZVOUS_ENDPOINT / _TOKEN
  std::string rendezvous_token;
  std::string tmpdir;  // private directory for libpmix's rendezvous files; removed by the caller
  // The agent's hwloc XML of this node (common/pmix/node_topology_xml.h), handed to libpmix
  // instead of its own discovery; "" or a file that cannot be loaded (said on stderr): libpmix
  // discovers the machine as before.
  std::string topology_xml;
};

// Starts libpmix's server and registers the namespace and the local ranks. On success the
// returned lines are the rank env stream (pmix_job_map.h) without its "ready" line. Call once.
Result<std::string> StartPmixHost(const PmixHostConfig& config);

// Serves upcalls until a SIGTERM or SIGINT (blocked by the caller before StartPmixHost, so that
// libpmix's threads never take them) arrives; then finalizes libpmix. Returns the exit status.
int RunPmixHost();

}  // namespace trainlet::pmix
