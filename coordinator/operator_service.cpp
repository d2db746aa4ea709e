#include "coordinator/operator_service.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "common/envelope.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/job_key.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/log_target.h"
#include "coordinator/operator_queues.h"
#include "coordinator/operator_runtimes.h"
#include "coordinator/queue_usage_view.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

constexpr auto kLogRelayTimeout = std::chrono::seconds(10);

bool HasCondition(const v1::JobStatus& job, std::string_view type) {
  for (const auto& c : job.conditions()) {
    if (c.type() == type && c.status() == "True") return true;
  }
  return false;
}

}  // namespace

void PresentJob(v1::JobStatus& job) {
  JobRef ref = JobKeyRef(job.name());
  if (!job.namespace_().empty()) ref.namespace_ = job.namespace_();
  job.set_name(std::move(ref.name));
  job.set_namespace_(std::move(ref.namespace_));
}

std::string JobPageToken(const v1::JobStatus& last) {
  return std::to_string(last.created_unix_ms()) + "/" + last.name();
}

Result<size_t> JobPageStart(const std::vector<const v1::JobStatus*>& jobs,
                            const std::string& token) {
  if (token.empty()) return size_t{0};
  const size_t slash = token.find('/');
  int64_t created = 0;
  try {
    size_t used = 0;
    created = std::stoll(token.substr(0, slash), &used);
    if (slash == std::string::npos || used != slash) throw std::invalid_argument(token);
  } catch (const std::exception&) {
    return InvalidError("continue token \"" + token + "\" is not one a page of trainjobs gave");
  }
  const std::string name = token.substr(slash + 1);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i]->name() == name) return i + 1;
  }
  // The last job of the page was deleted since: go on with the first created after it.
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i]->created_unix_ms() > created) return i;
  }
  return jobs.size();
}

void OperatorService::Respond(const std::string& routing_id, v1::OperatorResponse response) {
  // Room for the envelope around the response; a larger answer would be dropped by the client.
  constexpr size_t kMaxResponseBytes = kMaxMessageBytes - (64u << 10);
  if (const size_t size = response.ByteSizeLong(); size > kMaxResponseBytes) {
    spdlog::warn("answer to operator request {} not sent: response too large ({} bytes)",
                 response.request_id(), size);
    const uint64_t id = response.request_id();
    response.Clear();
    response.set_request_id(id);
    response.set_error(
        "response too large: " + std::to_string(size) + " bytes, more than the " +
        std::to_string(kMaxResponseBytes) +
        " one answer may carry (list in pages: trainletctl get trainjobs --limit N)");
    response.set_error_code(ErrorCodeName(ErrorCode::kInvalid));
  }
  v1::Envelope env;
  *env.mutable_operator_response() = std::move(response);
  reply_(routing_id, std::move(env));
}

void OperatorService::Fail(const std::string& routing_id, uint64_t request_id, ErrorCode code,
                           const std::string& message) {
  v1::OperatorResponse r;
  r.set_request_id(request_id);
  r.set_error(message);
  r.set_error_code(ErrorCodeName(code));
  Respond(routing_id, std::move(r));
}

