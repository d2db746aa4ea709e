// PortReservations on real sockets on 127.0.0.1, in a port range picked away from the kernel's
// ephemeral range so the test's own connections do not interfere.
#include "agent/port_reservations.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace trainlet::agent {
namespace {

using Clock = PortReservations::Clock;
using std::chrono::milliseconds;

// A listening socket on 127.0.0.1:port, as another process's would be; -1 when it cannot bind.
int Grab(uint32_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A listening socket of another process on `family`'s `addr` (in network order for IPv4),
// bound without SO_REUSEADDR; -1 when it cannot bind (IPv6 missing, say).
int GrabOn(int family, const void* addr, uint32_t port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage s{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&s);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&a->sin_addr, addr, sizeof a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&s);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&a->sin6_addr, addr, sizeof a->sin6_addr);
    len = sizeof *a;
    const int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&s), len) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

PortReservations Make(PortRange range, milliseconds hold = milliseconds(60000)) {
  auto r = PortReservations::Create("127.0.0.1", range, hold);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(ParsePortRange, AcceptsARange) {
  auto r = ParsePortRange("20000-29999");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->low, 20000);
  EXPECT_EQ(r->high, 29999);
  EXPECT_EQ(r->size(), 10000u);
  auto one = ParsePortRange("5000-5000");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST(ParsePortRange, ErrorsNameTheKeyAndTheText) {
  for (const char* bad : {"", "20000", "abc-def", "20000-", "-5", "0-100", "1-65536", "30000-20000",
                          "20000-29999x", " 1-2"}) {
    auto r = ParsePortRange(bad, "worker_ports");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
    EXPECT_EQ(r.status().message().rfind("worker_ports: ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
  auto flag = ParsePortRange("9-1", "--worker-ports");
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("--worker-ports: LOW must not be above HIGH"),
            std::string::npos)
      << flag.status().message();
}

TEST(PortReservations, UnresolvableAddressIsInvalid) {
  auto r = PortReservations::Create("no-such-host.invalid", PortRange{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(PortReservations, HeldPortsAreBoundAndNobodyElseGetsThem) {
  auto ports = Make({23100, 23139});
  auto got = ports.Reserve("job", 1, 3, Clock::now());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ(ports.held_sockets(), 3u);
  for (uint32_t p : *got) {
    EXPECT_GE(p, 23100u);
    EXPECT_LE(p, 23139u);
    EXPECT_EQ(Grab(p), -1) << "port " << p << " is held, nobody else may bind it";
  }
  // A resent request gets the same ports, not more.
  auto again = ports.Reserve("job", 1, 3, Clock::now());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *got);
  EXPECT_EQ(ports.owned(), 3u);
}

TEST(PortReservations, NoPortIsHandedOutTwiceUnderManyReservations) {
  const PortRange range{23200, 23399};  // 200 ports
  auto ports = Make(range);
  std::set<uint32_t> seen;
  const auto now = Clock::now();
  // 60 attempts of 3 ports; every other one is handed over (sockets closed, ports still owned):
  // ownership, not the open socket, is what keeps them from being given again.
  for (uint32_t i = 0; i < 60; ++i) {
    const std::string job = "job-" + std::to_string(i % 7);
    auto got = ports.Reserve(job, i + 1, 3, now);
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    for (uint32_t p : *got) EXPECT_TRUE(seen.insert(p).second) << "port " << p << " given twice";
    if (i % 2 == 0) ASSERT_TRUE(ports.HandOver(job, i + 1).ok());
  }
  EXPECT_EQ(ports.owned(), 180u);
  EXPECT_EQ(ports.held_sockets(), 90u);
  // 20 left in the range at most: a request for more fails as a whole and holds nothing.
  auto too_many = ports.Reserve("big", 1, 25, now);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(too_many.status().message().find("no free port in 23200-23399 on 127.0.0.1"),
            std::string::npos)
      << too_many.status().message();
  EXPECT_EQ(ports.owned(), 180u);
  EXPECT_EQ(ports.held_sockets(), 90u);
  EXPECT_TRUE(ports.Ports("big", 1).empty());
}

TEST(PortReservations, PortsOfAnotherProcessAreSkipped) {
  auto ports = Make({23400, 23404});
  const int other = Grab(23400);
  ASSERT_GE(other, 0);
  auto got = ports.Reserve("job", 1, 4, Clock::now());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::set<uint32_t>(got->begin(), got->end()),
            (std::set<uint32_t>{23401, 23402, 23403, 23404}));
  EXPECT_FALSE(ports.Reserve("job", 2, 1, Clock::now()).ok());
  close(other);
}

// Issue 19, defect 10: real programs bind the wildcard (torch's TCPStore on 0.0.0.0/[::], the
// xgboost tracker on 0.0.0.0), so a port another process holds on any local address, or on a
// wildcard, must never be handed out, whatever address the agent advertises.
TEST(PortReservations, PortsHeldOnOtherOrWildcardAddressesAreSkipped) {
  const PortRange range{23800, 23807};
  const in_addr loopback{htonl(INADDR_LOOPBACK)};
  const in_addr any{htonl(INADDR_ANY)};
  const int on_loopback = GrabOn(AF_INET, &loopback, 23801);  // 127.0.0.1:P
  const int on_any = GrabOn(AF_INET, &any, 23803);            // 0.0.0.0:Q
  ASSERT_GE(on_loopback, 0);
  ASSERT_GE(on_any, 0);
  std::set<uint32_t> taken{23801, 23803};
  const int on_v6 = GrabOn(AF_INET6, &in6addr_loopback, 23805);  // [::1]:R, where IPv6 exists
  if (on_v6 >= 0) taken.insert(23805);

  auto r = PortReservations::Create("127.0.0.2", range);  // another loopback address
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PortReservations ports = std::move(r).value();
  const uint32_t free_count = range.size() - static_cast<uint32_t>(taken.size());
  auto got = ports.Reserve("job", 1, free_count, Clock::now());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (uint32_t p : *got) EXPECT_EQ(taken.count(p), 0u) << "port " << p << " is another's";
  EXPECT_FALSE(ports.Reserve("job", 2, 1, Clock::now()).ok()) << "only taken ports are left";
  // Held on the wildcards too: a program binding 0.0.0.0 (or [::]) cannot take a held port.
  for (uint32_t p : *got) {
    const int thief = GrabOn(AF_INET, &any, p);
    EXPECT_LT(thief, 0) << "port " << p << " is held, 0.0.0.0 must not bind it";
    if (thief >= 0) close(thief);
    if (on_v6 >= 0) {
      const int thief6 = GrabOn(AF_INET6, &in6addr_any, p);
      EXPECT_LT(thief6, 0) << "port " << p << " is held, [::] must not bind it";
      if (thief6 >= 0) close(thief6);
    }
  }
  // After the hand-over, a wildcard listener that took a port in between is caught.
  ASSERT_TRUE(ports.CloseHeld("job", 1).ok());
  const int late = GrabOn(AF_INET, &any, (*got)[0]);
  ASSERT_GE(late, 0);
  EXPECT_FALSE(ports.Recheck("job", 1).ok());
  close(late);
  close(on_loopback);
  close(on_any);
  if (on_v6 >= 0) close(on_v6);
}

TEST(PortReservations, ReleaseOnAttemptEndGivesThePortsBack) {
  auto ports = Make({23500, 23503});  // 4 ports
  const auto now = Clock::now();
  auto a = ports.Reserve("a", 1, 2, now);
  auto b = ports.Reserve("b", 1, 2, now);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ports.HandOver("a", 1).ok());
  EXPECT_FALSE(ports.Reserve("c", 1, 1, now).ok()) << "all four are owned";
  // The handed-over attempt ends: its ports become free for the next one.
  ports.Release("a", 1);
  EXPECT_EQ(ports.owned(), 2u);
  auto c = ports.Reserve("c", 1, 2, now);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(std::set<uint32_t>(c->begin(), c->end()), std::set<uint32_t>(a->begin(), a->end()));
  // A held attempt released closes its sockets: the port can be bound by anyone again.
  ports.Release("b", 1);
  EXPECT_EQ(ports.held_sockets(), 2u);
  for (uint32_t p : *b) {
    const int fd = Grab(p);
    EXPECT_GE(fd, 0) << "port " << p << " still held after release";
    if (fd >= 0) close(fd);
  }
  // Releasing everything of a job below an attempt, and unknown attempts, is fine.
  ports.ReleaseBelow("c", UINT32_MAX);
  ports.Release("nope", 9);
  EXPECT_EQ(ports.owned(), 0u);
  EXPECT_EQ(ports.held_sockets(), 0u);
}

TEST(PortReservations, NewerAttemptReleasesOlderOnesOfTheJobOnly) {
  auto ports = Make({23600, 23619});
  const auto now = Clock::now();
  ASSERT_TRUE(ports.Reserve("j", 1, 2, now).ok());
  ASSERT_TRUE(ports.Reserve("j", 2, 2, now).ok());
  ASSERT_TRUE(ports.Reserve("k", 1, 2, now).ok());
  ports.ReleaseBelow("j", 2);
  EXPECT_TRUE(ports.Ports("j", 1).empty());
  EXPECT_EQ(ports.Ports("j", 2).size(), 2u);
  EXPECT_EQ(ports.Ports("k", 1).size(), 2u);
  EXPECT_EQ(ports.owned(), 4u);
}

TEST(PortReservations, CollisionAfterTheSocketsCloseIsDetected) {
  auto ports = Make({23700, 23709});
  auto got = ports.Reserve("job", 3, 2, Clock::now());
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(ports.CloseHeld("job", 3).ok());
  // Another process takes the second port between the close and the ranks' start.
  const int thief = Grab((*got)[1]);
  ASSERT_GE(thief, 0);
  Status s = ports.Recheck("job", 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "port " + std::to_string((*got)[1]) +
                             " on 127.0.0.1 was taken by another process before the ranks started");
  // Still owned by the attempt until it ends: not given to another.
  auto other = ports.Reserve("other", 1, 8, Clock::now());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (uint32_t p : *other) EXPECT_TRUE(p != (*got)[0] && p != (*got)[1]);
  close(thief);
  EXPECT_TRUE(ports.Recheck("job", 3).ok());
  // A clean hand-over passes, and a resent plan's second hand-over is a no-op.
  ASSERT_TRUE(ports.Reserve("clean", 1, 0, Clock::now()).ok());
  EXPECT_TRUE(ports.HandOver("other", 1).ok());
  EXPECT_TRUE(ports.HandOver("other", 1).ok());
  EXPECT_TRUE(ports.HandOver("never-reserved", 1).ok());
}

TEST(PortReservations, HoldTimesOutAndALatePlanFails) {
  auto ports = Make({23800, 23804}, milliseconds(1000));
  const auto t0 = Clock::now();
  auto got = ports.Reserve("job", 1, 2, t0);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(ports.NextExpiry().has_value());
  EXPECT_EQ(*ports.NextExpiry(), t0 + milliseconds(1000));
  EXPECT_TRUE(ports.Expire(t0 + milliseconds(999)).empty());
  auto expired = ports.Expire(t0 + milliseconds(1000));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], (PortReservations::AttemptKey{"job", 1}));
  EXPECT_EQ(ports.owned(), 0u);
  EXPECT_EQ(ports.held_sockets(), 0u);
  Status late = ports.HandOver("job", 1);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.message().find("given back after 1000 ms without a launch plan"),
            std::string::npos)
      << late.message();
  // The remembered expiry is forgotten in time, and a fresh request reserves again.
  ports.Expire(t0 + milliseconds(20000));
  EXPECT_FALSE(ports.NextExpiry().has_value());
  auto again = ports.Reserve("job", 1, 2, t0 + milliseconds(20000));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(ports.HandOver("job", 1).ok());
  EXPECT_FALSE(ports.NextExpiry().has_value()) << "handed over ports do not expire";
}

