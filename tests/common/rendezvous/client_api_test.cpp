// The C API against a real agent-side server on an ipc socket, with a one-node fence table in
// place of the coordinator: what a rank sees, including timeouts, denial and aborts.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "agent/rendezvous_server.h"
#include "coordinator/fence_table.h"
#include "trainlet/rendezvous.h"

namespace trainlet {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kRanks = 8;

// The server's loop on its own thread; Post() runs a function on it.
class LocalAgent {
 public:
  // token: "" for a fresh attempt; else a restarted agent adopting the attempt's ranks, which
  // keep the token they hold (RendezvousServer::RestoreAttempt).
  explicit LocalAgent(const fs::path& dir, const std::string& token = "")
      : fences_([](const std::string&, uint32_t) -> std::optional<std::vector<std::string>> {
          return std::vector<std::string>{"node-a"};
        }),
        server_("node-a", dir.string(), [this](v1::Envelope e) {
          auto out = e.has_rendezvous_publish()
                         ? fences_.OnPublish("node-a", e.rendezvous_publish())
                         : fences_.OnContribute("node-a", e.fence_contribute(),
                                                agent::RendezvousServer::Clock::now());
          for (auto& s : out.sends) server_.OnCoordinatorMessage(s.envelope);
        }) {
    EXPECT_TRUE(server_.Bind(ctx_).ok());
    std::vector<uint32_t> ranks;
    for (uint32_t r = 0; r < kRanks; ++r) ranks.push_back(r);
    if (token.empty()) {
      env_ = server_.AddAttempt("job", 1, ranks);
    } else {
      server_.RestoreAttempt("job", 1, ranks, token);
      env_ = {{"TRAINLET_RENDEZVOUS_ENDPOINT", server_.endpoint()},
              {"TRAINLET_RENDEZVOUS_TOKEN", token}};
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~LocalAgent() {
    stop_ = true;
    thread_.join();
  }
  void Post(std::function<void(agent::RendezvousServer&)> fn) {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(fn));
  }
  const std::string& endpoint() const { return env_.at("TRAINLET_RENDEZVOUS_ENDPOINT"); }
  const std::string& token() const { return env_.at("TRAINLET_RENDEZVOUS_TOKEN"); }

 private:
  void Loop() {
    while (!stop_) {
      std::vector<std::function<void(agent::RendezvousServer&)>> tasks;
      {
        std::lock_guard lock(mu_);
        tasks.swap(tasks_);
      }
      for (auto& t : tasks) t(server_);
      std::vector<zmq_pollitem_t> items;
      server_.AddPollItems(items);
      zmq_poll(items.data(), static_cast<int>(items.size()), 5);
      const auto now = agent::RendezvousServer::Clock::now();
      server_.OnPolled(items, now);
      server_.Tick(now);
    }
  }

  zmq::context_t ctx_;
  coordinator::FenceTable fences_;
  agent::RendezvousServer server_;
  std::map<std::string, std::string> env_;
  std::mutex mu_;
  std::vector<std::function<void(agent::RendezvousServer&)>> tasks_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ClientApiTest : public ::testing::Test {
 protected:
  ClientApiTest() : dir_(fs::temp_directory_path() / ("rdzv-api-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    agent_ = std::make_unique<LocalAgent>(dir_);
    for (uint32_t r = 0; r < kRanks; ++r) handles_.push_back(Open(r));
  }
  ~ClientApiTest() override {
    for (auto* h : handles_) trainlet_rdzv_close(h);
    agent_.reset();
    fs::remove_all(dir_);
  }
  trainlet_rdzv* Open(uint32_t rank, const std::string& token = "") {
    trainlet_rdzv* h = nullptr;
    EXPECT_EQ(trainlet_rdzv_open_with(agent_->endpoint().c_str(),
                                      (token.empty() ? agent_->token() : token).c_str(), "job", 1,
                                      rank, &h),
              TRAINLET_RDZV_OK);
    return h;
  }
  static std::string Get(trainlet_rdzv* h, const std::string& key, int timeout_ms, int* rc) {
    char buf[256];
    size_t len = 0;
    *rc = trainlet_rdzv_get(h, key.c_str(), buf, sizeof buf, &len, timeout_ms);
    return *rc == TRAINLET_RDZV_OK ? std::string(buf, len) : "";
  }

  fs::path dir_;
  std::unique_ptr<LocalAgent> agent_;
  std::vector<trainlet_rdzv*> handles_;
};

TEST_F(ClientApiTest, PutFenceGetAllFromOneThread) {
  for (uint32_t r = 0; r < kRanks; ++r) {
    const std::string v = "10.0.0." + std::to_string(r) + ":29500";
    ASSERT_EQ(
        trainlet_rdzv_put(handles_[r], ("addr/" + std::to_string(r)).c_str(), v.data(), v.size()),
        TRAINLET_RDZV_OK);
  }
  for (auto* h : handles_) ASSERT_EQ(trainlet_rdzv_fence_start(h), TRAINLET_RDZV_OK);
  for (auto* h : handles_) {
    ASSERT_EQ(trainlet_rdzv_fence_finish(h, 10000), TRAINLET_RDZV_OK)
        << trainlet_rdzv_last_error(h);
  }
  for (auto* h : handles_) {
    EXPECT_EQ(trainlet_rdzv_epoch(h), 1u);
    for (uint32_t r = 0; r < kRanks; ++r) {
      int rc = 0;
      // timeout 0: a memory read of the snapshot or NOT_FOUND, never a round trip.
      EXPECT_EQ(Get(h, "addr/" + std::to_string(r), 0, &rc),
                "10.0.0." + std::to_string(r) + ":29500");
      EXPECT_EQ(rc, TRAINLET_RDZV_OK);
    }
    size_t n = 0;
    ASSERT_EQ(trainlet_rdzv_count(h, &n), TRAINLET_RDZV_OK);
    EXPECT_EQ(n, kRanks);
    const char* key = nullptr;
    size_t key_len = 0, value_len = 0;
    const void* value = nullptr;
    ASSERT_EQ(trainlet_rdzv_entry(h, 0, &key, &key_len, &value, &value_len), TRAINLET_RDZV_OK);
    EXPECT_EQ(std::string(key, key_len), "addr/0");
    EXPECT_EQ(trainlet_rdzv_entry(h, n, &key, &key_len, &value, &value_len), TRAINLET_RDZV_INVALID);
  }
  int rc = 0;
  Get(handles_[0], "missing", 0, &rc);
  EXPECT_EQ(rc, TRAINLET_RDZV_NOT_FOUND);
  Get(handles_[0], "missing", 100, &rc);
  EXPECT_EQ(rc, TRAINLET_RDZV_TIMEOUT);
  char small[2];
  size_t len = 0;
  EXPECT_EQ(trainlet_rdzv_get(handles_[0], "addr/1", small, sizeof small, &len, 0),
            TRAINLET_RDZV_TOO_SMALL);
  EXPECT_EQ(len, 14u);  // "10.0.0.1:29500"
}

// trainlet_rdzv_connect ahead of the first fence (trainlet-pmix does, while its ranks start):
// the fence then needs no connection of its own, and works as on a handle never connected.
TEST_F(ClientApiTest, HandlesConnectedAheadFenceAsOthers) {
  for (uint32_t r = 0; r < kRanks; r += 2) {
    ASSERT_EQ(trainlet_rdzv_connect(handles_[r]), TRAINLET_RDZV_OK);
    ASSERT_EQ(trainlet_rdzv_connect(handles_[r]), TRAINLET_RDZV_OK);  // a second time: nothing
  }
  for (uint32_t r = 0; r < kRanks; ++r) {
    const std::string v = std::to_string(r);
    ASSERT_EQ(trainlet_rdzv_put(handles_[r], ("k/" + v).c_str(), v.data(), v.size()),
              TRAINLET_RDZV_OK);
  }
  for (auto* h : handles_) ASSERT_EQ(trainlet_rdzv_fence_start(h), TRAINLET_RDZV_OK);
  for (auto* h : handles_) {
    ASSERT_EQ(trainlet_rdzv_fence_finish(h, 10000), TRAINLET_RDZV_OK)
        << trainlet_rdzv_last_error(h);
  }
  int rc = 0;
  EXPECT_EQ(Get(handles_[0], "k/7", 0, &rc), "7");
  EXPECT_EQ(Get(handles_[7], "k/0", 0, &rc), "0");
}

// trainlet_rdzv_fd: a caller's own event loop (trainlet-pmix's is libpmix's) waits for fence
// replies with poll(2) on each handle's descriptor, taking them with fence_finish(h, 0); no call
// blocks, and the fence completes on every handle. IO before a handle is connected.
TEST_F(ClientApiTest, AFenceCompletesOnAnEventLoopOfTheCallers) {
  int fd = -1;
  EXPECT_EQ(trainlet_rdzv_fd(handles_[0], &fd), TRAINLET_RDZV_IO);
  EXPECT_EQ(trainlet_rdzv_fd(handles_[0], nullptr), TRAINLET_RDZV_INVALID);
  for (uint32_t r = 0; r < kRanks; ++r) {
    const std::string v = std::to_string(r);
    ASSERT_EQ(trainlet_rdzv_put(handles_[r], ("ev/" + v).c_str(), v.data(), v.size()),
              TRAINLET_RDZV_OK);
  }
  std::vector<bool> done(kRanks, false);
  for (auto* h : handles_) ASSERT_EQ(trainlet_rdzv_fence_start(h), TRAINLET_RDZV_OK);
  // Once after fence_start, as the contract asks: the reply cannot be there yet.
  for (auto* h : handles_) EXPECT_EQ(trainlet_rdzv_fence_finish(h, 0), TRAINLET_RDZV_TIMEOUT);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t left = kRanks;
  int wakeups = 0;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < kRanks; ++i) {
      if (done[i]) continue;
      ASSERT_EQ(trainlet_rdzv_fd(handles_[i], &fd), TRAINLET_RDZV_OK);
      fds.push_back({fd, POLLIN, 0});
      which.push_back(i);
    }
    ASSERT_GT(::poll(fds.data(), fds.size(), 1000), 0) << "no descriptor became readable";
    ++wakeups;
    for (size_t j = 0; j < fds.size(); ++j) {
      if (!(fds[j].revents & POLLIN)) continue;
      const int rc = trainlet_rdzv_fence_finish(handles_[which[j]], 0);
      if (rc == TRAINLET_RDZV_TIMEOUT) continue;  // a signal with no reply: rearmed
      ASSERT_EQ(rc, TRAINLET_RDZV_OK) << trainlet_rdzv_last_error(handles_[which[j]]);
      done[which[j]] = true;
      --left;
    }
  }
  EXPECT_EQ(left, 0u) << "after " << wakeups << " wake-ups";
  int rc = 0;
  EXPECT_EQ(Get(handles_[3], "ev/6", 0, &rc), "6");
}

TEST_F(ClientApiTest, BlockingGetIsAnsweredByALaterFence) {
  trainlet_rdzv* getter = Open(0);
  std::string got;
  int get_rc = -1;
  std::thread waiter([&] { got = Get(getter, "late", 10000, &get_rc); });
  ASSERT_EQ(trainlet_rdzv_put(handles_[7], "late", "value", 5), TRAINLET_RDZV_OK);
  for (auto* h : handles_) ASSERT_EQ(trainlet_rdzv_fence_start(h), TRAINLET_RDZV_OK);
  for (auto* h : handles_) ASSERT_EQ(trainlet_rdzv_fence_finish(h, 10000), TRAINLET_RDZV_OK);
  waiter.join();
  EXPECT_EQ(get_rc, TRAINLET_RDZV_OK) << trainlet_rdzv_last_error(getter);
  EXPECT_EQ(got, "value");
  trainlet_rdzv_close(getter);
}

TEST_F(ClientApiTest, ARankThatDiesAbortsTheOthersFence) {
  for (uint32_t r = 0; r + 1 < kRanks; ++r)
    ASSERT_EQ(trainlet_rdzv_fence_start(handles_[r]), TRAINLET_RDZV_OK);
  EXPECT_EQ(trainlet_rdzv_fence_finish(handles_[0], 100), TRAINLET_RDZV_TIMEOUT);
  agent_->Post(
      [](agent::RendezvousServer& s) { s.OnRankExited("job", 1, 7, "exited with signal 9"); });
  for (uint32_t r = 0; r + 1 < kRanks; ++r) {
    EXPECT_EQ(trainlet_rdzv_fence_finish(handles_[r], 10000), TRAINLET_RDZV_ABORTED);
    EXPECT_STREQ(trainlet_rdzv_last_error(handles_[r]),
                 "rank 7 on node-a exited with signal 9 before joining fence 1");
  }
  // Aborted for good.
  EXPECT_EQ(trainlet_rdzv_fence(handles_[0], 1000), TRAINLET_RDZV_ABORTED);
  int rc = 0;
  Get(handles_[1], "x", 1000, &rc);
  EXPECT_EQ(rc, TRAINLET_RDZV_ABORTED);
}

// The agent is killed while ranks wait in a fence it had taken, and a new one adopts the attempt
// (binding a new socket file): each waiting rank sends its fence again, unasked, and the fence
// completes with every rank's puts.
TEST_F(ClientApiTest, AFenceTheOldAgentTookIsSentAgainToTheNewOne) {
  for (uint32_t r = 0; r + 1 < kRanks; ++r) {
    const std::string v = "v" + std::to_string(r);
    ASSERT_EQ(trainlet_rdzv_put(handles_[r], ("k/" + std::to_string(r)).c_str(), v.data(), 2),
              TRAINLET_RDZV_OK);
    ASSERT_EQ(trainlet_rdzv_fence_start(handles_[r]), TRAINLET_RDZV_OK);
  }
  EXPECT_EQ(trainlet_rdzv_fence_finish(handles_[0], 100), TRAINLET_RDZV_TIMEOUT);
  const std::string token = agent_->token();
  agent_.reset();  // gone, with what it had gathered
  agent_ = std::make_unique<LocalAgent>(dir_, token);
  ASSERT_EQ(trainlet_rdzv_fence_start(handles_[kRanks - 1]), TRAINLET_RDZV_OK);
  // Each rank waits in its own thread, as ranks do: each resends from within its own wait.
  std::vector<int> rcs(kRanks, -1);
  std::vector<std::thread> waiters;
  for (uint32_t r = 0; r < kRanks; ++r)
    waiters.emplace_back([&, r] { rcs[r] = trainlet_rdzv_fence_finish(handles_[r], 10000); });
  for (auto& w : waiters) w.join();
  for (uint32_t r = 0; r < kRanks; ++r)
    EXPECT_EQ(rcs[r], TRAINLET_RDZV_OK) << r << ": " << trainlet_rdzv_last_error(handles_[r]);
  int rc = 0;
  EXPECT_EQ(Get(handles_[kRanks - 1], "k/3", 0, &rc), "v3");
  EXPECT_EQ(rc, TRAINLET_RDZV_OK);
}

// trainlet_rdzv_abort: the agent records the rank's abort and fails the node's fence naming it.
TEST_F(ClientApiTest, AbortFailsTheFenceNamingMpiAbort) {
  ASSERT_EQ(trainlet_rdzv_fence_start(handles_[0]), TRAINLET_RDZV_OK);
  EXPECT_EQ(trainlet_rdzv_abort(handles_[3], 7, "bad input", 5000), TRAINLET_RDZV_OK)
      << trainlet_rdzv_last_error(handles_[3]);
  EXPECT_EQ(trainlet_rdzv_fence_finish(handles_[0], 5000), TRAINLET_RDZV_ABORTED);
  EXPECT_STREQ(trainlet_rdzv_last_error(handles_[0]),
               "rank 3 on node-a called MPI_Abort (errorcode 7): bad input");
}

// Publish: another rank's get sees the key at once, without a fence; a waiting get is answered
// when it comes; an empty value withdraws it.
TEST_F(ClientApiTest, PublishedKeysAreSeenWithoutAFence) {
  trainlet_rdzv* getter = Open(5);
  std::string got;
  int get_rc = -1;
  std::thread waiter([&] { got = Get(getter, "svc", 10000, &get_rc); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(trainlet_rdzv_publish(handles_[0], "svc", "port-1", 6, 5000), TRAINLET_RDZV_OK)
      << trainlet_rdzv_last_error(handles_[0]);
  waiter.join();
  EXPECT_EQ(get_rc, TRAINLET_RDZV_OK) << trainlet_rdzv_last_error(getter);
  EXPECT_EQ(got, "port-1");
  int rc = 0;
  EXPECT_EQ(Get(handles_[3], "svc", 1000, &rc), "port-1");
  ASSERT_EQ(trainlet_rdzv_publish(handles_[0], "svc", nullptr, 0, 5000), TRAINLET_RDZV_OK);
  Get(handles_[3], "svc", 200, &rc);
  EXPECT_EQ(rc, TRAINLET_RDZV_TIMEOUT);
  EXPECT_EQ(trainlet_rdzv_publish(handles_[0], "", "x", 1, 5000), TRAINLET_RDZV_INVALID);
  trainlet_rdzv_close(getter);
}

TEST_F(ClientApiTest, ErrorsSayWhy) {
  trainlet_rdzv* bad = Open(0, "wrong-token");
  EXPECT_EQ(trainlet_rdzv_fence(bad, 5000), TRAINLET_RDZV_DENIED);
  EXPECT_NE(std::string(trainlet_rdzv_last_error(bad)).find("with this token"), std::string::npos);
  trainlet_rdzv_close(bad);

  trainlet_rdzv* h = nullptr;
  ASSERT_EQ(trainlet_rdzv_open_with(("ipc://" + (dir_ / "nothing.sock").string()).c_str(), "t",
                                    "job", 1, 0, &h),
            TRAINLET_RDZV_OK);
  EXPECT_EQ(trainlet_rdzv_connect(h), TRAINLET_RDZV_IO);
  EXPECT_NE(std::string(trainlet_rdzv_last_error(h)).find("nothing.sock"), std::string::npos);
  EXPECT_EQ(trainlet_rdzv_fence(h, 100), TRAINLET_RDZV_IO);
  EXPECT_NE(std::string(trainlet_rdzv_last_error(h)).find("nothing.sock"), std::string::npos);
  EXPECT_EQ(trainlet_rdzv_connect(nullptr), TRAINLET_RDZV_INVALID);
  EXPECT_EQ(trainlet_rdzv_put(h, "", "v", 1), TRAINLET_RDZV_INVALID);
  const std::string long_key(TRAINLET_RDZV_MAX_KEY + 1, 'k');
  EXPECT_EQ(trainlet_rdzv_put(h, long_key.c_str(), "v", 1), TRAINLET_RDZV_INVALID);
  EXPECT_EQ(trainlet_rdzv_fence_finish(h, 0), TRAINLET_RDZV_INVALID);
  EXPECT_EQ(trainlet_rdzv_count(h, nullptr), TRAINLET_RDZV_INVALID);
  trainlet_rdzv_close(h);

  ::unsetenv("TRAINLET_RENDEZVOUS_ENDPOINT");
  EXPECT_EQ(trainlet_rdzv_open(&h), TRAINLET_RDZV_INVALID);
  EXPECT_NE(std::string(trainlet_rdzv_last_error(h)).find("TRAINLET_RENDEZVOUS_ENDPOINT"),
            std::string::npos);
  trainlet_rdzv_close(h);
  EXPECT_STREQ(trainlet_rdzv_code_name(TRAINLET_RDZV_ABORTED), "ABORTED");
  trainlet_rdzv_close(nullptr);
}

}  // namespace
}  // namespace trainlet
