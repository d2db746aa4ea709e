#include "agent/node_attempt.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace trainlet::agent {
namespace {

std::chrono::milliseconds GraceOr(std::chrono::milliseconds grace) {
  return grace.count() != 0 ? grace : kDefaultStopGrace;
}

}  // namespace

std::optional<AttemptState> NextState(AttemptState from, AttemptTrigger trigger) {
  for (const AttemptTransition& t : kAttemptTransitions) {
    if (t.from == from && t.trigger == trigger) return t.to;
  }
  return std::nullopt;
}

const char* AttemptStateName(AttemptState state) {
  switch (state) {
    case AttemptState::kNew:
      return "New";
    case AttemptState::kPortsHeld:
      return "PortsHeld";
    case AttemptState::kLaunching:
      return "Launching";
    case AttemptState::kRunning:
      return "Running";
    case AttemptState::kStopping:
      return "Stopping";
    case AttemptState::kEnded:
      return "Ended";
  }
  return "?";
}

const char* AttemptTriggerName(AttemptTrigger trigger) {
  switch (trigger) {
    case AttemptTrigger::kPortsReserved:
      return "PortsReserved";
    case AttemptTrigger::kPlanArrived:
      return "PlanArrived";
    case AttemptTrigger::kLaunched:
      return "Launched";
    case AttemptTrigger::kAdopted:
      return "Adopted";
    case AttemptTrigger::kStopAsked:
      return "StopAsked";
    case AttemptTrigger::kReplaced:
      return "Replaced";
    case AttemptTrigger::kRanksEnded:
      return "RanksEnded";
  }
  return "?";
}

NodeAttempt::NodeAttempt(std::string job, uint32_t attempt, AttemptServices services)
    : job_(std::move(job)), attempt_(attempt), services_(services) {}

bool NodeAttempt::Apply(AttemptTrigger trigger) {
  const std::optional<AttemptState> next = NextState(state_, trigger);
  if (!next) {
    spdlog::debug("{} attempt {}: {} refused in state {}", job_, attempt_,
                  AttemptTriggerName(trigger), AttemptStateName(state_));
    return false;
  }
  state_ = *next;
  return true;
}

Result<std::vector<uint32_t>> NodeAttempt::ReservePorts(uint32_t count, Clock::time_point now) {
  if (!NextState(state_, AttemptTrigger::kPortsReserved)) {
    return InvalidError("attempt " + std::to_string(attempt_) + " of " + job_ + " is " +
                        AttemptStateName(state_) + " on this node: it reserves no ports");
  }
  auto ports = services_.ports->Reserve(job_, attempt_, count, now);
  if (ports.ok()) Apply(AttemptTrigger::kPortsReserved);
  return ports;
}

bool NodeAttempt::Adopt(std::chrono::milliseconds stop_grace, const std::vector<uint32_t>& ranks) {
  if (!Apply(AttemptTrigger::kAdopted)) return false;
  stop_grace_ = GraceOr(stop_grace);
  plan_received_ = true;
  launched_.insert(ranks.begin(), ranks.end());
  return true;
}

bool NodeAttempt::PlanArrived(std::chrono::milliseconds stop_grace) {
  if (!Apply(AttemptTrigger::kPlanArrived)) return false;
  stop_grace_ = GraceOr(stop_grace);
  plan_received_ = true;
  return true;
}

Status NodeAttempt::HandOverPorts() { return services_.ports->HandOver(job_, attempt_); }

std::map<std::string, std::string> NodeAttempt::JoinRendezvous(const std::vector<uint32_t>& ranks,
                                                               std::optional<RendezvousUser> user) {
  return services_.rendezvous->AddAttempt(job_, attempt_, ranks, user);
}

std::vector<Result<pid_t>> NodeAttempt::Launch(std::vector<WorkerLaunch> launches,
                                               const Status& blocked) {
  // A broken invariant, not an outside error: only a plan that arrived is launched.
  TRAINLET_CHECK_MSG(state_ == AttemptState::kLaunching,
                     job_ + " attempt " + std::to_string(attempt_) + ": launched in state " +
                         AttemptStateName(state_));
  std::vector<uint32_t> ranks;
  for (const WorkerLaunch& l : launches) ranks.push_back(l.rank);
  std::vector<Result<pid_t>> started =
      blocked.ok()
          ? services_.supervisor->StartStep(std::move(launches), stop_grace_)
          : std::vector<Result<pid_t>>(ranks.size(), Result<pid_t>(IoError(blocked.message())));
  launched_.insert(ranks.begin(), ranks.end());
  Apply(AttemptTrigger::kLaunched);
  return started;
}

