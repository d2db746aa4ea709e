// ExecSessions: commands the coordinator asks this agent to run for `trainlet-exec` (an MPI
// launcher's `orted`, say), with their output relayed back instead of written to a rank log.
//
// Sessions outlive the agent, as ranks do (DESIGN "State and scale"): a session's process runs
// under a step of its own (WorkerSupervisor::StartStep, one rank numbered from kExecRankBase),
// with its stdout and stderr appended to files in <state_dir>/exec/<exec id>/
// (exec_output_files.h). The agent tails those files and sends what is new as ExecOutput, with
// its offset in the stream. The coordinator acknowledges what it relayed in every HeartbeatAck
// (OnDelivered); the counts are kept in the session's record, and a restarted agent re-adopts the
// step (AdoptSteps) and the session (Restore), and resends from them. The coordinator drops bytes
// it relayed already, so an agent kill -9 neither loses nor repeats output.
//
// A session ends, and ExecExited is sent, once its process has exited (Reap reports it, also for
// an exit recorded while no agent ran) and both files are read to the end, so no output is lost
// behind the exit. Its files are removed when the coordinator no longer lists the session. A
// running session that the coordinator no longer lists (cancelled, or its trainlet-exec went
// silent, perhaps while this agent was down and could not be told) is stopped.
//
// Owned by the agent's loop; no locks.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "agent/exec_output_files.h"
#include "agent/worker_supervisor.h"
#include "common/platform/file_watch.h"
#include "common/platform/periodic_timer.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

inline constexpr uint32_t kExecRankBase = 1u << 30;

class ExecSessions {
 public:
  using Send = std::function<void(v1::Envelope)>;
  // `dir` (<state_dir>/exec) holds one directory per session; created 0700. `supervisor` is not
  // owned and must outlive this object.
  ExecSessions(WorkerSupervisor* supervisor, std::string dir, Send send);
  ~ExecSessions();
  ExecSessions(const ExecSessions&) = delete;
  ExecSessions& operator=(const ExecSessions&) = delete;

  // Takes back the sessions a previous agent left in `dir`, and resends their output from what
  // the coordinator acknowledged. Call once, after supervisor->AdoptSteps() and before the next
  // Reap(), whose exits include those of sessions that ended while no agent ran. A session whose
  // process was never started (the agent died in between) is reported as ExecExited with an
  // error.
  void Restore();

  // Starts `/bin/sh -c command` in `cwd`, with `env` (the node's) over the session's, under a step
  // whose CPU affinity is `cpus` (the attempt's CPUs on this node; empty: the agent's own). It runs
  // as the job's ranks on this node do: the start's run_as_user / run_as_group (the job's
  // securityContext) over the agent's run_as (agent/step/rank_identity.h), its secrets
  // (TRAINLET_EXEC_KEY) in that user's files (agent/step/rank_files.h).
  // Failures are reported to the coordinator as ExecExited with the error, never thrown.
  void Start(const v1::ExecStart& start, const std::map<std::string, std::string>& env,
             const std::string& cwd, const std::vector<unsigned>& cpus = {});
  // SIGTERM now, SIGKILL after the session's grace period.
  void Cancel(uint64_t exec_id, std::chrono::steady_clock::time_point now);
  // The sessions the coordinator still relays for this node, from a HeartbeatAck.
  void OnDelivered(const google::protobuf::RepeatedPtrField<v1::ExecDelivered>& delivered,
                   std::chrono::steady_clock::time_point now);

  // What a registration says of the sessions: each one's id, job, attempt and acknowledged
  // counts, so that a coordinator that restarted takes them back instead of ending them.
  void Report(google::protobuf::RepeatedPtrField<v1::ExecSessionReport>* out) const;
  // From a registration until it is accepted, output and exits are not sent. A coordinator that
  // restarted takes the sessions back at the counts Report gave, so output sent after the
  // registration, from further on in the files, would reach it ahead of the bytes in between
  // and leave a gap in what trainlet-exec writes. Resend() ends the hold.
  void Hold();
  // After a registration is accepted: sends again what the coordinator has not acknowledged,
  // from the acknowledged counts, and the exits already sent (they may have gone to a coordinator
  // that then restarted). The coordinator drops what it relayed already.
  void Resend();

  // Adds the output wake-up (a file watch, or a timer where files are polled) to the loop's poll
  // set, and reads new output after the poll when it fired.
  void AddPollItems(std::vector<zmq_pollitem_t>& items) const;
  void OnPolled(const std::vector<zmq_pollitem_t>& items);
  // True when the exit belongs to a session (it is then handled here).
  bool OnWorkerExit(const WorkerExit& exit);
  // Sessions whose process runs, or whose exit has not been sent yet.
  size_t size() const;

 private:
  struct Session {
    ExecSessionRecord record;
    std::string dir;
    OutputTail out;  // stdout
    OutputTail err;  // stderr
    int out_watch = -1;
    int err_watch = -1;
    bool exited = false;
    bool exit_sent = false;
    WorkerExit exit;  // valid once exited
    bool cancelled = false;
  };
  std::string SessionDir(uint64_t exec_id) const;
  void Refuse(uint64_t exec_id, const std::string& why);
  void Watch(Session& s);
  void Unwatch(Session& s);
  // Sends what is new in both files; on a read error the stream is reported and closed. Reads
  // nothing while held.
  void ReadOutput(Session& s);
  void SendExit(Session& s, const WorkerExit& exit);
  void SendExitMessage(const Session& s);
  // Output and exits go through here: dropped while held (Resend sends them again).
  void Emit(v1::Envelope env);
  void Forget(std::map<uint64_t, Session>::iterator it);
  void UpdatePolling();

  // Constant after construction.
  WorkerSupervisor* const supervisor_;
  const std::string dir_;
  const Send send_;
  std::unique_ptr<platform::FileWatch> watch_;  // null if it could not be opened: polled
  // Owned by the loop.
  std::unique_ptr<platform::PeriodicTimer> poll_timer_;  // while sessions exist and no watch fd
  std::map<uint64_t, Session> sessions_;
  uint32_t next_rank_ = kExecRankBase;
  bool held_ = false;  // a registration is unanswered
};

}  // namespace trainlet::agent
