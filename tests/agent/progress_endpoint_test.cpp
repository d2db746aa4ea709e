// ProgressEndpoint over real HTTPS, with curl as the client (as a rank would post): a good post
// reaches the next ProgressReport; every refusal gets its status code; the endpoint keeps serving.
#include "agent/progress_endpoint.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

const char kBody[] =
    R"({"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 600,
        "metrics": [{"name": "loss", "value": "0.25"}], "lastUpdatedTime": "2025-01-23T10:30:45Z"}})";

class ProgressEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto creds = ProgressCredentials::LoadOrCreate(dir_.path(), {"127.0.0.1", "localhost"});
    ASSERT_TRUE(creds.ok()) << creds.status().message();
    ProgressEndpoint::Options options;
    options.host = "127.0.0.1";
    options.credentials = *creds;
    options.posts_per_rank_per_second = 5;  // a burst of 10
    options.wall_ms = [] { return int64_t{1234}; };
    options.live_ranks = [this](const std::string& job, uint32_t attempt) -> std::optional<size_t> {
      std::lock_guard lock(mu_);  // read on the loop thread, written by the test
      auto it = live_.find(job);
      if (it == live_.end() || it->second != attempt) return std::nullopt;
      return 1;
    };
    auto ep = ProgressEndpoint::Start(std::move(options));
    ASSERT_TRUE(ep.ok()) << ep.status().message();
    ep_ = std::move(ep).value();
    SetLive("train-1", 2);
    SetLive("other", 1);
  }

  void SetLive(const std::string& job, uint32_t attempt) {
    std::lock_guard lock(mu_);
    live_[job] = attempt;
  }

  std::string Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_.File(name), std::ios::binary) << content;
    return dir_.File(name);
  }

  // Runs `curl args` while a thread plays the agent's loop (unless `with_loop` is false);
  // returns curl's output (-w codes).
  std::string Curl(const std::string& args, bool with_loop = true) {
    std::atomic<bool> stop{false};
    std::thread loop([&] {
      while (!stop && with_loop) {
        pollfd p{ep_->fd(), POLLIN, 0};
        if (poll(&p, 1, 10) > 0) ep_->OnReadable();
      }
    });
    const std::string cmd = "curl -s --max-time 20 -o /dev/null -w '%{http_code}\\n' " + args;
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
      pclose(f);
    }
    stop = true;
    loop.join();
    return out;
  }

  std::string Url(const std::string& job) const {
    return ep_->url_base() + ProgressStatusPath(kProgressNamespace, job);
  }
  std::string Post(const std::string& url, const std::string& token, const std::string& body_file,
                   const std::string& extra = "", bool with_loop = true) {
    std::string auth = token.empty() ? "" : " -H 'Authorization: Bearer " + token + "'";
    return Curl("--cacert " + ep_->RankEnv("x", "").at("KUBEFLOW_TRAINER_SERVER_CA_CERT") + auth +
                    " -H 'Content-Type: application/json' --data-binary @" + body_file + " " +
                    extra + " '" + url + "'",
                with_loop);
  }
  bool LoopTold() {
    pollfd p{ep_->fd(), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }

  testing::TempDir dir_;
  std::mutex mu_;
  std::map<std::string, uint32_t> live_;
  std::unique_ptr<ProgressEndpoint> ep_;
};