void NodeAttempt::Stop(const std::string& reason, std::chrono::milliseconds grace,
                       Clock::time_point now, const StopWarning& warning) {
  services_.ports->Release(job_, attempt_);
  services_.rendezvous->EndAttempt(job_, attempt_, "attempt stopped: " + reason);
  services_.supervisor->Stop(job_, attempt_, grace, now, warning);
  Apply(AttemptTrigger::kStopAsked);
}

void NodeAttempt::StopRanks(std::chrono::milliseconds grace, Clock::time_point now) {
  services_.supervisor->Stop(job_, attempt_, grace, now);
  if (state_ == AttemptState::kRunning || state_ == AttemptState::kStopping) {
    Apply(AttemptTrigger::kStopAsked);  // a held port stays held: its plan may still come
  }
}

void NodeAttempt::Replace(uint32_t newer, Clock::time_point now) {
  services_.supervisor->Stop(job_, attempt_, std::chrono::milliseconds(0), now);
  services_.rendezvous->EndAttempt(job_, attempt_,
                                   "attempt " + std::to_string(attempt_) + " of " + job_ +
                                       " was replaced on this node by attempt " +
                                       std::to_string(newer));
  services_.ports->Release(job_, attempt_);
  Apply(AttemptTrigger::kReplaced);
}

void NodeAttempt::RanksEnded() {
  services_.ports->Release(job_, attempt_);
  services_.rendezvous->EndAttempt(
      job_, attempt_,
      "every rank of attempt " + std::to_string(attempt_) + " on this node has ended");
  Apply(AttemptTrigger::kRanksEnded);
}

void NodeAttempts::Attach(AttemptServices services) {
  services_ = services;
  for (auto& [name, job] : jobs_) {
    for (auto& [number, attempt] : job.attempts) attempt.services_ = services;
  }
  if (services_.rendezvous == nullptr) return;
  for (const auto& [key, what] : to_restore_) RestoreRendezvous(key.first, key.second, what);
  to_restore_.clear();
}

NodeAttempt& NodeAttempts::Get(Job& job, const std::string& name, uint32_t attempt) {
  return job.attempts.try_emplace(attempt, name, attempt, services_).first->second;
}

NodeAttempt& NodeAttempts::GetToStart(Job& job, const std::string& name, uint32_t attempt) {
  auto it = job.attempts.find(attempt);
  if (it != job.attempts.end() && (it->second.state() == AttemptState::kStopping ||
                                   it->second.state() == AttemptState::kEnded)) {
    // The job was deleted and created again under the same name: its attempts count from 1
    // again, and this is a new attempt that happens to bear an old one's number. The old one's
    // ranks, if any still stop, are the supervisor's to end.
    job.attempts.erase(it);
  }
  return Get(job, name, attempt);
}

void NodeAttempts::Forget(Job& job) {
  std::erase_if(job.attempts, [&](const auto& entry) {
    return entry.first != job.latest && entry.second.state() == AttemptState::kEnded;
  });
}

namespace {

template <typename Attempts>
bool AllEnded(const Attempts& attempts) {
  return std::all_of(attempts.begin(), attempts.end(),
                     [](const auto& a) { return a.second.state() == AttemptState::kEnded; });
}

}  // namespace

void NodeAttempts::Forget(JobMap::iterator it) {
  Forget(it->second);
  if (it->second.purged && AllEnded(it->second.attempts)) jobs_.erase(it);
}

void NodeAttempts::Purge(const std::string& job, const std::string& uid) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (!uid.empty() && !it->second.uid.empty() && uid != it->second.uid) return;  // a newer one's
  it->second.purged = true;
  Forget(it);
}

NodeAttempts::Job* NodeAttempts::Incarnation(const std::string& name, const std::string& uid,
                                             Clock::time_point now, std::string* why) {
  auto it = jobs_.find(name);
  if (it != jobs_.end() && !it->second.purged &&
      (uid.empty() || it->second.uid.empty() || uid == it->second.uid)) {
    if (!uid.empty()) it->second.uid = uid;
    return &it->second;
  }
  if (it != jobs_.end()) {
    // A deleted incarnation's. Its ranks must not run beside the new one's: stop what the
    // coordinator's delete did not (this node missed it), then wait until nothing is held.
    const bool running =
        std::any_of(it->second.attempts.begin(), it->second.attempts.end(), [](const auto& a) {
          return a.second.state() != AttemptState::kStopping &&
                 a.second.state() != AttemptState::kEnded;
        });
    if (running) Stop(name, 0, "trainjob/" + name + " was deleted", now);  // may erase it
    it = jobs_.find(name);
    if (it != jobs_.end() && !AllEnded(it->second.attempts)) {
      *why = "the ranks of a deleted trainjob/" + name + " are still stopping on this node";
      return nullptr;
    }
  }
  Job& job = jobs_[name];
  job = Job{};
  job.uid = uid;
  return &job;
}