void OperatorService::Handle(const std::string& routing_id, const v1::OperatorRequest& req,
                             Clock::time_point now, int64_t now_ms, const std::string& user) {
  if (Status allowed = Authorize(user, req); !allowed.ok()) {
    spdlog::warn("refused operator request {}: {}", req.request_id(), allowed.message());
    return Fail(routing_id, req.request_id(), allowed.code(), allowed.message());
  }
  if (Status named = CheckJobNames(req); !named.ok()) {
    return Fail(routing_id, req.request_id(), named.code(), named.message());
  }
  v1::OperatorResponse r;
  r.set_request_id(req.request_id());
  // Each request fills its part of the response, or fails with a Status naming what is wrong.
  Status failed = Status::Ok();
  auto take = [&failed](auto result, auto* part) {
    if (result.ok()) {
      *part = std::move(result).value();
    } else {
      failed = result.status();
    }
  };
  switch (req.body_case()) {
    case v1::OperatorRequest::kApply:
      if (parser_ != nullptr &&
          !(applies_.empty() && req.apply().yaml().size() <= kParseOnLoopBytes)) {
        auto ticket = parser_->Submit(req.apply().yaml(), req.apply().source_name());
        if (!ticket.ok()) {
          failed = ticket.status();
          break;
        }
        applies_[*ticket] = {
            routing_id, req.request_id(), req.apply().source_name(), user,
            req.apply().yaml().size() <= kReparseOnLoopBytes ? req.apply().yaml() : std::string()};
        return;
      }
      take(ApplyAs(user,
                   ApplyTransaction::Parse(req.apply().yaml(), req.apply().source_name(),
                                           jobs_->Held()),
                   req.apply().source_name(), now_ms),
           r.mutable_apply());
      break;
    case v1::OperatorRequest::kGetNodes:
      ListNodes(*r.mutable_nodes());
      break;
    case v1::OperatorRequest::kGetJobs:
      failed = ListJobs(req.get_jobs(), *r.mutable_jobs());
      break;
    case v1::OperatorRequest::kDeleteJob:
      take(DeleteJob(req.delete_job(), now_ms, user), r.mutable_delete_job());
      break;
    case v1::OperatorRequest::kWaitJob:
      if (!CheckWait(req.wait_job(), *r.mutable_wait_job())) {
        return ParkWait(routing_id, req.request_id(), req.wait_job(), now);
      }
      break;
    case v1::OperatorRequest::kSuspendJob:
      take(SuspendJob(req.suspend_job(), now_ms, user), r.mutable_suspend_job());
      break;
    case v1::OperatorRequest::kCordonNode:
      failed = Cordon(req.cordon_node(), *r.mutable_cordon_node());
      break;
    case v1::OperatorRequest::kDrainNode:
      take(Drain(req.drain_node(), now_ms, user), r.mutable_drain_node());
      break;
    case v1::OperatorRequest::kQueueObjects: {  // operator_queues.h, queue_usage_view.h
      const std::vector<const v1::JobStatus*> statuses = jobs_->List();
      auto list = HandleQueueObjects(req.queue_objects(), jobs_->queues(), jobs_->store(), statuses,
                                     now_ms, user);
      if (list.ok() && !req.queue_objects().remove()) {
        FillQueueUsage(*list, jobs_->admitter(), statuses, !req.queue_objects().name().empty());
      }
      take(std::move(list), r.mutable_queue_objects());
      break;
    }
    case v1::OperatorRequest::kGetRuntimes:  // operator_runtimes.h
      take(ListRuntimes(jobs_->runtimes(), req.get_runtimes()), r.mutable_runtimes());
      break;
    case v1::OperatorRequest::kAdmitCheck: {  // Kueue's admission checks (job_admitter.h)
      const v1::Kueue14AdmitCheckRequest& a = req.admit_check();
      take(jobs_->AdmitCheck(JobKey(a.namespace_(), a.name()), a.check(), now_ms, user),
           r.mutable_admit_check());
      if (failed.ok()) r.mutable_admit_check()->set_name(a.name());
      break;
    }
    case v1::OperatorRequest::kLogs:
      return HandleLogs(routing_id, req.request_id(), req.logs(), now);
    case v1::OperatorRequest::BODY_NOT_SET:
      failed = InvalidError("empty request");
      break;
  }
  if (!failed.ok()) return Fail(routing_id, req.request_id(), failed.code(), failed.message());
  Respond(routing_id, std::move(r));
}

void OperatorService::OnApplyParsed(int64_t now_ms) {
  if (parser_ == nullptr) return;
  for (auto& parsed : parser_->TakeParsed()) {
    auto it = applies_.find(parsed.ticket);
    TRAINLET_CHECK(it != applies_.end());
    const PendingApply p = std::move(it->second);
    applies_.erase(it);
    // The parser thread cannot see the stored documents a re-applied TrainJob is laid over (only
    // the loop holds them): a small file that names a held job, or that did not parse alone (a
    // short re-apply leaves required fields out), is parsed again here, with them.
    const bool again = !p.yaml.empty() && (!parsed.file.ok() || ApplyTransaction::NamesHeldJob(
                                                                    *parsed.file, jobs_->Held()));
    auto result = ApplyAs(
        p.user,
        again ? ApplyTransaction::Parse(p.yaml, p.source, jobs_->Held()) : std::move(parsed.file),
        p.source, now_ms);
    if (!result.ok()) {
      Fail(p.routing_id, p.request_id, result.status().code(), result.status().message());
      continue;
    }
    v1::OperatorResponse r;
    r.set_request_id(p.request_id);
    *r.mutable_apply() = std::move(result).value();
    Respond(p.routing_id, std::move(r));
  }
}