TEST_F(ProgressEndpointTest, AGoodPostReachesTheNextReportOnce) {
  auto token_file = ep_->WriteTokenFile("train-1", 2);
  ASSERT_TRUE(token_file.ok()) << token_file.status().message();
  std::string token;
  std::getline(std::ifstream(*token_file), token);
  const auto env = ep_->RankEnv("train-1", *token_file);
  EXPECT_EQ(env.at("KUBEFLOW_TRAINER_SERVER_URL"),
            ep_->url_base() +
                "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/train-1/status");
  EXPECT_EQ(env.at("KUBEFLOW_TRAINER_SERVER_TOKEN"), *token_file);

  const std::string body = Write("body.json", kBody);
  EXPECT_EQ(Post(Url("train-1"), token, body), "200\n");
  auto report = ep_->TakeReport();
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->updates_size(), 1);
  const v1::JobProgress& u = report->updates(0);
  EXPECT_EQ(u.job(), "train-1");
  EXPECT_EQ(u.attempt(), 2u);
  EXPECT_EQ(u.status().progress_percentage(), 45);
  EXPECT_EQ(u.status().estimated_remaining_seconds(), 600);
  EXPECT_EQ(u.status().attempt(), 2u);
  EXPECT_EQ(u.status().last_updated_unix_ms(), 1737628245000);
  ASSERT_EQ(u.status().metrics_size(), 1);
  EXPECT_EQ(u.status().metrics(0).value(), "0.25");
  EXPECT_FALSE(ep_->TakeReport().has_value()) << "nothing new";
  // The same post again changes nothing, so it is not reported again; a new value is.
  EXPECT_EQ(Post(Url("train-1"), token, body), "200\n");
  EXPECT_FALSE(ep_->TakeReport().has_value());
  EXPECT_EQ(Post(Url("train-1"), token,
                 Write("b2.json", R"({"trainerStatus": {"progressPercentage": 50}})")),
            "200\n");
  report = ep_->TakeReport();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->updates(0).status().progress_percentage(), 50);
  EXPECT_EQ(report->updates(0).status().last_updated_unix_ms(), 1234) << "the agent's time";
}

TEST_F(ProgressEndpointTest, EveryRefusalGetsItsCodeAndTheEndpointKeepsServing) {
  const std::string good = ep_->tokens().Issue("train-1", 2);
  const std::string body = Write("body.json", kBody);
  EXPECT_EQ(Post(Url("train-1"), "", body), "401\n") << "no token";
  EXPECT_EQ(Post(Url("train-1"), "tlp1.nonsense", body), "401\n") << "a made-up token";
  EXPECT_EQ(Post(Url("train-1"), ProgressTokens(std::string(32, 'x')).Issue("train-1", 2), body),
            "401\n")
      << "another node's token";
  EXPECT_EQ(Post(Url("other"), good, body), "403\n") << "another job's URL";
  EXPECT_EQ(Post(ep_->url_base() + ProgressStatusPath("team-a", "train-1"), good, body), "403\n")
      << "another namespace";
  EXPECT_EQ(Post(Url("train-1"), ep_->tokens().Issue("train-1", 1), body), "403\n")
      << "an old attempt's token";
  EXPECT_EQ(Post(Url("train-1"), good,
                 Write("bad.json", R"({"trainerStatus": {"progressPercentage": 101}})")),
            "400\n");
  std::string many = R"({"trainerStatus": {"metrics": [)";
  for (int i = 0; i < 300; ++i) many += (i ? "," : "") + std::string(R"({"name":"m","value":"1"})");
  EXPECT_EQ(Post(Url("train-1"), good, Write("many.json", many + "]}}")), "400\n") << "300 metrics";
  EXPECT_EQ(Post(Url("train-1"), good, Write("big.json", std::string(10 << 20, ' '))), "413\n")
      << "a 10 MB body";
  EXPECT_EQ(Post(ep_->url_base() + "/elsewhere", good, body), "404\n");
  EXPECT_EQ(Curl("--cacert " + dir_.path() + "/progress/ca.crt '" + Url("train-1") + "'"), "405\n")
      << "GET";
  // Plain HTTP on the HTTPS port: no TLS handshake, no answer (curl reports 000).
  std::string plain = Url("train-1");
  plain.replace(0, 5, "http");
  EXPECT_EQ(
      Curl("-H 'Authorization: Bearer " + good + "' --data-binary @" + body + " '" + plain + "'"),
      "000\n");
  // After all that, a good post still goes through; nothing refused was taken.
  EXPECT_EQ(Post(Url("train-1"), good, body), "200\n");
  auto report = ep_->TakeReport();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->updates_size(), 1);
}

