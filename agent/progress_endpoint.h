// ProgressEndpoint: Kubeflow Trainer's progress protocol, served by this agent to its own ranks.
//
//   POST
//   https://<address>:<port>/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status
//   Authorization: Bearer <token of the rank's (job, attempt)>
//   {"trainerStatus": {...}}                                        (progress_body.h)
//
// Answers, checked in this order (errors are Kubernetes Status objects, as Kubeflow sends):
//   404 another path; 405 another method on the status path;
//   401 no bearer token, or one this node did not issue (progress_token.h);
//   403 a good token on another job's URL (or namespace), or for an attempt that no longer runs
//       here (replaced by a newer one, stopped, ended);
//   429 the job posts faster than its rate (progress_rate_limiter.h), with Retry-After;
//   400 a body that breaks Kubeflow's rules, the message naming the field;
//   200 taken: the newest post per (job, attempt) waits for the next TakeReport.
// The server (progress_https_server.h) answers 413 for a body over 64 KiB (Kubeflow's cap) and
// drops plain-HTTP clients; it keeps connections alive, so a rank that reuses its connection
// (trainlet.update_trainjob_status does) costs one TLS handshake, not one per post.
//
// Trainlet has no namespaces yet: a job's URL uses namespace "default" (kProgressNamespace).
//
// Threads: the server runs on a thread of its own (HttpServerThread): accept, TLS, parsing and
// Serve() happen there, and a post never wakes the agent's loop. The loop calls everything else
// (WriteTokenFile, RankEnv, Forget, TakeReport, has_pending, AnswerCounts, OnReadable). What both
// touch (the pending posts, the rate buckets, the answer counts, completing the credentials) is
// under one mutex, held for one request's checks or one batch's swap. The loop hears of posts
// only when the first post after a report arrives (fd() becomes readable); it then takes the
// batch on its own report timer, so a steady stream of posts wakes it about twice per batch.
// Options::live_ranks and Options::now are called on the server thread (with the mutex held).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/http_server_thread.h"
#include "agent/progress_credentials.h"
#include "agent/progress_https_server.h"
#include "agent/progress_rate_limiter.h"
#include "agent/progress_token.h"
#include "common/http/http_server.h"
#include "common/platform/wake_event.h"
#include "common/status.h"
#include "trainlet/v1/progress.pb.h"

namespace trainlet::agent {

inline constexpr char kProgressNamespace[] = "default";

// The path of a job's status URL (Kubeflow's statusserver.StatusUrl).
std::string ProgressStatusPath(const std::string& ns, const std::string& job);

class ProgressEndpoint {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string host;   // the agent's address: bound, and the host of the URL ranks get
    uint16_t port = 0;  // 0: the port served last time (credentials.last_port) if free, else any
    // Complete, or only located (ProgressCredentials::Locate): then completed at the first need
    // (a token to write, a connection to serve), for `hosts`; an idle agent touches no OpenSSL.
    ProgressCredentials credentials;
    std::vector<std::string> hosts;
    double posts_per_rank_per_second = 20;
    // The server thread's rest between wake-ups in a stream of posts (http_server_thread.h):
    // fewer wake-ups for the agent, up to this much longer for a rank's answer. 0: no rest.
    std::chrono::milliseconds gather = HttpServerThread::kDefaultGather;
    // Called on the server thread: both must be safe to call from there.
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
    std::function<int64_t()> wall_ms;  // unix ms, for posts without lastUpdatedTime
    // How many ranks (job, attempt) runs on this node; nullopt when it does not run here (never
    // started, replaced, stopping, ended): its token is refused with 403. Called on the server
    // thread: the agent answers from ProgressLiveAttempts, which its loop publishes.
    std::function<std::optional<size_t>(const std::string& job, uint32_t attempt)> live_ranks;
  };

  // Binds and serves on the server thread. Errors: the address (kExists for a port in use), the
  // TLS files, the thread.
  static Result<std::unique_ptr<ProgressEndpoint>> Start(Options options);
  // Stops and joins the server thread first: no request is being answered once it returns.
  ~ProgressEndpoint();

  // Readable once a post is pending that the loop has not been told of (the first since the last
  // TakeReport); OnReadable clears it. The loop then schedules its report (has_pending()).
  int fd() const { return posted_->fd(); }
  void OnReadable() { posted_->Drain(); }

  // One request, as the server thread answers it (public for tests that skip the network).
  HttpResponse Serve(const HttpRequest& request);

  // The env a rank of (job, attempt) gets: KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT (a file) and
  // _TOKEN (a file, as Kubeflow's projected token; the caller wrote it with WriteTokenFile).
  std::map<std::string, std::string> RankEnv(const std::string& job,
                                             const std::string& token_file) const;
  // Writes (job, attempt)'s token to a 0600 file under the credentials dir; returns its path.
  // Completes the credentials first if they are not yet (their error then).
  Result<std::string> WriteTokenFile(const std::string& job, uint32_t attempt);
  // The attempt ended here: its token file, pending post and rate bucket go.
  void Forget(const std::string& job, uint32_t attempt);

  // The posts taken since the last call, newest per (job, attempt), leaving out those equal to
  // what was last reported; nullopt when there is nothing new.
  std::optional<v1::ProgressReport> TakeReport();
  bool has_pending() const;
  // How many requests Serve answered with each HTTP status, since Start (for /metrics).
  std::map<int, uint64_t> AnswerCounts() const;

  const std::string& url_base() const { return url_base_; }  // "https://host:port"
  // Only once the credentials are complete (given so, or after a token was written); they never
  // change after that.
  const ProgressTokens& tokens() const { return tokens_.value(); }

 private:
  explicit ProgressEndpoint(Options options);
  HttpResponse Check(const HttpRequest& request);  // Serve, under mu_
  HttpResponse Accept(const std::string& job, uint32_t attempt, const HttpRequest& request);
  Status CompleteCredentials();  // once, under mu_; tokens_ then

  // Constant after Start, but for the credentials and tokens_: completed once, under mu_, by
  // whichever thread needs them first (a token to write, a connection to serve).
  Options options_;
  std::optional<ProgressTokens> tokens_;
  std::string url_base_;
  std::unique_ptr<platform::WakeEvent> posted_;
  // Shared by the loop and the server thread.
  mutable std::mutex mu_;
  ProgressRateLimiter limiter_;                                            // under mu_
  std::map<std::pair<std::string, uint32_t>, v1::TrainerStatus> pending_;  // under mu_
  std::map<int, uint64_t> answers_;                                        // under mu_
  // Under mu_: tokens verified already (a rank sends the same one with every post): an HMAC each
  // time costs more than the rest of a post. Emptied when it reaches kMaxVerified.
  static constexpr size_t kMaxVerified = 4096;
  std::map<std::string, ProgressTokenClaim, std::less<>> verified_;
  // The loop's own.
  std::map<std::pair<std::string, uint32_t>, std::string> last_sent_;  // serialized
  // Last: destroyed (stopped and joined) first, before anything its handler touches.
  std::unique_ptr<HttpServerThread> serving_;
};

}  // namespace trainlet::agent