v1::PortsReserved NodeAttempts::ReservePorts(const v1::ReservePorts& request,
                                             Clock::time_point now) {
  v1::PortsReserved answer;
  answer.set_job(request.job());
  answer.set_attempt(request.attempt());
  if (request.count() > kMaxPortsPerAttempt) {
    answer.set_error("asked for " + std::to_string(request.count()) + " ports; at most " +
                     std::to_string(kMaxPortsPerAttempt) + " per attempt");
    return answer;
  }
  std::string why;
  Job* entry = Incarnation(request.job(), request.job_uid(), now, &why);
  if (entry == nullptr) {
    answer.set_error(why);
    return answer;
  }
  Job& job = *entry;
  if (job.latest != 0 && request.attempt() < job.latest) {
    answer.set_error("attempt " + std::to_string(request.attempt()) + " is older than attempt " +
                     std::to_string(job.latest) + " of " + request.job() + " on this node");
    return answer;
  }
  NodeAttempt& attempt = GetToStart(job, request.job(), request.attempt());
  auto ports = attempt.ReservePorts(request.count(), now);
  if (ports.ok()) {
    for (uint32_t p : *ports) answer.add_ports(p);
  } else {
    answer.set_error(ports.status().message());
    if (attempt.state() == AttemptState::kNew) job.attempts.erase(request.attempt());
  }
  return answer;
}

NodeAttempt* NodeAttempts::BeginPlan(const v1::LaunchPlan& plan, Clock::time_point now,
                                     std::string* why, bool* refused) {
  *refused = false;
  Job* entry = Incarnation(plan.job(), plan.job_uid(), now, why);
  if (entry == nullptr) return nullptr;  // ignored: the coordinator sends the plan again
  Job& job = *entry;
  if (plan.attempt() < job.latest) {
    *why = "attempt " + std::to_string(job.latest) + " is newer";
    return nullptr;
  }
  if (const auto it = job.attempts.find(plan.attempt());
      it != job.attempts.end() && !NextState(it->second.state(), AttemptTrigger::kPlanArrived) &&
      it->second.state() != AttemptState::kStopping && it->second.state() != AttemptState::kEnded) {
    *refused = true;
    *why = "attempt " + std::to_string(plan.attempt()) + " of " + plan.job() + " is " +
           AttemptStateName(it->second.state()) + " on this node";
    return nullptr;
  }
  if (const auto it = job.attempts.find(plan.attempt());
      it != job.attempts.end() && it->second.state() == AttemptState::kRunning &&
      std::all_of(plan.workers().begin(), plan.workers().end(),
                  [&](const auto& w) { return it->second.Launched(w.rank()); })) {
    // The coordinator resends a plan whose arrival it did not hear of (issue 19, defect 4): a
    // second copy starts nothing, and leaves the ranks, files and rendezvous of the first alone.
    *why = "a copy of the plan of attempt " + std::to_string(plan.attempt()) +
           ", which runs here already";
    return nullptr;
  }
  // A newer attempt replaces the latest one on this node: its ranks must not run beside the new
  // ones. Older attempts were replaced or stopped before; those holding only ports give them back.
  for (auto& [number, older] : job.attempts) {
    if (number >= plan.attempt()) break;
    if (number == job.latest || older.state() == AttemptState::kPortsHeld) {
      older.Replace(plan.attempt(), now);
    }
  }
  job.latest = plan.attempt();
  // Ports promised to older attempts the table does not hold (a previous agent's) go too.
  services_.ports->ReleaseBelow(plan.job(), plan.attempt());
  NodeAttempt& attempt = GetToStart(job, plan.job(), plan.attempt());
  attempt.PlanArrived(std::chrono::milliseconds(plan.stop_grace_ms()));
  Forget(job);
  return &attempt;
}

