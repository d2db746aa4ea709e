#include "agent/progress_endpoint.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/progress_body.h"

namespace trainlet::agent {
namespace {

constexpr char kPathPrefix[] = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/";

// A Kubernetes Status object, as Kubeflow's status server answers a refusal.
HttpResponse Refusal(int code, const std::string& reason, const std::string& message) {
  nlohmann::json status = {{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
                           {"message", message}, {"reason", reason},   {"code", code}};
  HttpResponse r;
  r.status = code;
  r.content_type = "application/json";
  r.body = status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return r;
}

// {ns, name} of ".../namespaces/{ns}/trainjobs/{name}/status", views into `path`; nullopt for
// another path.
std::optional<std::pair<std::string_view, std::string_view>> SplitStatusPath(
    std::string_view path) {
  constexpr std::string_view prefix = kPathPrefix;
  if (path.substr(0, prefix.size()) != prefix) return std::nullopt;
  const size_t ns_end = path.find('/', prefix.size());
  if (ns_end == std::string_view::npos || path.substr(ns_end, 11) != "/trainjobs/") {
    return std::nullopt;
  }
  const size_t name_at = ns_end + 11;
  const size_t name_end = path.find('/', name_at);
  if (name_end == std::string_view::npos || path.substr(name_end) != "/status") {
    return std::nullopt;
  }
  const std::string_view ns = path.substr(prefix.size(), ns_end - prefix.size());
  const std::string_view name = path.substr(name_at, name_end - name_at);
  if (ns.empty() || name.empty()) return std::nullopt;
  return std::make_pair(ns, name);
}

std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::string ProgressStatusPath(const std::string& ns, const std::string& job) {
  return kPathPrefix + ns + "/trainjobs/" + job + "/status";
}

ProgressEndpoint::ProgressEndpoint(Options options)
    : options_(std::move(options)), limiter_(options_.posts_per_rank_per_second) {
  if (options_.credentials.complete()) tokens_.emplace(options_.credentials.token_secret);
}

ProgressEndpoint::~ProgressEndpoint() { serving_.reset(); }

Status ProgressEndpoint::CompleteCredentials() {
  if (tokens_) return Status::Ok();
  TRAINLET_RETURN_IF_ERROR(options_.credentials.Complete(options_.hosts));
  tokens_.emplace(options_.credentials.token_secret);
  return Status::Ok();
}

Result<std::unique_ptr<ProgressEndpoint>> ProgressEndpoint::Start(Options options) {
  std::unique_ptr<ProgressEndpoint> ep(new ProgressEndpoint(std::move(options)));
  const ProgressCredentials& creds = ep->options_.credentials;
  ProgressHttpsServer::Options https;
  https.host = ep->options_.host;
  https.tls_cert_file = creds.cert_file;
  https.tls_key_file = creds.key_file;
  https.max_body_bytes = 64 * 1024;  // Kubeflow's maxBodySize
  ProgressEndpoint* self = ep.get();
  if (!creds.complete()) {
    https.prepare_tls = [self] {
      std::lock_guard lock(self->mu_);
      return self->CompleteCredentials();
    };
  }
  auto handler = [self](const HttpRequest& r) { return self->Serve(r); };
  TRAINLET_ASSIGN_OR_RETURN(ep->posted_, platform::WakeEvent::Open());
  const std::string host = UrlHost(ep->options_.host);
  Result<std::unique_ptr<ProgressHttpsServer>> server = UnavailableError("not started");
  // The port of the last run first: adopted ranks still post to the URL they were given.
  if (ep->options_.port == 0 && creds.last_port != 0) {
    https.port = creds.last_port;
    server = ProgressHttpsServer::Start(https, handler);
    if (!server.ok()) {
      spdlog::warn(
          "progress endpoint: port {} of the last run is taken ({}); choosing another, "
          "so ranks adopted from that run cannot report progress",
          creds.last_port, server.status().message());
    }
  }
  if (!server.ok()) {
    https.port = ep->options_.port;
    server = ProgressHttpsServer::Start(https, handler);
  }
  if (!server.ok())
    return Status(server.status().code(), "progress endpoint: " + server.status().message());
  const uint16_t port = (*server)->port();
  ep->url_base_ = "https://" + host + ":" + std::to_string(port);
  if (auto s = creds.RememberPort(port); !s.ok()) {
    spdlog::warn("progress endpoint: {}", s.message());
  }
  auto serving =
      HttpServerThread::Start(std::move(server).value(), "trainlet-https", ep->options_.gather);
  if (!serving.ok())
    return Status(serving.status().code(), "progress endpoint: " + serving.status().message());
  ep->serving_ = std::move(serving).value();
  return ep;
}

HttpResponse ProgressEndpoint::Serve(const HttpRequest& request) {
  std::lock_guard lock(mu_);
  HttpResponse answer = Check(request);
  ++answers_[answer.status];
  return answer;
}

std::map<int, uint64_t> ProgressEndpoint::AnswerCounts() const {
  std::lock_guard lock(mu_);
  return answers_;
}

HttpResponse ProgressEndpoint::Check(const HttpRequest& request) {
  const auto target = SplitStatusPath(request.path);
  if (!target) {
    return Refusal(404, "NotFound",
                   "not found: POST " + ProgressStatusPath("{namespace}", "{name}"));
  }
  if (request.method != "POST") return Refusal(405, "MethodNotAllowed", "only POST");
  constexpr std::string_view kBearer = "Bearer ";
  if (request.authorization.compare(0, kBearer.size(), kBearer) != 0) {
    HttpResponse r = Refusal(401, "Unauthorized", "a bearer token is required");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  if (!tokens_) return Refusal(503, "ServiceUnavailable", "no progress credentials yet");
  const std::string_view token = std::string_view(request.authorization).substr(kBearer.size());
  auto known = verified_.find(token);
  if (known == verified_.end()) {
    auto claim = tokens_->Verify(std::string(token));
    if (!claim.ok()) return Refusal(401, "Unauthorized", claim.status().message());
    if (verified_.size() >= kMaxVerified) verified_.clear();
    known = verified_.emplace(std::string(token), *claim).first;
  }
  const ProgressTokenClaim& claim = known->second;
  const auto& [ns, name] = *target;
  if (ns != kProgressNamespace || name != claim.job) {
    return Refusal(
        403, "Forbidden",
        "the token is for job " + claim.job + ", not " + std::string(ns) + "/" + std::string(name));
  }
  return Accept(claim.job, claim.attempt, request);
}

HttpResponse ProgressEndpoint::Accept(const std::string& job, uint32_t attempt,
                                      const HttpRequest& request) {
  const std::optional<size_t> ranks =
      options_.live_ranks ? options_.live_ranks(job, attempt) : std::nullopt;
  if (!ranks) {
    return Refusal(
        403, "Forbidden",
        "attempt " + std::to_string(attempt) + " of " + job + " does not run on this node");
  }
  if (!limiter_.Allow(job, *ranks, options_.now())) {
    HttpResponse r = Refusal(429, "TooManyRequests", job + " posts progress too often");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  auto parsed = ParseProgressBody(request.body);
  if (!parsed.ok()) return Refusal(400, "BadRequest", parsed.status().message());
  if (parsed->has_value()) {
    v1::TrainerStatus status = std::move(**parsed);
    status.set_attempt(attempt);
    if (status.last_updated_unix_ms() == 0 && options_.wall_ms) {
      status.set_last_updated_unix_ms(options_.wall_ms());
    }
    // The first post since the last report tells the loop, which then reports on its timer.
    if (pending_.empty()) posted_->Notify();
    pending_[{job, attempt}] = std::move(status);
  }
  // Kubeflow echoes what it took.
  return HttpResponse{200, "application/json", request.body, {}};
}

std::map<std::string, std::string> ProgressEndpoint::RankEnv(const std::string& job,
                                                             const std::string& token_file) const {
  return {{"KUBEFLOW_TRAINER_SERVER_URL", url_base_ + ProgressStatusPath(kProgressNamespace, job)},
          {"KUBEFLOW_TRAINER_SERVER_CA_CERT", options_.credentials.ca_cert_file},
          {"KUBEFLOW_TRAINER_SERVER_TOKEN", token_file}};
}

Result<std::string> ProgressEndpoint::WriteTokenFile(const std::string& job, uint32_t attempt) {
  std::string token;
  {
    std::lock_guard lock(mu_);
    TRAINLET_RETURN_IF_ERROR(CompleteCredentials());
    token = tokens_->Issue(job, attempt);
  }
  const std::string dir = options_.credentials.dir + "/tokens";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  const std::string path = dir + "/" + job + ".attempt-" + std::to_string(attempt);
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "we");
  if (f == nullptr) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
  fchmod(fileno(f), 0600);
  const bool ok = fwrite(token.data(), 1, token.size(), f) == token.size();
  if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  return path;
}

void ProgressEndpoint::Forget(const std::string& job, uint32_t attempt) {
  {
    std::lock_guard lock(mu_);
    pending_.erase({job, attempt});
    limiter_.Forget(job);
  }
  last_sent_.erase({job, attempt});
  unlink((options_.credentials.dir + "/tokens/" + job + ".attempt-" + std::to_string(attempt))
             .c_str());
}

bool ProgressEndpoint::has_pending() const {
  std::lock_guard lock(mu_);
  return !pending_.empty();
}

std::optional<v1::ProgressReport> ProgressEndpoint::TakeReport() {
  std::map<std::pair<std::string, uint32_t>, v1::TrainerStatus> pending;
  {
    std::lock_guard lock(mu_);  // only the swap: serializing and comparing need no lock
    pending.swap(pending_);
  }
  v1::ProgressReport report;
  for (auto& [key, status] : pending) {
    std::string bytes = status.SerializeAsString();
    auto& last = last_sent_[key];
    if (bytes == last) continue;
    last = std::move(bytes);
    auto* u = report.add_updates();
    u->set_job(key.first);
    u->set_attempt(key.second);
    *u->mutable_status() = std::move(status);
  }
  if (report.updates_size() == 0) return std::nullopt;
  return report;
}

}  // namespace trainlet::agent
