// OperatorService: answers trainletctl's requests on the operator endpoint.
//
// Most requests are answered at once from the JobController and NodeRegistry. Two are not:
// `wait` is held until the job meets the condition or its timeout passes, and `logs` is relayed
// to the agent that holds the rank's log file and answered when the agent replies.
//
// Every answer fits in one message (kMaxMessageBytes, common/envelope.h): lists come in pages
// (GetJobsRequest.limit and continue_token) of at most kJobPageBytes, and an answer that would
// still be larger is replaced by an Invalid error saying "response too large", since the client
// would otherwise drop it and report a coordinator that "did not answer".
//
// Who may ask what: every request comes with the user who sent it (the name the operator
// allowlist gives the connection's key) and is checked against the AccessPolicy (access_policy.h)
// before anything is read or changed; a refusal is a PermissionDenied answer naming the user, the
// verb and the namespace. An applied file is checked whole once parsed: one document the user may
// not apply refuses the file, and nothing of it is stored. Without EnforcePolicy every user is
// admin.
//
// Namespaces: requests name a job by namespace and name; inside, the job is known by its key
// (job_key.h). Answers give each JobStatus its name within its namespace and the namespace.
//
// Owned by the coordinator's loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coordinator/access_policy.h"
#include "coordinator/apply_parser.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {

// A page of `get trainjobs` stops once its jobs reach this many bytes (at least one job is always
// sent), half the message cap, so the page and its envelope always fit.
inline constexpr size_t kJobPageBytes = 4u << 20;

// Paging of `get trainjobs` in creation order. The token names the page's last job and its
// creation time: the next page starts after that job or, when it was deleted meanwhile, at the
// first job created after it (jobs created in the same millisecond after it may then be missed,
// as a kubectl list may miss objects changed between pages). Invalid for a malformed token.
std::string JobPageToken(const v1::JobStatus& last);
Result<size_t> JobPageStart(const std::vector<const v1::JobStatus*>& jobs,
                            const std::string& token);

// An answer's copy of a job: `name` within its namespace, and the namespace (job_key.h).
void PresentJob(v1::JobStatus& job);

class OperatorService {
 public:
  using Clock = std::chrono::steady_clock;
  using Reply = std::function<void(const std::string& routing_id, v1::Envelope env)>;

  // The policy in force now; called once per request (AccessPolicyFile::Current re-reads a
  // changed file).
  using PolicyNow = std::function<const AccessPolicy&()>;

  OperatorService(JobController* jobs, NodeRegistry* nodes, NodeSink* agents, Reply reply)
      : jobs_(jobs), nodes_(nodes), agents_(agents), reply_(std::move(reply)) {}

  // From then on every request is checked against `policy()`; before (unit tests, and a
  // coordinator without a policy file), every user is admin.
  void EnforcePolicy(PolicyNow policy) { policy_ = std::move(policy); }

  // `user`: who sent it, the operator allowlist's name for the connection's key.
  void Handle(const std::string& routing_id, const v1::OperatorRequest& request,
              Clock::time_point now, int64_t now_ms, const std::string& user = "");
  // From then on, an apply's file is parsed and checked on `parser`'s thread, and stored and
  // answered when the loop calls OnApplyParsed (but for a small one that nothing waits ahead of:
  // kParseOnLoopBytes); without it (unit tests), Handle applies at once.
  // `parser` must outlive the service.
  void ParseAppliesOn(ApplyParser* parser) { parser_ = parser; }
  // A file this small (a TrainJob is a few KiB) is parsed on the loop at once when no apply is
  // ahead of it in the parser (so applies still finish in the order they came): well under a
  // millisecond of the loop, where the parser thread cost two thread hand-offs (the worker's
  // wake-up and the loop's), 0.3-1 ms of an apply on a VM (bench/README.md, issue 16).
  static constexpr size_t kParseOnLoopBytes = 16 * 1024;

  // Finishes the applies whose files `parser` has parsed: stores them (JobController::Apply) and
  // answers, in the order they were submitted.
  void OnApplyParsed(int64_t now_ms);
  // An agent's answer to a LogRead this service sent.
  void OnLogChunk(const v1::LogChunk& chunk);
  // Answers waits whose job changed or whose time ran out, and gives up on silent agents.
  void Tick(Clock::time_point now);
  Clock::time_point NextDeadline(Clock::time_point now) const;

