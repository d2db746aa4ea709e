// The agent's side of the progress endpoint (issue 15): starting it, telling its thread which
// attempts may post, and sending the batched posts to the coordinator. Agent members, on the loop.
#include <spdlog/spdlog.h>

#include "agent/agent.h"

namespace trainlet::agent {
namespace {

// Posts are batched: a rank posting every 100 ms costs the coordinator two messages a second.
constexpr std::chrono::milliseconds kProgressReportInterval{500};

}  // namespace

Status Agent::StartProgressEndpoint() {
  if (config_.progress_port < 0) return Status::Ok();
  ProgressEndpoint::Options options;  // certificate and secret made or loaded at the first need
  TRAINLET_ASSIGN_OR_RETURN(options.credentials, ProgressCredentials::Locate(config_.state_dir));
  options.hosts = {config_.address, "127.0.0.1", "localhost"};
  options.host = config_.address;
  options.port = static_cast<uint16_t>(config_.progress_port);
  options.gather = config_.progress_gather;
  // Both called on the endpoint's thread. The real Env reads the system's clocks; a test's
  // FakeEnv clock is a plain value, which a test must not move while ranks post.
  options.now = [this] { return env_.MonotonicNow(); };
  options.wall_ms = [this] { return env_.WallUnixMs(); };
  live_attempts_ = std::make_shared<ProgressLiveAttempts>();
  options.live_ranks = [live = live_attempts_](const std::string& job, uint32_t attempt) {
    return live->Find(job, attempt);
  };
  TRAINLET_ASSIGN_OR_RETURN(progress_, ProgressEndpoint::Start(std::move(options)));
  PublishLiveAttempts();  // adopted attempts may post at once
  // The endpoint counts its answers on its thread; a scrape adds what came since the last one.
  auto& posts = ops_->metrics().AddCounter("trainlet_agent_progress_posts_total",
                                           "Progress posts from ranks, by HTTP answer", {"code"});
  ops_->metrics().AddCollector([this, &posts, counted = std::map<int, uint64_t>()]() mutable {
    for (const auto& [status, n] : progress_->AnswerCounts()) {
      uint64_t& seen = counted[status];
      posts.With({std::to_string(status)}).Inc(static_cast<double>(n - seen));
      seen = n;
    }
  });
  spdlog::info("progress endpoint on {}", progress_->url_base());
  return Status::Ok();
}

void Agent::PublishLiveAttempts() {
  if (progress_ == nullptr) return;
  // Only the attempt the node runs now may report: not one replaced, stopping or ended.
  // Every loop iteration: it walks the table but copies only the live attempts' names.
  ProgressLiveAttempts::Table live;
  attempts_.ForEachLatest([&](const std::string& job, const NodeAttempt& a) {
    if (a.state() == AttemptState::kRunning || a.state() == AttemptState::kLaunching) {
      live.emplace(
          job, ProgressLiveAttempts::Live{a.attempt(), supervisor_->RunningOf(job, a.attempt())});
    }
  });
  live_attempts_->Publish(std::move(live));
}

void Agent::ForgetProgress(const std::string& job, uint32_t attempt) {
  if (progress_ == nullptr) return;
  PublishLiveAttempts();  // first: no post of the attempt is taken after its pending one goes
  progress_->Forget(job, attempt);
}

void Agent::ReportProgress(std::chrono::steady_clock::time_point now) {
  // Kept while unregistered: the newest post per attempt goes once the coordinator listens.
  if (progress_ == nullptr || now < next_progress_report_ || !link_->registered()) return;
  next_progress_report_ = now + kProgressReportInterval;
  if (auto report = progress_->TakeReport()) {
    v1::Envelope env;
    *env.mutable_progress_report() = std::move(*report);
    Send(std::move(env));
  }
}

}  // namespace trainlet::agent