// A journal in a fresh temporary directory, removed with the fixture.
class PortJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-port-journal-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/ports";
  }
  void TearDown() override {
    unlink(path_.c_str());
    unlink((path_ + ".tmp").c_str());
    rmdir(dir_.c_str());
  }
  PortReservations MakeJournaled(PortRange range) {
    auto r = PortReservations::Create("127.0.0.1", range, milliseconds(60000), path_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }
  std::string dir_;
  std::string path_;
};

// An agent restart (a new PortReservations on the same journal) keeps what attempts own: running
// attempts' ports are never handed out again, and attempts waiting for their plan hold theirs.
TEST_F(PortJournalTest, ARestartedAgentKeepsOwnedAndHeldPorts) {
  std::vector<uint32_t> running, waiting;
  {
    auto before = MakeJournaled({23900, 23909});
    running = before.Reserve("train", 1, 2, Clock::now()).value();
    ASSERT_TRUE(before.HandOver("train", 1).ok());
    waiting = before.Reserve("other", 3, 2, Clock::now()).value();
  }  // the agent dies: its held sockets close with it
  auto after = MakeJournaled({23900, 23909});
  auto restored = after.Restore(Clock::now());
  EXPECT_EQ(restored.size(), 2u);
  EXPECT_EQ(after.owned(), 4u);
  EXPECT_EQ(after.held_sockets(), 2u) << "the waiting attempt's ports are bound again";
  for (uint32_t p : waiting) EXPECT_EQ(Grab(p), -1) << "port " << p << " is held again";
  EXPECT_EQ(after.Ports("train", 1), running);
  // A resent ReservePorts gets the same ports; the plan then hands them over.
  EXPECT_EQ(after.Reserve("other", 3, 2, Clock::now()).value(), waiting);
  EXPECT_TRUE(after.HandOver("other", 3).ok());
  // New reservations avoid all four.
  auto fresh = after.Reserve("new", 1, 6, Clock::now());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  std::set<uint32_t> seen(fresh->begin(), fresh->end());
  for (uint32_t p : running) EXPECT_EQ(seen.count(p), 0u) << p;
  for (uint32_t p : waiting) EXPECT_EQ(seen.count(p), 0u) << p;
  EXPECT_FALSE(after.Reserve("more", 1, 1, Clock::now()).ok()) << "the range is used up";
}

