// PortReservationWaits: which attempt waits for which node's ports, and when all have answered.
//
// A runtime that needs ports on a node (MASTER_PORT, ring ports) gets them from that node's agent
// before its plans are made: once the attempt is stored, Begin() sends ReservePorts to every node
// whose share of the attempt's layout (NodeLayout::ports) needs ports, and each agent answers
// with PortsReserved (Record()). When every node has answered, the request holds the reserved
// ports and the caller renders the plans from it and the layout kept here (RenderAttempt).
//
// Not stored: after a coordinator restart, the nodes that do not report holding the attempt's
// plan make AttemptLauncher::ResendLostPlans begin the wait again (an agent answers with the
// ports it holds), and the start timeout fails what never completes. At most one wait per job (a
// new attempt replaces the old one's).
//
// Owned by AttemptLauncher (attempt_launcher.h), on the coordinator's loop; no locks. `active`
// tells whether an attempt may still run (ExecAuthority::AttemptActive); answers for attempts that
// may not are dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coordinator/agent_commands.h"
#include "coordinator/attempt_plan.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

class PortReservationWaits {
 public:
  using AttemptActiveFn = std::function<bool(const std::string& job, uint32_t attempt)>;
  // What Record() made of an answer.
  enum class Outcome {
    kDropped,   // nobody waits for it (stale, duplicate, unknown node); ports given back if stale
    kRefused,   // the node could not reserve what was asked: the attempt fails, `why` names it
    kWaiting,   // recorded; other nodes have not answered yet
    kComplete,  // recorded, and every node has answered: Request() holds every port
  };

  // `agents` outlives this.
  PortReservationWaits(AgentCommands* agents, AttemptActiveFn active);

  // Starts waiting for `job`'s attempt `request.attempt`, laid out as `layout` (LayoutAttempt):
  // node i of `request` reserves layout.nodes[i].ports ports (0: none). Sends ReservePorts to
  // each node that wants any and returns true, keeping the request and the layout; returns
  // false, waiting for nothing, when none does (!WantsPorts). Ends whatever the job waited for
  // before. With a `checkpoint` (work_dir_agreement.h), every node is asked, for its ports (maybe
  // none) and for what its work dir holds there (WorkDirStates). `job_uid`: the incarnation,
  // told to each node asked (ReservePorts.job_uid).
  bool Begin(const std::string& job, const PlanRequest& request, const AttemptLayout& layout,
             const std::string& checkpoint = "", const std::string& job_uid = "");
  // `node` (re-)registered: asks it again for the ports of every active attempt still waiting for
  // its answer. Safe: an agent answers a repeated ask with the ports it already holds.
  void Resend(const std::string& node);
  // `node`'s answer. On kRefused, `*why` says why, naming the node.
  Outcome Record(const std::string& node, const v1::PortsReserved& reserved, std::string* why);

  // The request of `job`'s `attempt`, with PlacedNode::ports filled as answers came; null when
  // nothing waits for that attempt.
  const PlanRequest* Request(const std::string& job, uint32_t attempt) const;
  // The layout Begin() was given for `job`'s `attempt`; null when nothing waits for that attempt.
  const AttemptLayout* Layout(const std::string& job, uint32_t attempt) const;
  // The nodes of `job`'s `attempt` that have not answered, in placement order (empty when nothing
  // waits for that attempt).
  std::vector<std::string> Unanswered(const std::string& job, uint32_t attempt) const;
  // What each node's work dir holds (PortsReserved.work_dir), in placement order, once kComplete
  // for a Begin with a checkpoint; empty otherwise. And that checkpoint.
  std::vector<v1::WorkDirState> WorkDirStates(const std::string& job, uint32_t attempt) const;
  std::string Checkpoint(const std::string& job, uint32_t attempt) const;
  // Stops waiting for `job`'s `attempt`; false when nothing waited for that attempt.
  bool End(const std::string& job, uint32_t attempt);
  // Stops waiting for any attempt of `job` (the job is gone).
  void Forget(const std::string& job) { waits_.erase(job); }

 private:
  struct Wait {
    uint32_t attempt = 0;
    PlanRequest request;           // Render's input; PlacedNode::ports filled as answers come
    AttemptLayout layout;          // the attempt's layout, rendered once all ports are held
    std::vector<uint32_t> wanted;  // ports per node rank (0: that node reserves none)
    std::vector<bool> answered;    // per node rank
    std::string checkpoint;        // Begin's; "" asks no node for its work dir
    std::string job_uid;           // Begin's
    std::vector<v1::WorkDirState> work_dirs;  // per node rank, as answers came
  };
  const Wait* Find(const std::string& job, uint32_t attempt) const;

  AgentCommands* agents_;
  AttemptActiveFn active_;
  std::map<std::string, Wait> waits_;  // by job name
};

}  // namespace trainlet::coordinator
