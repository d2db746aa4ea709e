// HttpServerThread: a server answered on its own thread, with nobody polling it from the test
// (as the agent's loop no longer does); a kept-alive connection is served again; the destructor
// stops and joins the thread promptly with connections open; the thread's stack is small and
// its signals blocked.
#include "agent/http_server_thread.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace trainlet::agent {
namespace {

struct Seen {
  std::atomic<int> requests{0};
  std::atomic<bool> other_thread{false};
  std::atomic<bool> signals_blocked{false};
  std::atomic<size_t> stack_bytes{0};
};

std::unique_ptr<HttpServerThread> StartPlain(
    Seen& seen, std::thread::id test_thread,
    std::chrono::milliseconds gather = HttpServerThread::kDefaultGather) {
  ProgressHttpsServer::Options options;
  options.host = "127.0.0.1";
  options.tls = false;
  auto server = ProgressHttpsServer::Start(options, [&seen, test_thread](const HttpRequest& r) {
    seen.other_thread = std::this_thread::get_id() != test_thread;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    seen.signals_blocked = sigismember(&mask, SIGCHLD) == 1 && sigismember(&mask, SIGTERM) == 1;
    pthread_attr_t attr;
    size_t stack = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstacksize(&attr, &stack);
      pthread_attr_destroy(&attr);
    }
    seen.stack_bytes = stack;
    ++seen.requests;
    return HttpResponse{200, "text/plain", r.path + "\n", {}};
  });
  EXPECT_TRUE(server.ok()) << server.status().message();
  if (!server.ok()) return nullptr;
  auto thread = HttpServerThread::Start(std::move(server).value(), "test-http", gather);
  EXPECT_TRUE(thread.ok()) << thread.status().message();
  return thread.ok() ? std::move(thread).value() : nullptr;
}

int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One GET on `fd`; the whole answer (head and body), or "" after 5 s without one.
std::string Get(int fd, const std::string& path) {
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size())) return "";
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    if (answer.find(path + "\n") != std::string::npos) return answer;
  }
  return answer;
}

TEST(HttpServerThreadTest, AnswersOnItsOwnThreadWithNobodyPollingIt) {
  Seen seen;
  auto serving = StartPlain(seen, std::this_thread::get_id());
  ASSERT_NE(serving, nullptr);
  ASSERT_NE(serving->port(), 0);
  const int fd = Connect(serving->port());
  ASSERT_GE(fd, 0);
  const std::string first = Get(fd, "/one");
  EXPECT_NE(first.find("HTTP/1.1 200 OK"), std::string::npos) << first;
  EXPECT_NE(Get(fd, "/two").find("/two\n"), std::string::npos) << "the same kept-alive connection";
  EXPECT_EQ(seen.requests, 2);
  EXPECT_TRUE(seen.other_thread) << "the handler ran on the server's thread";
  EXPECT_TRUE(seen.signals_blocked) << "the agent's signals must all reach its signalfd";
  EXPECT_GT(seen.stack_bytes.load(), 0u);
  EXPECT_LE(seen.stack_bytes.load(), HttpServerThread::kStackBytes);
  close(fd);
}

TEST(HttpServerThreadTest, StopsPromptlyWithAConnectionOpenAndClosesIt) {
  Seen seen;
  auto serving = StartPlain(seen, std::this_thread::get_id());
  ASSERT_NE(serving, nullptr);
  const int fd = Connect(serving->port());
  ASSERT_GE(fd, 0);
  ASSERT_NE(Get(fd, "/x").find("/x\n"), std::string::npos);
  const auto start = std::chrono::steady_clock::now();
  serving.reset();  // the connection is idle, kept alive: nothing to finish
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0) << "the server's connections close with it";
  close(fd);
}

// Eight clients each sending a request every 5 ms (as ranks posting on kept-alive connections
// do, faster): the thread rests between wake-ups in such a stream, so one wake-up answers several
// clients' requests: about 20 wake-ups for the 160 requests here. Without the rest each request
// costs a wake-up of its own but those that happen to arrive together: 46-160 on this VM.
TEST(HttpServerThreadTest, AStreamOfRequestsIsServedInFewerWakeups) {
  Seen seen;
  auto serving = StartPlain(seen, std::this_thread::get_id());
  ASSERT_NE(serving, nullptr);
  constexpr int kClients = 8, kEach = 20;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, port = serving->port()] {
      const int fd = Connect(port);
      for (int n = 0; n < kEach && fd >= 0; ++n) {
        answered += Get(fd, "/p" + std::to_string(n)).find("200 OK") != std::string::npos;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      close(fd);
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(answered, kClients * kEach);
  EXPECT_LT(serving->wakeups() * 4, static_cast<uint64_t>(kClients * kEach))
      << serving->wakeups() << " wake-ups for " << kClients * kEach << " requests";
}

// The rest is what the thread is given (config key progress_gather_ms): one client sending its
// next request as soon as it has the answer is a stream, so from its third request on each
// answer waits for the rest. With 150 ms, 6 requests take at least 4 rests; with no rest they
// take a few ms (at most a loaded VM's scheduling), and the thread still answers every one.
TEST(HttpServerThreadTest, RestsAsLongAsItIsToldInAStreamAndNotAtAllWithZero) {
  for (const auto gather : {std::chrono::milliseconds(150), std::chrono::milliseconds(0)}) {
    Seen seen;
    auto serving = StartPlain(seen, std::this_thread::get_id(), gather);
    ASSERT_NE(serving, nullptr);
    const int fd = Connect(serving->port());
    ASSERT_GE(fd, 0);
    const auto start = std::chrono::steady_clock::now();
    for (int n = 0; n < 6; ++n) {
      ASSERT_NE(Get(fd, "/s" + std::to_string(n)).find("200 OK"), std::string::npos);
    }
    const auto took = std::chrono::steady_clock::now() - start;
    close(fd);
    if (gather.count() > 0) {
      EXPECT_GE(took, 4 * gather) << "each answer in the stream waits for the rest";
    } else {
      EXPECT_LT(took, 4 * std::chrono::milliseconds(150)) << "no rest with 0";
    }
    EXPECT_EQ(seen.requests, 6);
  }
}

}  // namespace
}  // namespace trainlet::agent
