// ExecSessions: commands the coordinator asks this agent to run for `trainlet-exec` (an MPI
// launcher's `orted`, say), with their output relayed back instead of written to a log.
//
// A session's process is a worker of the job's attempt in WorkerSupervisor (under a rank number
// above kExecRankBase), so stopping the attempt stops it too, and Reap() reports its exit. Its
// stdout and stderr are pipes the agent's loop polls. The session ends, and ExecExited is sent,
// once the process has exited and both pipes are drained, so no output is lost behind the exit.
//
// Owned by the agent's loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <vector>
#include <zmq.hpp>

#include "agent/worker_supervisor.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

inline constexpr uint32_t kExecRankBase = 1u << 30;

class ExecSessions {
 public:
  using Send = std::function<void(v1::Envelope)>;
  ExecSessions(WorkerSupervisor* supervisor, Send send) : supervisor_(supervisor), send_(std::move(send)) {}
  ~ExecSessions();

  // Starts `/bin/sh -c command` in `cwd`, with the session's env over `env`. Failures are
  // reported to the coordinator as ExecExited with the error, never thrown.
  void Start(const v1::ExecStart& start, const std::map<std::string, std::string>& env,
             const std::string& cwd);
  // SIGTERM now, SIGKILL after the session's grace period.
  void Cancel(uint64_t exec_id, std::chrono::steady_clock::time_point now);

  // Adds the open pipes to the loop's poll set, and handles the readable ones after the poll.
  void AddPollItems(std::vector<zmq_pollitem_t>& items) const;
  void OnPolled(const std::vector<zmq_pollitem_t>& items);
  // True when the exit belongs to a session (it is then handled here).
  bool OnWorkerExit(const WorkerExit& exit);
  size_t size() const { return sessions_.size(); }

 private:
  struct Session {
    std::string job;
    uint32_t attempt = 0;
    uint32_t rank = 0;
    uint32_t grace_ms = 10000;
    int out_fd = -1;
    int err_fd = -1;
    bool exited = false;
    WorkerExit exit;
  };
  void Drain(uint64_t id, Session& s, int& fd, uint32_t stream);
  void MaybeFinish(uint64_t id);

  WorkerSupervisor* supervisor_;
  Send send_;
  std::map<uint64_t, Session> sessions_;
  uint32_t next_rank_ = kExecRankBase;
};

}  // namespace trainlet::agent
