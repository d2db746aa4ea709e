#include "trainletctl/logs_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "trainletctl/command_support.h"
#include "trainletctl/coordinator_client.h"
#include "trainletctl/log_workers.h"
#include "trainletctl/output_writer.h"
#include "trainletctl/state_text.h"

namespace trainlet::cli {
namespace {

using namespace std::chrono_literals;

// One worker's log as `logs` reads it: `--step S --rank i` asks for S's i-th (the coordinator
// maps it); the others ask for a global rank. Several streams prefix their lines with the worker.
struct LogStream {
  uint64_t offset = 0;
  std::string partial;
  bool done = false;
  std::string label;       // "rank 3", "dataset-initializer 0"
  std::string step;        // LogsRequest.step
  bool job_ended = false;  // seen ended: a rank with no log on the next read never started
};

// The job's status, as `get` shows it.
Result<v1::JobStatus> JobNamed(CoordinatorClient& client, const CommonFlags& f,
                               const std::string& job) {
  v1::OperatorRequest req;
  req.mutable_get_jobs()->set_name(job);
  req.mutable_get_jobs()->set_namespace_(f.ns);
  TRAINLET_ASSIGN_OR_RETURN(v1::OperatorResponse resp, client.Call(req));
  if (resp.jobs().jobs_size() == 0) return NotFoundError("trainjob/" + job + " not found");
  return resp.jobs().jobs(0);
}

// The streams `logs` reads, by rank: the one asked for, or every worker (of `step`) of the
// attempt read (log_workers.h). `attempt` is resolved here when --previous asked for it.
Result<std::map<uint32_t, LogStream>> LogStreams(CoordinatorClient& client, const CommonFlags& f,
                                                 const std::string& job, int rank,
                                                 const std::string& step, bool previous,
                                                 uint32_t& attempt) {
  std::map<uint32_t, LogStream> streams;
  if (rank >= 0 && !previous) {
    streams[static_cast<uint32_t>(rank)].step = step;
    return streams;
  }
  TRAINLET_ASSIGN_OR_RETURN(const v1::JobStatus status, JobNamed(client, f, job));
  if (previous) {
    TRAINLET_ASSIGN_OR_RETURN(attempt, PreviousAttempt(status, job));
  }
  if (rank >= 0) {
    streams[static_cast<uint32_t>(rank)].step = step;
    return streams;
  }
  TRAINLET_ASSIGN_OR_RETURN(std::vector<LogWorker> workers, LogWorkers(status, attempt, step));
  for (const LogWorker& w : workers) streams[w.rank].label = w.label;
  return streams;
}

bool Ended(const v1::JobStatus& job) {
  return job.job_phase() == v1::JOB_PHASE_SUCCEEDED || job.job_phase() == v1::JOB_PHASE_FAILED;
}

// -f on a job that has no ranks yet: waits until it has (queued, waiting for nodes, suspended),
// saying on stderr what it waits for whenever that changes. A job that ends without starting is
// an error, with its reason.
Status WaitForStart(CoordinatorClient& client, const CommonFlags& f, const std::string& job) {
  std::string said;
  while (true) {
    TRAINLET_ASSIGN_OR_RETURN(v1::JobStatus status, JobNamed(client, f, job));
    if (status.attempt() > 0 && status.ranks_size() > 0) return Status::Ok();
    const std::string state =
        PhaseText(status) + (status.reason().empty() ? "" : ": " + ReasonText(status));
    if (Ended(status)) {
      return UnavailableError("trainjob/" + job + " ended without starting (" + state + ")");
    }
    if (state != said) {
      std::cerr << "waiting for trainjob/" << job << " to start (" << state << ")\n";
      said = state;
    }
    std::this_thread::sleep_for(500ms);
  }
}

bool Active(const v1::RankStatus& r) {
  return r.rank_state() == v1::RANK_STATE_PENDING || r.rank_state() == v1::RANK_STATE_RUNNING;
}

// -f on every worker, once each of them has ended: the job's next attempt to follow, or 0 when
// there is none (the job ended or is gone). A restart, a backoff, a suspension or a wait for nodes
// is waited through, saying on stderr what the job waits for. A rank of `attempt` that the job's
// status still shows running after 5 s (another replicated job's worker, which `logs` does not
// read) ends the follow, as before.
Result<uint32_t> NextAttempt(CoordinatorClient& client, const CommonFlags& f,
                             const std::string& job, uint32_t attempt) {
  const auto patience = std::chrono::steady_clock::now() + 5s;
  std::string said;
  while (true) {
    Result<v1::JobStatus> status = JobNamed(client, f, job);
    if (!status.ok() && status.status().code() == ErrorCode::kNotFound) return 0u;
    TRAINLET_RETURN_IF_ERROR(status.status());
    if (Ended(*status)) return 0u;
    if (status->attempt() > attempt && status->ranks_size() > 0) return status->attempt();
    const auto& ranks = status->ranks();
    if (std::any_of(ranks.begin(), ranks.end(), Active) &&
        std::chrono::steady_clock::now() > patience) {
      return 0u;
    }
    const std::string state =
        PhaseText(*status) + (status->reason().empty() ? "" : ": " + ReasonText(*status));
    if (state != said && !std::any_of(ranks.begin(), ranks.end(), Active)) {
      std::cerr << "trainjob/" << job << ": attempt " << attempt
                << " has ended; waiting for the next one (" << state << ")\n";
      said = state;
    }
    std::this_thread::sleep_for(100ms);
  }
}

// The agent's answer for a rank it has not started yet (agent.cpp OnLogRead): not the
// coordinator's refusal of a rank or step the job does not have, which is final.
bool NotStartedYet(const Status& s) {
  return s.code() == ErrorCode::kNotFound && s.message().rfind("no log for rank ", 0) == 0;
}

}  // namespace

namespace {

// Reads `streams` of `attempt` (0: the current one, then the one the first answer names) until
// each is done: 0, or the exit code of an error (said on stderr).
int ReadStreams(CoordinatorClient& client, const CommonFlags& f, const std::string& job,
                bool prefix, bool follow, uint32_t& attempt,
                std::map<uint32_t, LogStream>& streams) {
  // Straight to fd 1, never through std::cout, which drops output after a failed write and
  // still exits 0 (output_writer.h).
  std::string out;
  while (true) {
    bool progressed = false;
    bool unstarted = false;  // a rank read had no log yet
    out.clear();
    for (auto& [r, s] : streams) {
      if (s.done) continue;
      v1::OperatorRequest req;
      auto* l = req.mutable_logs();
      l->set_job(job);
      l->set_namespace_(f.ns);
      l->set_rank(r);
      l->set_step(s.step);
      l->set_offset(s.offset);
      l->set_attempt(attempt);
      l->set_max_bytes(256 << 10);
      auto resp = client.Call(req);
      if (follow && !resp.ok() && NotStartedYet(resp.status())) {
        // Placed, not started yet: waited for while the job runs (asked below, once a round).
        // Read once more after the job has ended, since the rank may have run and ended
        // between two reads; no log then, and it never started.
        s.done = s.job_ended;
        unstarted = true;
        continue;
      }
      if (!resp.ok()) return PrintError(resp.status().message());
      const auto& chunk = resp->logs();
      // The attempt read is the one the first answer names: a restart while following does not
      // mix the next attempt's log into this one's offsets.
      if (attempt == 0) attempt = chunk.attempt();
      s.offset = chunk.next_offset();
      const std::string& data = chunk.data();
      if (!data.empty()) progressed = true;
      if (!prefix) {
        out += data;
      } else {
        s.partial += data;
        size_t start = 0;
        for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
          out += "[" + s.label + "] " + s.partial.substr(start, nl - start + 1);
        }
        s.partial.erase(0, start);
      }
      const bool finished = chunk.eof() && (!follow || chunk.rank_done());
      if (finished) {
        if (prefix && !s.partial.empty()) out += "[" + s.label + "] " + s.partial + "\n";
        s.done = true;
      } else if (!chunk.eof()) {
        progressed = true;  // more is there right now: ask again at once
      }
    }
    if (unstarted) {
      auto now = JobNamed(client, f, job);
      if (!now.ok()) return PrintError(now.status().message());
      if (Ended(*now)) {
        for (auto& [r, s] : streams) s.job_ended = true;
        progressed = true;  // the last reads at once
      }
    }
    bool broken_pipe = false;
    if (Status w = WriteAll(STDOUT_FILENO, out, &broken_pipe); !w.ok()) {
      if (broken_pipe) return 141;  // the reader left (`| head`): as a shell's SIGPIPE death
      return PrintError("cannot write trainjob/" + job +
                        "'s log to standard output: " + w.message());
    }
    if (std::all_of(streams.begin(), streams.end(), [](const auto& s) { return s.second.done; })) {
      return 0;
    }
    if (!progressed) std::this_thread::sleep_for(200ms);
  }
}

}  // namespace

