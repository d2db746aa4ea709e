// `trainletctl local up|down`: a coordinator and N agents on this machine, in the spirit of
// `flux start --test-size=N` and `kind create cluster`.
//
// Everything of one cluster lives under its directory: keys/, config.yaml (so the directory is
// a TRAINLET_HOME), coordinator/ (state), agents/<node>/ (state, worker logs), logs/ (daemon
// logs) and pids/ (one file per daemon: "<pid> <start time>", so `down` never signals a process
// that merely reused a pid).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::cli {

struct LocalUpOptions {
  std::string dir;
  int agents = 2;
  std::vector<std::string> topologies;  // hwloc XML per agent, in order
  uint32_t slots = 0;                   // per agent; 0: one per PU of its topology
  int heartbeat_ms = 1000;
  int lost_timeout_ms = 3000;
  int partition_grace_ms = 0;  // 0: the coordinator's default
  int stop_grace_ms = -1;      // -1: the coordinator's default
  int timeout_s = 30;          // for every agent to be Ready
  // Per agent, in order, or one value for all (as topologies). "-" or "" gives that agent none.
  std::vector<std::string> labels;         // "k=v,k2=v2"
  std::vector<std::string> taints;         // "key=value:Effect,..."
  std::vector<std::string> health_checks;  // health check program
  std::vector<std::string> shared_dirs;    // the agent's shared_dir
  int health_interval_ms = 0;              // 0: the agent's default
};

Status LocalUp(const LocalUpOptions& options);
// Stops the coordinator `local up` started in `dir` (SIGTERM, SIGKILL after `timeout_s`) if it
// runs, starts it again with the same command line and the same ports (kept in the cluster dir,
// local_cluster_layout.h), and waits until every running agent has re-registered and is Ready.
// Its store, keys and jobs are kept; the agents and their ranks are not touched.
Status LocalRestartCoordinator(const std::string& dir, int timeout_s);
// Stops exactly the processes `local up` started in `dir`: agents first, then the coordinator.
Status LocalDown(const std::string& dir, int timeout_s);

}  // namespace trainlet::cli
