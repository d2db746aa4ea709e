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
// Threads: none of its own. The server reads, parses and answers on the agent's loop (fd(),
// OnReadable()); everything in this class runs there. No locks here.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/progress_credentials.h"
#include "agent/progress_https_server.h"
#include "agent/progress_rate_limiter.h"
#include "agent/progress_token.h"
#include "common/http/http_server.h"
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
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
    std::function<int64_t()> wall_ms;  // unix ms, for posts without lastUpdatedTime
    // How many ranks (job, attempt) runs on this node; nullopt when it does not run here (never
    // started, replaced, stopping, ended): its token is refused with 403.
    std::function<std::optional<size_t>(const std::string& job, uint32_t attempt)> live_ranks;
    std::function<void(int status)> answered;  // each answer's HTTP status (metrics); optional
  };

  // Binds and serves. Errors: the address (kExists for a port in use), the TLS files.
  static Result<std::unique_ptr<ProgressEndpoint>> Start(Options options);

  // Readable while requests wait for the loop; call OnReadable then.
  int fd() const { return server_->fd(); }
  void OnReadable() { server_->OnReadable(); }

  // One request, as the loop answers it (public for tests that skip the network).
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
  bool has_pending() const { return !pending_.empty(); }

  const std::string& url_base() const { return url_base_; }  // "https://host:port"
  // Only once the credentials are complete (given so, or after a token was written).
  const ProgressTokens& tokens() const { return tokens_.value(); }

 private:
  explicit ProgressEndpoint(Options options);
  HttpResponse Accept(const std::string& job, uint32_t attempt, const HttpRequest& request);
  Status CompleteCredentials();  // once; tokens_ then

  // Constant after Start, but for the credentials and tokens_, completed once on the loop.
  Options options_;
  std::optional<ProgressTokens> tokens_;
  std::string url_base_;
  std::unique_ptr<ProgressHttpsServer> server_;
  // Owned by the loop.
  ProgressRateLimiter limiter_;
  // Tokens verified already (a rank sends the same one with every post): an HMAC each time costs
  // more than the rest of a post. Emptied when it reaches kMaxVerified.
  static constexpr size_t kMaxVerified = 4096;
  std::map<std::string, ProgressTokenClaim, std::less<>> verified_;
  std::map<std::pair<std::string, uint32_t>, v1::TrainerStatus> pending_;
  std::map<std::pair<std::string, uint32_t>, std::string> last_sent_;  // serialized
};

}  // namespace trainlet::agent