void OperatorService::ListNodes(v1::NodeList& list) const {
  for (const auto& [name, e] : nodes_->nodes()) {
    auto* n = list.add_nodes();
    *n->mutable_info() = e.info;
    n->set_state(NodeStateName(e.state));
    n->set_registered_unix_ms(e.registered_unix_ms);
    n->set_last_heartbeat_unix_ms(e.last_beat_unix_ms);
    n->set_schedulable(e.schedulable);
    DescribeConditions(e, *n);
  }
  for (const v1::JobStatus* j : jobs_->List()) {
    for (const auto& rank : j->ranks()) {
      if (!IsRankActive(rank.rank_state())) continue;
      for (auto& n : *list.mutable_nodes()) {
        if (n.info().name() == rank.node()) n.set_used_slots(n.used_slots() + 1);
      }
    }
  }
  FillUsedResources(list);
}

Status OperatorService::ListJobs(const v1::GetJobsRequest& request, v1::JobList& list) const {
  if (!request.name().empty()) {
    const std::string key = JobKey(request.namespace_(), request.name());
    const v1::JobStatus* j = jobs_->Find(key);
    if (j == nullptr) {
      return Status(ErrorCode::kNotFound, "trainjob/" + JobDisplayName(key) + " not found");
    }
    PresentJob(*list.add_jobs() = *j);
    return Status::Ok();
  }
  std::vector<const v1::JobStatus*> all = jobs_->List();
  if (!request.all_namespaces()) {
    const std::string ns = NamespaceOrDefault(request.namespace_());
    std::erase_if(
        all, [&](const v1::JobStatus* j) { return NamespaceOrDefault(j->namespace_()) != ns; });
  }
  TRAINLET_ASSIGN_OR_RETURN(const size_t first, JobPageStart(all, request.continue_token()));
  size_t bytes = 0;
  size_t i = first;
  for (; i < all.size(); ++i) {
    if (request.limit() != 0 && i - first >= request.limit()) break;
    if (request.limit() != 0 && i > first && bytes >= kJobPageBytes) break;
    v1::JobStatus* j = list.add_jobs();
    *j = *all[i];
    j->clear_command();  // the spec stays with the job: get trainjobs NAME, describe
    PresentJob(*j);
    bytes += j->ByteSizeLong();
  }
  if (i < all.size()) {
    list.set_continue_token(JobPageToken(*all[i - 1]));
    list.set_remaining(static_cast<uint32_t>(all.size() - i));
  }
  return Status::Ok();
}

void OperatorService::ParkWait(const std::string& routing_id, uint64_t request_id,
                               const v1::WaitJobRequest& request, Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(
      std::min<uint32_t>(request.timeout_ms() == 0 ? 30000 : request.timeout_ms(), 3600 * 1000));
  waits_.push_back({routing_id, request_id, request, now + timeout});
}

Status OperatorService::Cordon(const v1::CordonNodeRequest& request, v1::CordonNodeResult& result) {
  auto changed = nodes_->SetSchedulable(request.node(), !request.cordon(), request.reason());
  if (!changed.ok()) return changed.status();
  result.set_node(request.node());
  result.set_changed(*changed);
  return Status::Ok();
}

bool OperatorService::CheckWait(const v1::WaitJobRequest& req, v1::WaitJobResult& result) const {
  const std::string key = JobKey(req.namespace_(), req.name());
  const v1::JobStatus* job = jobs_->Find(key);
  const std::string& cond = req.condition();
  if (job == nullptr) {
    result.set_met(cond == "Deleted");
    result.set_impossible(cond != "Deleted");
    result.set_message(result.met() ? "" : "trainjob/" + JobDisplayName(key) + " not found");
    return true;
  }
  PresentJob(*result.mutable_job() = *job);
  if (cond == "Deleted") return false;
  const JobPhase phase = PhaseOf(*job);
  if (HasCondition(*job, cond) || JobPhaseName(phase) == cond) {
    result.set_met(true);
    return true;
  }
  if (IsTerminal(phase)) {
    result.set_impossible(true);
    std::string why = job->reason();
    for (const auto& c : job->conditions()) {
      if (c.status() == "True" && !c.message().empty()) why = c.reason() + ": " + c.message();
    }
    result.set_message("trainjob/" + JobDisplayName(key) + " ended " + JobPhaseName(phase) +
                       (why.empty() ? "" : " (" + why + ")") + ", so it will never be " + cond);
    return true;
  }
  return false;
}