TEST_F(ProgressEndpointTest, AFloodIsCutToTheJobsRate) {
  const std::string good = ep_->tokens().Issue("train-1", 2);
  const std::string body = Write("body.json", kBody);
  std::string urls;
  for (int i = 0; i < 200; ++i) urls += " -o /dev/null '" + Url("train-1") + "'";
  const std::string codes = Post(Url("train-1"), good, body, urls);
  size_t ok = 0, limited = 0;
  std::istringstream in(codes);
  for (std::string line; std::getline(in, line);) {
    ok += line == "200";
    limited += line == "429";
  }
  EXPECT_EQ(ok + limited, 201u) << codes;
  EXPECT_GE(ok, 10u);  // the burst
  EXPECT_LE(ok, 60u);  // and no more than the rate for the seconds the flood took
  EXPECT_GE(limited, 140u);
  // Another job is not starved by the flood.
  EXPECT_EQ(Post(Url("other"), ep_->tokens().Issue("other", 1), body), "200\n");
  // The restarted-agent case: a new endpoint on the same state dir takes the same port and
  // accepts the tokens it issued before.
  const std::string url_base = ep_->url_base();
  ep_.reset();
  auto creds = ProgressCredentials::LoadOrCreate(dir_.path(), {"127.0.0.1", "localhost"});
  ASSERT_TRUE(creds.ok());
  ProgressEndpoint::Options options;
  options.host = "127.0.0.1";
  options.credentials = *creds;
  options.live_ranks = [](const std::string&, uint32_t) { return std::optional<size_t>(1); };
  auto again = ProgressEndpoint::Start(std::move(options));
  ASSERT_TRUE(again.ok()) << again.status().message();
  ep_ = std::move(again).value();
  EXPECT_EQ(ep_->url_base(), url_base);
  EXPECT_EQ(Post(Url("train-1"), good, body), "200\n");
}

// The endpoint answers on its own thread: posts go through with no loop polling it, the loop is
// told once when the first post of a batch waits (not per post), and again only after it took the
// batch. The answers are counted by status for /metrics.
TEST_F(ProgressEndpointTest, PostsAreServedWithoutTheLoopWhichIsToldOncePerBatch) {
  const std::string good = ep_->tokens().Issue("train-1", 2);
  const std::string body = Write("body.json", kBody);
  EXPECT_FALSE(LoopTold());
  EXPECT_EQ(Post(Url("train-1"), good, body, "", /*with_loop=*/false), "200\n");
  EXPECT_TRUE(LoopTold()) << "the first post of a batch wakes the loop";
  ep_->OnReadable();
  EXPECT_FALSE(LoopTold());
  EXPECT_EQ(Post(Url("train-1"), good,
                 Write("b2.json", R"({"trainerStatus": {"progressPercentage": 7}})"), "", false),
            "200\n");
  EXPECT_FALSE(LoopTold()) << "a batch is pending already: no second wake-up";
  EXPECT_TRUE(ep_->has_pending());
  auto report = ep_->TakeReport();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->updates(0).status().progress_percentage(), 7) << "the newest post";
  EXPECT_FALSE(ep_->has_pending());
  EXPECT_EQ(Post(Url("train-1"), "", body, "", false), "401\n");
  EXPECT_FALSE(LoopTold()) << "a refusal is nothing to report";
  EXPECT_EQ(Post(Url("train-1"), good, body, "", false), "200\n");
  EXPECT_TRUE(LoopTold()) << "the first post after the report";
  const auto counts = ep_->AnswerCounts();
  EXPECT_EQ(counts.at(200), 3u);
  EXPECT_EQ(counts.at(401), 1u);
}

// Started with located credentials only (as the agent starts it): nothing is made until the first
// need, then a rank's token and a post work as before.
TEST_F(ProgressEndpointTest, LocatedCredentialsAreCompletedAtTheFirstNeed) {
  testing::TempDir state;
  auto located = ProgressCredentials::Locate(state.path());
  ASSERT_TRUE(located.ok());
  ProgressEndpoint::Options options;
  options.host = "127.0.0.1";
  options.credentials = *located;
  options.hosts = {"127.0.0.1"};
  options.live_ranks = [](const std::string&, uint32_t) { return std::optional<size_t>(1); };
  auto lazy = ProgressEndpoint::Start(std::move(options));
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  ep_ = std::move(lazy).value();
  struct stat st {};
  EXPECT_NE(stat(located->cert_file.c_str(), &st), 0) << "no certificate before the first need";
  auto token_file = ep_->WriteTokenFile("train-1", 1);
  ASSERT_TRUE(token_file.ok()) << token_file.status().message();
  EXPECT_EQ(stat(located->cert_file.c_str(), &st), 0);
  std::string token;
  std::getline(std::ifstream(*token_file), token);
  EXPECT_EQ(Curl("--cacert " + located->ca_cert_file + " -H 'Authorization: Bearer " + token +
                 "' --data-binary @" + Write("body.json", kBody) + " '" + Url("train-1") + "'"),
            "200\n");
}

}  // namespace
}  // namespace trainlet::agent
