// PlanDelivery: which launch plans reached their nodes, and which must be sent again (issue 19,
// defect 4).
//
// A plan is lost when the coordinator crashes between storing an attempt and sending it, when it
// is sent while the node's connection is down, or when the agent restarts before it starts the
// ranks. Each agent reports the attempts it holds, with or without their plan (HeldAttempt), in
// its registration and in every heartbeat; NodeRegistry keeps the last report (NodeEntry). A
// node of a live attempt's placement misses its plan when its report, received well after the
// plan was last sent (kAckWaitMs: a report composed before the plan arrived says nothing), does
// not hold the attempt with its plan, and no rank of the attempt on it got past Pending (a start
// or an exit recorded means the plan arrived). An agent that predates the report is never taken
// to miss anything, as before.
//
// Sent plans are kept here, in memory, exactly as sent, so a resend is the same plan (the agent
// takes a copy of a plan it runs as a no-op, agent/node_attempt.h). A coordinator that restarted
// has none: AttemptLauncher renders them again (attempt_launcher_resend.cpp).
//
// Owned by AttemptLauncher, on the coordinator's loop; no locks. Time is passed in (wall ms).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/node_registry.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

class PlanDelivery {
 public:
  // How long after a send a report must come before its silence about the plan counts: a beat
  // or two, with the report and the plan crossing each other on the wire.
  static constexpr int64_t kAckWaitMs = 3000;
  // The least time between two sends of one plan to one node.
  static constexpr int64_t kResendIntervalMs = 5000;

  // `plan` (of plan.job(), plan.attempt()) was sent to `node` at `now_ms`. A plan of a newer
  // attempt of the job drops those of older ones.
  void Sent(const std::string& node, const v1::LaunchPlan& plan, int64_t now_ms);
  // The plan last sent to `node` for `job`'s `attempt`; null when none was (since this
  // coordinator started).
  const v1::LaunchPlan* Plan(const std::string& job, uint32_t attempt,
                             const std::string& node) const;
  // A send of `job`'s `attempt` to `node` that is not kept (a plan rendered again only for the
  // nodes that miss it counts the same for the resend interval).
  void Tried(const std::string& job, uint32_t attempt, const std::string& node, int64_t now_ms);

  // The nodes of `status`'s placement that miss the plan of its current attempt at `now_ms` (see
  // the top of this file), in placement order; empty unless the attempt is Starting or Running.
  // Nodes sent the plan less than kResendIntervalMs ago are left out.
  std::vector<std::string> Missing(const v1::JobStatus& status, const NodeRegistry& nodes,
                                   int64_t now_ms) const;
  // False when `node` is known never to have received the plan of `status`'s current attempt:
  // it is not registered, or its last report, received kAckWaitMs after the first send (or at
  // all, for a plan this coordinator never sent), does not hold it. True when it did, or when
  // nothing is known (an agent that does not report).
  bool Reached(const v1::JobStatus& status, const std::string& node,
               const NodeRegistry& nodes) const;

  // ReservePorts of `status`'s current attempt, asked of `node` (Tried), is known lost: the
  // node's report, received kAckWaitMs after the last ask, holds the attempt in no state (an
  // agent answers every ask it gets, and holds the attempt from then on), and the last ask is
  // kResendIntervalMs old. False for an agent that does not report.
  bool AskLost(const v1::JobStatus& status, const std::string& node, const NodeRegistry& nodes,
               int64_t now_ms) const;

  // The job is gone.
  void Forget(const std::string& job) { jobs_.erase(job); }

 private:
  struct Job {
    uint32_t attempt = 0;
    std::map<std::string, v1::LaunchPlan> plans;  // by node
    std::map<std::string, int64_t> sent_ms;       // by node: the last send
    std::map<std::string, int64_t> first_ms;      // by node: the first send
  };
  // When `job`'s `attempt` was last sent to `node`; 0 when never.
  int64_t SentMs(const std::string& job, uint32_t attempt, const std::string& node) const;
  Job& Of(const std::string& job, uint32_t attempt);

  std::map<std::string, Job> jobs_;  // by job name: the current attempt's sends
};

}  // namespace trainlet::coordinator
