#include "agent/rank_reports.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "agent/log_tail.h"
#include "agent/step/rank_identity.h"
#include "common/logging.h"
#include "common/rendezvous/fence_message.h"

namespace trainlet::agent {

RankReports::RankReports(Deps deps) : deps_(std::move(deps)) {}

void RankReports::Started(const std::string& job, uint32_t attempt, uint32_t rank,
                          const std::string& cwd, const std::optional<RankBinding>& binding,
                          const Result<pid_t>& pid) {
  ScopedLogFields log_fields(job, rank);  // journal: TRAINLET_JOB, TRAINLET_RANK
  v1::Envelope env;
  auto* ev = env.mutable_worker_event();
  ev->set_job(job);
  ev->set_attempt(attempt);
  ev->set_rank(rank);
  ev->set_node(deps_.node);
  ev->set_unix_ms(deps_.env->WallUnixMs());
  if (pid.ok()) {
    ev->set_kind(v1::WorkerEvent::KIND_STARTED);
    deps_.ops->OnWorkerStarted();
    ev->set_pid(*pid);
    ev->set_workspace(deps_.supervisor->StepWorkspace(job, attempt));
    if (auto run_as = deps_.supervisor->RankRunAs(job, attempt, rank)) {
      ev->set_run_as(step::RankIdentity::TextOf(*run_as));  // the step resolved the same
    }
    if (binding) {
      ev->set_cpuset(binding->CpuList());
      ev->set_devices(binding->DeviceList());
      ev->set_message(deps_.cpus->Held({job, attempt}).SharedNote(deps_.node));
    }
    ev->set_cwd(cwd);
  } else {
    ev->set_kind(v1::WorkerEvent::KIND_START_FAILED);
    deps_.ops->OnWorkerStartFailed();
    ev->set_message(pid.status().message());
    spdlog::error("rank {} of {}: {}", rank, job, pid.status().message());
  }
  deps_.send_event(std::move(env));
}

void RankReports::Hold(const std::string& job, uint32_t attempt, uint32_t rank, std::string cwd,
                       std::optional<RankBinding> binding) {
  held_[{job, attempt, rank}] = Held{std::move(cwd), std::move(binding)};
}

void RankReports::CpusTaken(const std::string& job, uint32_t attempt) {
  for (v1::WorkerEvent& ev :
       SharedCpuEvents(*deps_.cpus, {job, attempt}, deps_.node, deps_.env->WallUnixMs())) {
    spdlog::info("trainjob/{} {}", ev.job(), ev.cpus_shared());
    v1::Envelope env;
    *env.mutable_worker_event() = std::move(ev);
    deps_.send_event(std::move(env));
  }
}

void RankReports::LateStarted(const LateStart& l) {
  Held h;
  if (auto it = held_.find({l.job, l.attempt, l.rank}); it != held_.end()) {
    h = std::move(it->second);
    held_.erase(it);
  }
  Started(l.job, l.attempt, l.rank, h.cwd, h.binding, Result<pid_t>(l.pid));
}

void RankReports::Exited(const WorkerExit& e) {
  held_.erase({e.job, e.attempt, e.rank});  // a held rank that never started
  if (!e.started) {
    // A held rank that never started (its dependency failed, or its step was stopped).
    Started(e.job, e.attempt, e.rank, "", std::nullopt, Result<pid_t>(InternalError(e.message)));
    return;
  }
  v1::Envelope env;
  auto* ev = env.mutable_worker_event();  // a PMIx_Abort before the exit is named in it
  deps_.rendezvous->OnRankExited(e.job, e.attempt, e.rank,
                                 rendezvous::DescribeRankExit(e.exit_code, e.signal), ev);
  ev->set_job(e.job);
  ev->set_attempt(e.attempt);
  ev->set_rank(e.rank);
  ev->set_node(deps_.node);
  ev->set_kind(v1::WorkerEvent::KIND_EXITED);
  ScopedLogFields log_fields(e.job, e.rank);
  deps_.ops->OnWorkerExited(e.exit_code, e.signal);
  ev->set_pid(e.pid);
  ev->set_exit_code(e.exit_code);
  ev->set_signal(e.signal);
  // A failed rank's last log line says why (the step's own message, when it has one, wins).
  ev->set_message(e.message.empty() && e.exit_code != 0
                      ? LastLogLine(deps_.log_path(e.job, e.attempt, e.rank))
                      : e.message);
  ev->set_unix_ms(deps_.env->WallUnixMs());
  // A rank that failed is worth a line at info; the thousands that end well are not.
  spdlog::log(e.exit_code != 0 || e.signal != 0 ? spdlog::level::info : spdlog::level::debug,
              "rank {} of {} attempt {} exited: code {} signal {}", e.rank, e.job, e.attempt,
              e.exit_code, e.signal);
  deps_.send_event(std::move(env));
}

}  // namespace trainlet::agent