int CmdLogs(const CommonFlags& f, const std::string& job, int rank, bool follow, uint32_t attempt,
            const std::string& step, bool previous) {
  if (NamedAcrossNamespaces(f, job)) return 1;
  if (previous && attempt != 0) return PrintError("--previous and --attempt name an attempt each");
  auto client = ConnectCoordinator(f);
  if (!client.ok()) return PrintError(client.status().message());
  // -f on the job's workers, no attempt named: its attempts one after another, to the job's end.
  const bool every_attempt = follow && !previous && attempt == 0 && rank < 0 && step.empty();
  if (follow && !previous && attempt == 0) {
    if (Status s = WaitForStart(**client, f, job); !s.ok()) return PrintError(s.message());
  }
  while (true) {
    auto found = LogStreams(**client, f, job, rank, step, previous, attempt);
    if (!found.ok()) return PrintError(found.status().message());
    if (int rc = ReadStreams(**client, f, job, rank < 0, follow, attempt, *found);
        rc != 0 || !every_attempt) {
      return rc;
    }
    Result<uint32_t> next = NextAttempt(**client, f, job, attempt);
    if (!next.ok()) return PrintError(next.status().message());
    if (*next == 0) return 0;
    std::cerr << "trainjob/" << job << ": following attempt " << *next << "\n";
    attempt = 0;  // the current one: the next, read as the first answer names it
  }
}

}  // namespace trainlet::cli