 private:
  struct PendingWait {
    std::string routing_id;
    uint64_t request_id;
    v1::WaitJobRequest request;
    Clock::time_point deadline;
  };
  struct PendingLog {
    std::string routing_id;
    uint64_t request_id;
    bool rank_done;
    uint32_t attempt;
    Clock::time_point deadline;
  };

  const AccessPolicy& Policy() const { return policy_ ? policy_() : all_admin_; }
  // Whether `user` may make the request (operator_access.cpp): Ok, or PermissionDenied.
  Status Authorize(const std::string& user, const v1::OperatorRequest& req) const;
  // Whether the job name and namespace a request names are a TrainJob name (an RFC 1035 label)
  // and a namespace (an RFC 1123 label), checked after Authorize (operator_access.cpp): a '.'
  // would make "team-b.b1" in namespace default the key of team-b's job b1 (job_key.h), past a
  // check of namespace default. Ok, or Invalid naming the field.
  static Status CheckJobNames(const v1::OperatorRequest& req);
  // Whether `user` may apply every document of `file`.
  Status AuthorizeApply(const std::string& user, const trainjob::ParsedFile& file) const;
  // Parses (laying held jobs under), authorizes and stores one applied file.
  Result<v1::ApplyResult> ApplyAs(const std::string& user, Result<trainjob::ParsedFile> file,
                                  const std::string& source, int64_t now_ms);
  Result<v1::DeleteJobResult> DeleteJob(const v1::DeleteJobRequest& req, int64_t now_ms,
                                        const std::string& user);
  Result<v1::SuspendJobResult> SuspendJob(const v1::SuspendJobRequest& req, int64_t now_ms,
                                          const std::string& user);
  void Respond(const std::string& routing_id, v1::OperatorResponse response);
  void Fail(const std::string& routing_id, uint64_t request_id, ErrorCode code,
            const std::string& message);
  // Fills `result` and returns true when the wait can be answered now.
  bool CheckWait(const v1::WaitJobRequest& request, v1::WaitJobResult& result) const;
  // A wait that cannot be answered yet: Tick answers it when the job changes or time runs out.
  void ParkWait(const std::string& routing_id, uint64_t request_id,
                const v1::WaitJobRequest& request, Clock::time_point now);
  // get nodes: every node with its conditions, used slots and resources.
  void ListNodes(v1::NodeList& list) const;
  // get trainjobs: the one named, with its spec (NotFound naming it when absent), or a page of
  // the list without specs (see GetJobsRequest). Invalid for a continue token that is not one.
  Status ListJobs(const v1::GetJobsRequest& request, v1::JobList& list) const;
  // cordon / uncordon; errors (an unknown node) from the registry.
  Status Cordon(const v1::CordonNodeRequest& request, v1::CordonNodeResult& result);
  // Nodes (operator_nodes.cpp): conditions and resources for get nodes, and drain.
  static void DescribeConditions(const NodeEntry& entry, v1::NodeStatus& status);
  void FillUsedResources(v1::NodeList& list) const;
  // Cordons the node; with force, fails the attempts of the jobs running there (their events
  // name `user`).
  Result<v1::DrainNodeResult> Drain(const v1::DrainNodeRequest& req, int64_t now_ms,
                                    const std::string& user);
  void HandleLogs(const std::string& routing_id, uint64_t request_id, const v1::LogsRequest& req,
                  Clock::time_point now);

  struct PendingApply {
    std::string routing_id;
    uint64_t request_id;
    std::string source;
    std::string user;
    // Kept for files up to kReparseOnLoopBytes: parsed again on the loop when it names a held
    // TrainJob or did not parse alone (a re-apply laid over the stored document).
    std::string yaml;
  };
  // A short re-apply (Kubeflow's lifecycle guide suspends with a few lines) is this small; a
  // file this small is also cheap to parse again on the loop.
  static constexpr size_t kReparseOnLoopBytes = 256 * 1024;

  JobController* jobs_;
  NodeRegistry* nodes_;
  PolicyNow policy_;  // empty: every user is admin
  AccessPolicy all_admin_ = AccessPolicy::AllAdmin();
  ApplyParser* parser_ = nullptr;             // not owned; null: applies are parsed here
  std::map<uint64_t, PendingApply> applies_;  // by ApplyParser ticket
  NodeSink* agents_;
  Reply reply_;
  std::vector<PendingWait> waits_;
  uint64_t waits_checked_generation_ = 0;
  std::map<uint64_t, PendingLog> logs_;  // by LogRead.request_id
  uint64_t next_log_request_ = 1;
};

}  // namespace trainlet::coordinator