TEST_F(PortJournalTest, AHeldPortTakenDuringTheRestartFailsThePlanWithTheReason) {
  std::vector<uint32_t> waiting;
  {
    auto before = MakeJournaled({23910, 23914});
    waiting = before.Reserve("train", 2, 2, Clock::now()).value();
  }
  const int thief = Grab(waiting[1]);
  ASSERT_GE(thief, 0);
  auto after = MakeJournaled({23910, 23914});
  after.Restore(Clock::now());
  EXPECT_EQ(after.held_sockets(), 0u);
  EXPECT_EQ(after.owned(), 0u);
  Status plan = after.HandOver("train", 2);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("port " + std::to_string(waiting[1]) + " was taken meanwhile"),
            std::string::npos)
      << plan.message();
  close(thief);
}

TEST_F(PortJournalTest, AttemptsThatEndedWhileTheAgentWasDownAreReleased) {
  {
    auto before = MakeJournaled({23920, 23929});
    before.Reserve("gone", 1, 2, Clock::now()).value();
    ASSERT_TRUE(before.HandOver("gone", 1).ok());
    before.Reserve("alive", 1, 2, Clock::now()).value();
    ASSERT_TRUE(before.HandOver("alive", 1).ok());
  }
  auto after = MakeJournaled({23920, 23929});
  after.Restore(Clock::now());
  EXPECT_EQ(after.owned(), 4u);
  after.ReleaseHandedOverExcept({{"alive", 1}});
  EXPECT_EQ(after.owned(), 2u);
  EXPECT_TRUE(after.Ports("gone", 1).empty());
  EXPECT_EQ(after.Ports("alive", 1).size(), 2u);
  // And the journal says so: a second restart restores only the live attempt.
  auto again = MakeJournaled({23920, 23929});
  EXPECT_EQ(again.Restore(Clock::now()), (std::vector<PortReservations::AttemptKey>{{"alive", 1}}));
}

TEST_F(PortJournalTest, UnreadableLinesAreSkipped) {
  {
    FILE* f = fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(
        "# header\n"
        "ok 1 handed 23931,23932\n"
        "nospace\n"
        "bad x handed 23933\n"
        "bad 1 maybe 23934\n"
        "outside 1 handed 80\n"
        "dup 1 handed 23931\n"
        "junk 1 handed 23935,\n"
        "extra 1 handed 23936 more\n",
        f);
    fclose(f);
  }
  auto after = MakeJournaled({23930, 23939});
  EXPECT_EQ(after.Restore(Clock::now()), (std::vector<PortReservations::AttemptKey>{{"ok", 1}}));
  EXPECT_EQ(after.owned(), 2u);
}

}  // namespace
}  // namespace trainlet::agent