void NodeAttempts::Stop(const std::string& job, uint32_t attempt, const std::string& reason,
                        Clock::time_point now, const StopWarning& warning) {
  const auto grace = StopGrace(job);
  auto it = jobs_.find(job);
  if (attempt != 0 && it != jobs_.end() && it->second.attempts.contains(attempt)) {
    it->second.attempts.at(attempt).Stop(reason, grace, now, warning);
    Forget(it);
    return;
  }
  // Every attempt of the job (attempt 0), or one this table does not hold: the services are
  // asked directly, since they may hold what the table never saw.
  if (attempt == 0) {
    services_.ports->ReleaseBelow(job, UINT32_MAX);
  } else {
    services_.ports->Release(job, attempt);
  }
  services_.rendezvous->EndAttempt(job, attempt, "attempt stopped: " + reason);
  services_.supervisor->Stop(job, attempt, grace, now, warning);
  if (attempt == 0 && it != jobs_.end()) {
    for (auto& [number, a] : it->second.attempts) a.Apply(AttemptTrigger::kStopAsked);
    Forget(it);
  }
}

void NodeAttempts::Warn(const std::string& job, uint32_t attempt, int signal) {
  services_.supervisor->Warn(job, attempt, signal);
}

void NodeAttempts::StopRanks(const std::string& job, Clock::time_point now,
                             std::chrono::milliseconds late) {
  const auto grace = std::max(std::chrono::milliseconds(0), StopGrace(job) - late);
  services_.supervisor->Stop(job, 0, grace, now);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (auto& [number, a] : it->second.attempts) {
    if (a.state() == AttemptState::kRunning || a.state() == AttemptState::kStopping) {
      a.Apply(AttemptTrigger::kStopAsked);
    }
  }
}

void NodeAttempts::RanksEnded(const std::string& job, uint32_t attempt) {
  auto it = jobs_.find(job);
  if (it != jobs_.end() && it->second.attempts.contains(attempt)) {
    it->second.attempts.at(attempt).RanksEnded();
    Forget(it);
    return;
  }
  services_.ports->Release(job, attempt);
  services_.rendezvous->EndAttempt(
      job, attempt, "every rank of attempt " + std::to_string(attempt) + " on this node has ended");
}

void NodeAttempts::Adopt(const std::string& job, uint32_t attempt, uint32_t stop_grace_ms,
                         const std::vector<uint32_t>& ranks, const AdoptedRendezvous& rendezvous) {
  Job& j = jobs_[job];
  j.latest = std::max(j.latest, attempt);
  Get(j, job, attempt).Adopt(std::chrono::milliseconds(stop_grace_ms), ranks);
  if (rendezvous.token.empty()) return;
  if (services_.rendezvous != nullptr) {
    RestoreRendezvous(job, attempt, rendezvous);
  } else {
    MergeAdoptedRendezvous(to_restore_[{job, attempt}], rendezvous);
  }
}

void NodeAttempts::RestoreRendezvous(const std::string& job, uint32_t attempt,
                                     const AdoptedRendezvous& rendezvous) {
  services_.rendezvous->RestoreAttempt(job, attempt, rendezvous.ranks, rendezvous.token,
                                       rendezvous.user);
}

std::vector<v1::HeldAttempt> NodeAttempts::Report(bool with_ended) const {
  std::vector<v1::HeldAttempt> out;
  for (const auto& [name, job] : jobs_) {
    for (const auto& [number, attempt] : job.attempts) {
      if (!with_ended && attempt.state() == AttemptState::kEnded) continue;
      v1::HeldAttempt& held = out.emplace_back();
      held.set_job(name);
      held.set_attempt(number);
      held.set_plan_received(attempt.plan_received());
    }
  }
  return out;
}

uint32_t NodeAttempts::latest(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.latest;
}

std::chrono::milliseconds NodeAttempts::StopGrace(const std::string& job) const {
  const NodeAttempt* a = Find(job, latest(job));
  return a != nullptr ? a->stop_grace() : kDefaultStopGrace;
}

std::vector<std::string> NodeAttempts::jobs() const {
  std::vector<std::string> out;
  for (const auto& [name, job] : jobs_) {
    if (job.latest != 0) out.push_back(name);
  }
  return out;
}

const NodeAttempt* NodeAttempts::Find(const std::string& job, uint32_t attempt) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return nullptr;
  auto a = it->second.attempts.find(attempt);
  return a == it->second.attempts.end() ? nullptr : &a->second;
}

size_t NodeAttempts::size() const {
  size_t n = 0;
  for (const auto& [name, job] : jobs_) n += job.attempts.size();
  return n;
}

}  // namespace trainlet::agent
