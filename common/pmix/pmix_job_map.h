// The job map of an MPI attempt started directly (docs/runtimes.md, "mpi", direct launch), and the
// stream in which trainlet-pmix hands each local rank its PMIx environment to trainlet-step.
//
// The job map is written by the mpi runtime plugin into every node's plan (the plan file
// `pmix-job-map`, named by the ranks' TRAINLET_PMIX_JOB_MAP) and read by trainlet-pmix, the
// node's PMIx server, which registers the job's namespace from it. One text line each:
//
//   trainlet-pmix-job-map 1
//   nspace <PMIx namespace>
//   node <hostname> <rank>,<rank>,...      one per node, in node-rank order
//
// The rank env stream is what trainlet-pmix writes on its stdout, read by trainlet-step before it
// spawns the ranks (agent/step/step_runner.cpp):
//
//   env <rank> <KEY>=<VALUE>       one per variable PMIx_server_setup_fork gave the rank
//   error <message>                the server cannot serve (the step fails every rank with it)
//   ready                          last line: every local rank's env has been written
//
// Pure functions over bytes, with no libpmix: trainlet-step and the plugins link them. Safe from
// any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::pmix {

inline constexpr int kJobMapVersion = 1;
// The env key of the ranks that names the job map; its presence is what makes trainlet-step start
// the node's PMIx server before the ranks.
inline constexpr const char* kJobMapEnv = "TRAINLET_PMIX_JOB_MAP";

struct PmixJobMap {
  struct Node {
    std::string hostname;         // PMIX_HOSTNAME of its ranks; no white space
    std::vector<uint32_t> ranks;  // global ranks, ascending; local rank = index here
  };
  std::string nspace;       // PMIx namespace, at most 255 bytes, no white space
  std::vector<Node> nodes;  // node-rank order

  uint32_t Size() const;  // every rank of the job
};

// The namespace of one attempt of a job: "trainlet.<job>.<attempt>", with white space and
// control bytes replaced by '_' and cut to PMIx's 255 bytes (the attempt number kept).
std::string NamespaceFor(const std::string& job, uint32_t attempt);

std::string EncodeJobMap(const PmixJobMap& map);
// Invalid, naming the line, unless every rank 0 .. Size()-1 appears exactly once, ascending on
// each node, and every node has a hostname and at least one rank.
Result<PmixJobMap> DecodeJobMap(const std::string& text);

// "0,1,2": a rank list as PMIx's PMIX_LOCAL_PEERS takes it.
std::string RankListText(const std::vector<uint32_t>& ranks);
// "h0,h1,h2": the input of PMIx_generate_regex for PMIX_NODE_MAP.
std::string NodeListText(const PmixJobMap& map);
// "0,1;2,3": the input of PMIx_generate_ppn for PMIX_PROC_MAP.
std::string ProcMapText(const PmixJobMap& map);

// One "env" line; Invalid when the entry has no '=' or holds a newline.
Result<std::string> EncodeRankEnvLine(uint32_t rank, const std::string& key_value);

// What a whole stream says: per rank, the variables to set on top of the rank's own env.
// Invalid (naming the line) for a malformed line or a stream without its "ready" line; an
// "error" line gives Unavailable with the server's message.
Result<std::map<uint32_t, std::map<std::string, std::string>>> ParseRankEnvStream(
    const std::string& text);

}  // namespace trainlet::pmix