void OperatorService::HandleLogs(const std::string& routing_id, uint64_t request_id,
                                 const v1::LogsRequest& req, Clock::time_point now) {
  const std::string key = JobKey(req.namespace_(), req.job());
  const std::string shown = JobDisplayName(key);
  const v1::JobStatus* job = jobs_->Find(key);
  if (job == nullptr) {
    return Fail(routing_id, request_id, ErrorCode::kNotFound, "trainjob/" + shown + " not found");
  }
  if (job->attempt() == 0) {
    return Fail(routing_id, request_id, ErrorCode::kUnavailable,
                "trainjob/" + shown + " has not started yet (" + JobPhaseName(PhaseOf(*job)) +
                    (job->reason().empty() ? "" : ": " + job->reason()) + ")");
  }
  // Which worker, of which attempt, on which node (log_target.h).
  auto target = ResolveLogTarget(*job, req, shown);
  if (!target.ok()) {
    return Fail(routing_id, request_id, ErrorCode::kNotFound, target.status().message());
  }
  const uint32_t attempt = target->attempt;
  const uint32_t global = target->rank;
  const std::string& node_name = target->node;
  const NodeEntry* node = nodes_->Find(node_name);
  if (node == nullptr || node->state == NodeState::kLost) {
    return Fail(routing_id, request_id, ErrorCode::kUnavailable,
                "node " + node_name + " holding rank " + std::to_string(global) +
                    "'s log of attempt " + std::to_string(attempt) + " is not connected");
  }
  const uint64_t id = next_log_request_++;
  logs_[id] = {routing_id, request_id, target->done, attempt, now + kLogRelayTimeout};
  v1::Envelope env;
  auto* read = env.mutable_log_read();
  read->set_request_id(id);
  read->set_job(key);
  read->set_attempt(attempt);
  read->set_rank(global);
  read->set_offset(req.offset());
  read->set_max_bytes(req.max_bytes());
  agents_->SendToNode(node_name, std::move(env));
}

void OperatorService::OnLogChunk(const v1::LogChunk& chunk) {
  auto it = logs_.find(chunk.request_id());
  if (it == logs_.end()) return;  // late answer to a relay that timed out
  const PendingLog p = it->second;
  logs_.erase(it);
  if (!chunk.error().empty())
    return Fail(p.routing_id, p.request_id, ErrorCode::kNotFound, chunk.error());
  v1::OperatorResponse r;
  r.set_request_id(p.request_id);
  auto* logs = r.mutable_logs();
  logs->set_data(chunk.data());
  logs->set_next_offset(chunk.next_offset());
  logs->set_eof(chunk.eof());
  logs->set_rank_done(p.rank_done);
  logs->set_attempt(p.attempt);
  Respond(p.routing_id, std::move(r));
}

void OperatorService::Tick(Clock::time_point now) {
  if (!waits_.empty()) {
    const bool changed = jobs_->generation() != waits_checked_generation_;
    waits_checked_generation_ = jobs_->generation();
    std::vector<PendingWait> still;
    for (auto& w : waits_) {
      v1::WaitJobResult result;
      bool answer = changed && CheckWait(w.request, result);
      if (!answer && now >= w.deadline) {
        if (!CheckWait(w.request, result)) {  // also refreshes the job snapshot
          result.set_message("timed out waiting for trainjob/" +
                             JobDisplayName(JobKey(w.request.namespace_(), w.request.name())) +
                             " to be " + w.request.condition());
        }
        answer = true;
      }
      if (answer) {
        v1::OperatorResponse r;
        r.set_request_id(w.request_id);
        *r.mutable_wait_job() = std::move(result);
        Respond(w.routing_id, std::move(r));
      } else {
        still.push_back(std::move(w));
      }
    }
    waits_ = std::move(still);
  }
  for (auto it = logs_.begin(); it != logs_.end();) {
    if (now >= it->second.deadline) {
      Fail(it->second.routing_id, it->second.request_id, ErrorCode::kUnavailable,
           "the agent did not answer the log request in time");
      it = logs_.erase(it);
    } else {
      ++it;
    }
  }
}

OperatorService::Clock::time_point OperatorService::NextDeadline(Clock::time_point now) const {
  auto next = now + std::chrono::seconds(1);
  for (const auto& w : waits_) next = std::min(next, w.deadline);
  for (const auto& [id, l] : logs_) next = std::min(next, l.deadline);
  return std::max(next, now);
}

}  // namespace trainlet::coordinator
