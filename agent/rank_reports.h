// RankReports: the WorkerEvents this node sends the coordinator about its ranks.
//
//   - Started: the pid, with what the rank got here (CPUs, devices, workspace, working directory,
//     the user it runs as, and a note when its CPUs are shared with another job); StartFailed
//     with why it could not.
//   - Exited: exit code or signal, the last line of a failed rank's log (a step's own message
//     wins), and a PMIx_Abort the rank called before it ended (RendezvousServer::OnRankExited).
//   - A rank its step holds for its replicated job's dependencies is reported when it starts
//     (LateStarted), with the binding and working directory kept for it at launch (Hold), or as a
//     start failure if it never does.
// Every event goes out through `send_event` (CoordinatorLink::SendEvent: kept until acked).
//
// Owned by the Agent, on its loop; no locks. Borrows the services it reads (Deps), which outlive
// it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "agent/agent_ops.h"
#include "agent/cpu_allotment.h"
#include "agent/rank_binding.h"
#include "agent/rendezvous_server.h"
#include "agent/worker_supervisor.h"
#include "common/platform/env.h"
#include "common/status.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

class RankReports {
 public:
  struct Deps {
    std::string node;
    platform::Env* env = nullptr;
    AgentOps* ops = nullptr;
    WorkerSupervisor* supervisor = nullptr;
    RendezvousServer* rendezvous = nullptr;
    const CpuAllotment* cpus = nullptr;
    std::function<void(v1::Envelope)> send_event;
    // <state dir>/logs/<job>/attempt-N/rank-R.log
    std::function<std::string(const std::string& job, uint32_t attempt, uint32_t rank)> log_path;
  };
  explicit RankReports(Deps deps);

  // Started (pid.ok()) or StartFailed for `rank` of (job, attempt), which runs in `cwd`.
  void Started(const std::string& job, uint32_t attempt, uint32_t rank, const std::string& cwd,
               const std::optional<RankBinding>& binding, const Result<pid_t>& pid);
  // `rank` is held by its step: LateStarted reports it with this binding and cwd.
  void Hold(const std::string& job, uint32_t attempt, uint32_t rank, std::string cwd,
            std::optional<RankBinding> binding);
  void LateStarted(const LateStart& start);
  // An exit the supervisor reaped (a held rank that never started is a start failure).
  void Exited(const WorkerExit& exit);
  // (job, attempt) just took its CPUs here: when it must share them, the coordinator hears it
  // for it and for each attempt it shares with (SharedCpuEvents), whether or not ranks of it start
  // on this node.
  void CpusTaken(const std::string& job, uint32_t attempt);

  size_t held() const { return held_.size(); }

 private:
  struct Held {
    std::string cwd;
    std::optional<RankBinding> binding;
  };
  using Key = std::tuple<std::string, uint32_t, uint32_t>;  // job, attempt, rank

  const Deps deps_;
  std::map<Key, Held> held_;
};

}  // namespace trainlet::agent
