// The agent's rendezvous logic without sockets: requests go in through Handle(), replies and
// contributions come out through the functions the server was given.
#include "agent/rendezvous_server.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "common/rendezvous/snapshot_format.h"
#include "trainlet/rendezvous.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;
using Clock = RendezvousServer::Clock;
using Code = v1::RendezvousReply;

class RendezvousServerTest : public ::testing::Test {
 protected:
  RendezvousServerTest()
      : dir_(fs::temp_directory_path() / ("rdzv-server-" + std::to_string(::getpid()))),
        server_("node-b", dir_.string(),
                [this](v1::Envelope e) { sent_.push_back(std::move(e)); }) {
    fs::create_directories(dir_);
    server_.SetReplyForTest([this](const std::string& peer, v1::RendezvousReply r) {
      replies_.emplace_back(peer, std::move(r));
    });
    auto env = server_.AddAttempt("j", 1, {4, 5});
    EXPECT_EQ(env.at("TRAINLET_RENDEZVOUS_ENDPOINT"),
              "ipc://" + dir_.string() + "/rendezvous.sock");
    token_ = env.at("TRAINLET_RENDEZVOUS_TOKEN");
  }
  ~RendezvousServerTest() override { fs::remove_all(dir_); }

  v1::RendezvousRequest Request(uint32_t rank, v1::RendezvousRequest::Op op, uint64_t id) {
    v1::RendezvousRequest r;
    r.set_id(id);
    r.set_job("j");
    r.set_attempt(1);
    r.set_rank(rank);
    r.set_token(token_);
    r.set_op(op);
    return r;
  }
  void Fence(uint32_t rank, uint64_t epoch, std::map<std::string, std::string> puts, uint64_t id) {
    FenceFrom("peer-" + std::to_string(rank), rank, epoch, std::move(puts), id);
  }
  // The same, from the process whose connection is `peer`.
  void FenceFrom(const std::string& peer, uint32_t rank, uint64_t epoch,
                 std::map<std::string, std::string> puts, uint64_t id) {
    auto r = Request(rank, v1::RendezvousRequest::OP_FENCE, id);
    r.set_epoch(epoch);
    for (const auto& [k, v] : puts) {
      auto* kv = r.add_puts();
      kv->set_key(k);
      kv->set_value(v);
    }
    server_.Handle(peer, r, now_);
  }
  std::map<std::string, std::string> ContributedPuts(size_t i) const {
    std::map<std::string, std::string> puts;
    for (const auto& kv : sent_.at(i).fence_contribute().puts()) puts[kv.key()] = kv.value();
    return puts;
  }
  v1::FenceResult Result(uint64_t epoch, std::map<std::string, std::string> pairs) {
    v1::FenceResult r;
    r.set_job("j");
    r.set_attempt(1);
    r.set_epoch(epoch);
    r.set_ok(true);
    for (const auto& [k, v] : pairs) {
      auto* kv = r.add_pairs();
      kv->set_key(k);
      kv->set_value(v);
    }
    return r;
  }

  fs::path dir_;
  std::vector<v1::Envelope> sent_;
  std::vector<std::pair<std::string, v1::RendezvousReply>> replies_;
  RendezvousServer server_;
  std::string token_;
  Clock::time_point now_ = Clock::now();
};

TEST_F(RendezvousServerTest, OneContributionPerNodeThenSnapshotForEveryRank) {
  Fence(5, 1, {{"addr/5", "e"}, {"shared", "from-5"}}, 10);
  EXPECT_TRUE(sent_.empty());  // rank 4 has not joined
  Fence(4, 1, {{"addr/4", "d"}, {"shared", "from-4"}}, 11);
  ASSERT_EQ(sent_.size(), 1u);
  const auto& c = sent_[0].fence_contribute();
  EXPECT_EQ(c.job(), "j");
  EXPECT_EQ(c.attempt(), 1u);
  EXPECT_EQ(c.epoch(), 1u);
  EXPECT_EQ(c.node(), "node-b");
  EXPECT_EQ(c.ranks(), 2u);
  std::map<std::string, std::string> puts;
  for (const auto& kv : c.puts()) puts[kv.key()] = kv.value();
  // A clash between local ranks goes to the higher rank, whatever the arrival order.
  EXPECT_EQ(puts, (std::map<std::string, std::string>{
                      {"addr/4", "d"}, {"addr/5", "e"}, {"shared", "from-5"}}));
  EXPECT_TRUE(replies_.empty());

  server_.OnFenceResult(Result(1, {{"addr/0", "a"}, {"addr/4", "d"}, {"addr/5", "e"}}));
  ASSERT_EQ(replies_.size(), 2u);
  std::set<uint64_t> ids;
  for (const auto& [peer, r] : replies_) {
    EXPECT_EQ(r.code(), Code::CODE_OK);
    EXPECT_EQ(r.epoch(), 1u);
    ids.insert(r.id());
    auto snap = rendezvous::MappedSnapshot::Open(r.snapshot_path());
    ASSERT_TRUE(snap.ok()) << snap.status().message();
    EXPECT_EQ(snap->view().size(), 3u);
    EXPECT_EQ(*snap->view().Find("addr/0"), "a");
  }
  EXPECT_EQ(ids, (std::set<uint64_t>{10, 11}));
  const std::string first = replies_[0].second.snapshot_path();

  // Fence 2: the previous snapshot goes once the new one is in place.
  replies_.clear();
  Fence(4, 2, {}, 12);
  Fence(5, 2, {}, 13);
  ASSERT_EQ(sent_.size(), 2u);
  server_.OnFenceResult(Result(2, {{"addr/0", "a"}}));
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_NE(replies_[0].second.snapshot_path(), first);
  EXPECT_FALSE(fs::exists(first));
  EXPECT_TRUE(fs::exists(replies_[0].second.snapshot_path()));
}

TEST_F(RendezvousServerTest, DeniesWrongTokenUnknownRankAndAttempt) {
  auto r = Request(4, v1::RendezvousRequest::OP_FENCE, 1);
  r.set_epoch(1);
  r.set_token("nope");
  server_.Handle("p", r, now_);
  r.set_token(token_);
  r.set_rank(6);
  server_.Handle("p", r, now_);
  r.set_rank(4);
  r.set_attempt(2);
  server_.Handle("p", r, now_);
  ASSERT_EQ(replies_.size(), 3u);
  for (const auto& [peer, reply] : replies_) EXPECT_EQ(reply.code(), Code::CODE_DENIED);
  EXPECT_TRUE(sent_.empty());
  // A second attempt gets a token of its own.
  EXPECT_NE(server_.AddAttempt("j", 2, {4}).at("TRAINLET_RENDEZVOUS_TOKEN"), token_);
  EXPECT_EQ(server_.AddAttempt("j", 1, {4}).at("TRAINLET_RENDEZVOUS_TOKEN"), token_);
}

TEST_F(RendezvousServerTest, WrongEpochIsInvalid) {
  Fence(4, 2, {}, 1);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_INVALID);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(RendezvousServerTest, GetsWaitForAFenceOrTimeOut) {
  auto get = Request(4, v1::RendezvousRequest::OP_GET, 20);
  get.set_key("addr/9");
  get.set_timeout_ms(0);  // while the attempt lives
  server_.Handle("g1", get, now_);
  get.set_id(21);
  get.set_key("never");
  get.set_timeout_ms(100);
  server_.Handle("g2", get, now_);
  EXPECT_TRUE(replies_.empty());
  auto next = server_.Tick(now_);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(next->count(), 100);

  Fence(4, 1, {}, 1);
  Fence(5, 1, {}, 2);
  server_.OnFenceResult(Result(1, {{"addr/9", "nine"}}));
  ASSERT_EQ(replies_.size(), 3u);  // two fences and the first get
  EXPECT_EQ(replies_[2].first, "g1");
  EXPECT_EQ(replies_[2].second.id(), 20u);
  EXPECT_EQ(replies_[2].second.value(), "nine");

  server_.Tick(now_ + std::chrono::milliseconds(101));
  ASSERT_EQ(replies_.size(), 4u);
  EXPECT_EQ(replies_[3].second.code(), Code::CODE_TIMEOUT);
  EXPECT_FALSE(server_.Tick(now_ + std::chrono::milliseconds(200)).has_value());

  // A published key is answered at once.
  get.set_id(22);
  get.set_key("addr/9");
  server_.Handle("g3", get, now_);
  ASSERT_EQ(replies_.size(), 5u);
  EXPECT_EQ(replies_[4].second.value(), "nine");
}

TEST_F(RendezvousServerTest, FailedResultAbortsWaitersAndLaterRequests) {
  Fence(4, 1, {}, 1);
  Fence(5, 1, {}, 2);
  v1::FenceResult failed;
  failed.set_job("j");
  failed.set_attempt(1);
  failed.set_epoch(1);
  failed.set_ok(false);
  failed.set_message("rank 9 on node-c exited with signal 9 before joining fence 1");
  server_.OnFenceResult(failed);
  ASSERT_EQ(replies_.size(), 2u);
  for (const auto& [peer, r] : replies_) {
    EXPECT_EQ(r.code(), Code::CODE_ABORTED);
    EXPECT_EQ(r.message(), failed.message());
  }
  Fence(4, 2, {}, 3);
  ASSERT_EQ(replies_.size(), 3u);
  EXPECT_EQ(replies_[2].second.code(), Code::CODE_ABORTED);
}

TEST_F(RendezvousServerTest, LocalRankExitAbortsTheFenceItMissed) {
  Fence(4, 1, {}, 1);
  server_.OnRankExited("j", 1, 5, "exited with signal 9");
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_ABORTED);
  EXPECT_EQ(replies_[0].second.message(),
            "rank 5 on node-b exited with signal 9 before joining fence 1");
  EXPECT_TRUE(sent_.empty());
}

// trainlet-pmix reports a rank's PMIx_Abort before it lets the rank go: the node's fences fail
// naming the call, and the rank's exit event carries it for the coordinator's cause.
TEST_F(RendezvousServerTest, MpiAbortFailsTheFenceAndIsNamedInTheRanksExit) {
  Fence(4, 1, {}, 1);
  auto abort = Request(5, v1::RendezvousRequest::OP_ABORT, 2);
  abort.set_abort_status(7);
  abort.set_abort_message("bad input\n");
  server_.Handle("pmix", abort, now_);
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[0].first, "peer-4");
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_ABORTED);
  EXPECT_EQ(replies_[0].second.message(),
            "rank 5 on node-b called MPI_Abort (errorcode 7): bad input");
  EXPECT_EQ(replies_[1].first, "pmix");
  EXPECT_EQ(replies_[1].second.code(), Code::CODE_OK);
  // A second abort, after the rendezvous failed, is still recorded and answered OK.
  abort.set_rank(4);
  abort.set_id(3);
  server_.Handle("pmix", abort, now_);
  EXPECT_EQ(replies_.back().second.code(), Code::CODE_OK);

  v1::WorkerEvent ev;
  server_.OnRankExited("j", 1, 5, "exited with code 7", &ev);
  EXPECT_TRUE(ev.mpi_abort());
  EXPECT_EQ(ev.mpi_abort_errorcode(), 7);
  EXPECT_EQ(ev.mpi_abort_message(), "bad input");
  v1::WorkerEvent plain;
  server_.AddAttempt("j", 1, {6});
  server_.OnRankExited("j", 1, 6, "exited with code 1", &plain);
  EXPECT_FALSE(plain.mpi_abort());
  EXPECT_TRUE(sent_.empty());
}

// OP_PUBLISH goes to the coordinator at once and is answered OK; what the coordinator sends back
// (to every node) answers gets, parked ones too, without a fence.
TEST_F(RendezvousServerTest, PublishGoesOutAtOnceAndAnswersGets) {
  auto get = Request(5, v1::RendezvousRequest::OP_GET, 1);
  get.set_key("pmix.pub/svc");
  server_.Handle("getter", get, now_);
  EXPECT_TRUE(replies_.empty());  // parked
  auto pub = Request(4, v1::RendezvousRequest::OP_PUBLISH, 2);
  auto* kv = pub.add_puts();
  kv->set_key("pmix.pub/svc");
  kv->set_value("port");
  server_.Handle("pmix", pub, now_);
  ASSERT_EQ(sent_.size(), 1u);
  ASSERT_TRUE(sent_[0].has_rendezvous_publish());
  EXPECT_EQ(sent_[0].rendezvous_publish().node(), "node-b");
  EXPECT_EQ(sent_[0].rendezvous_publish().pairs(0).value(), "port");
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].first, "pmix");
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_OK);
  server_.OnCoordinatorMessage(sent_[0]);  // what the coordinator sends every node
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[1].first, "getter");
  EXPECT_EQ(replies_[1].second.value(), "port");
  // Withdrawn: a get waits again.
  v1::Envelope gone = sent_[0];
  gone.mutable_rendezvous_publish()->mutable_pairs(0)->set_value("");
  server_.OnCoordinatorMessage(gone);
  get.set_id(3);
  server_.Handle("getter", get, now_);
  EXPECT_EQ(replies_.size(), 2u);
  // Nothing to publish is refused.
  pub.clear_puts();
  server_.Handle("pmix", pub, now_);
  EXPECT_EQ(replies_.back().second.code(), Code::CODE_INVALID);
}

TEST_F(RendezvousServerTest, ExitBeforeAnyFenceAbortsTheNextOne) {
  server_.OnRankExited("j", 1, 5, "exited with code 1");
  EXPECT_TRUE(replies_.empty());
  Fence(4, 1, {}, 1);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_ABORTED);
  EXPECT_NE(replies_[0].second.message().find("rank 5 on node-b exited with code 1"),
            std::string::npos);
}

TEST_F(RendezvousServerTest, EndAttemptAnswersWaitersAndRemovesFiles) {
  Fence(4, 1, {}, 1);
  Fence(5, 1, {}, 2);
  server_.OnFenceResult(Result(1, {{"k", "v"}}));
  const std::string snap = replies_[0].second.snapshot_path();
  ASSERT_TRUE(fs::exists(snap));
  replies_.clear();
  Fence(4, 2, {}, 3);
  server_.EndAttempt("j", 0, "attempt stopped: deleted");
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_ABORTED);
  EXPECT_EQ(replies_[0].second.message(), "attempt stopped: deleted");
  EXPECT_FALSE(fs::exists(snap));
  EXPECT_EQ(server_.attempts(), 0u);
  Fence(5, 2, {}, 4);
  EXPECT_EQ(replies_.back().second.code(), Code::CODE_DENIED);
}

// Issue 19: a second process joining a fence as a rank that already joined it is refused, and
// the real rank's puts and wait are kept.
TEST_F(RendezvousServerTest, DuplicateRankIsRefusedAndTheRealRanksPutsKept) {
  FenceFrom("real", 4, 1, {{"addr/4", "10.0.0.4:29500"}}, 1);
  FenceFrom("impostor", 4, 1, {{"addr/4", "6.6.6.6:1"}}, 2);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].first, "impostor");
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_INVALID);
  EXPECT_EQ(replies_[0].second.message(),
            "fence 1: rank 4 already joined it from another process with other puts; two "
            "processes may not act as one rank");
  Fence(5, 1, {}, 3);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(ContributedPuts(0).at("addr/4"), "10.0.0.4:29500");
  server_.OnFenceResult(Result(1, {{"addr/4", "10.0.0.4:29500"}}));
  ASSERT_EQ(replies_.size(), 3u);
  std::set<std::string> answered{replies_[1].first, replies_[2].first};
  EXPECT_EQ(answered, (std::set<std::string>{"real", "peer-5"}));
}

// `trainletctl rendezvous fence` after a timeout is a new process sending the same puts again:
// it takes the wait over, and the process it replaces (normally gone) is told so.
TEST_F(RendezvousServerTest, RetryWithTheSamePutsTakesTheWaitOver) {
  FenceFrom("first-try", 4, 1, {{"addr/4", "x"}}, 1);
  FenceFrom("second-try", 4, 1, {{"addr/4", "x"}}, 1);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].first, "first-try");
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_INVALID);
  EXPECT_NE(replies_[0].second.message().find("rank 4 joined it again from another process"),
            std::string::npos)
      << replies_[0].second.message();
  Fence(5, 1, {}, 2);
  server_.OnFenceResult(Result(1, {{"addr/4", "x"}}));
  ASSERT_EQ(replies_.size(), 3u);
  EXPECT_EQ(replies_[1].first, "second-try");
  EXPECT_EQ(replies_[1].second.code(), Code::CODE_OK);
}

// A rank whose release was lost (its client reconnected across an agent restart) joins the fence
// that completed again: it gets the same release; with other puts, or an older fence, it is
// refused as before.
TEST_F(RendezvousServerTest, TheLastCompletedFenceJoinedAgainGetsItsReleaseAgain) {
  Fence(4, 1, {{"addr/4", "x"}}, 1);
  Fence(5, 1, {}, 2);
  server_.OnFenceResult(Result(1, {{"addr/4", "x"}}));
  ASSERT_EQ(replies_.size(), 2u);
  const std::string snapshot = replies_[0].second.snapshot_path();
  replies_.clear();
  Fence(4, 1, {{"addr/4", "x"}}, 3);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_OK);
  EXPECT_EQ(replies_[0].second.id(), 3u);
  EXPECT_EQ(replies_[0].second.epoch(), 1u);
  EXPECT_EQ(replies_[0].second.snapshot_path(), snapshot);
  EXPECT_TRUE(fs::exists(snapshot));
  EXPECT_EQ(sent_.size(), 1u);  // nothing contributed again
  Fence(4, 1, {{"addr/4", "other"}}, 4);
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[1].second.code(), Code::CODE_INVALID);
  // Fence 2 goes on as usual, and fence 1 is then too old to join again.
  Fence(4, 2, {}, 5);
  Fence(5, 2, {}, 6);
  server_.OnFenceResult(Result(2, {}));
  replies_.clear();
  Fence(4, 1, {{"addr/4", "x"}}, 7);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_INVALID);
}

TEST_F(RendezvousServerTest, OversizedKeysAndValuesAreRefusedNamingTheCap) {
  Fence(4, 1, {{std::string(4097, 'k'), "v"}}, 1);
  Fence(5, 1, {{"big", std::string((1u << 20) + 1, 'v')}}, 2);
  auto get = Request(4, v1::RendezvousRequest::OP_GET, 3);
  get.set_key(std::string(4097, 'k'));
  server_.Handle("g", get, now_);
  ASSERT_EQ(replies_.size(), 3u);
  for (const auto& [peer, r] : replies_) EXPECT_EQ(r.code(), Code::CODE_INVALID) << peer;
  EXPECT_NE(replies_[0].second.message().find("key of 4097 bytes, over the 4096-byte cap"),
            std::string::npos)
      << replies_[0].second.message();
  EXPECT_NE(replies_[1].second.message().find("put big: value of 1048577 bytes, over the "
                                              "1048576-byte cap"),
            std::string::npos)
      << replies_[1].second.message();
  EXPECT_NE(replies_[2].second.message().find("over the 4096-byte cap"), std::string::npos);
  EXPECT_TRUE(sent_.empty());
  // Refused requests joined nothing: the same fence can still be joined properly.
  Fence(4, 1, {{"k", "v"}}, 4);
  Fence(5, 1, {}, 5);
  EXPECT_EQ(sent_.size(), 1u);
}

TEST_F(RendezvousServerTest, ParkedGetsAreCappedPerRank) {
  auto get = Request(4, v1::RendezvousRequest::OP_GET, 0);
  get.set_timeout_ms(0);
  for (uint64_t i = 0; i < RendezvousServer::kMaxParkedGetsPerRank; ++i) {
    get.set_id(i);
    get.set_key("k" + std::to_string(i));
    server_.Handle("g", get, now_);
  }
  EXPECT_TRUE(replies_.empty());
  get.set_id(9999);
  get.set_key("one-too-many");
  server_.Handle("g", get, now_);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_INVALID);
  EXPECT_EQ(replies_[0].second.message(),
            "get one-too-many: rank 4 already has " +
                std::to_string(RendezvousServer::kMaxParkedGetsPerRank) +
                " gets waiting, the cap per rank");
  // Another rank of the attempt is not starved by rank 4.
  auto other = Request(5, v1::RendezvousRequest::OP_GET, 10000);
  other.set_key("k");
  other.set_timeout_ms(0);
  server_.Handle("h", other, now_);
  EXPECT_EQ(replies_.size(), 1u);
}

// An attempt adopted from a previous agent (RestoreAttempt): its ranks keep their token, and
// their next fence, whatever its number, is where the attempt stands here. Another step of the
// attempt (a repeated plan's) adds its ranks.
TEST_F(RendezvousServerTest, RestoredAttemptContinuesFromItsRanksNextFence) {
  server_.RestoreAttempt("j", 2, {4}, "old-token");
  server_.RestoreAttempt("j", 2, {5}, "old-token");  // another step of it: rank 5 takes part
  server_.RestoreAttempt("j", 2, {6}, "other");      // not its token: ignored
  auto fence = [&](uint32_t rank, uint64_t epoch, const std::string& token, uint64_t id) {
    auto r = Request(rank, v1::RendezvousRequest::OP_FENCE, id);
    r.set_attempt(2);
    r.set_token(token);
    r.set_epoch(epoch);
    server_.Handle("peer-" + std::to_string(rank), r, now_);
  };
  fence(4, 3, "other", 1);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].second.code(), Code::CODE_DENIED);
  fence(4, 3, "old-token", 2);
  fence(5, 3, "old-token", 3);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].fence_contribute().epoch(), 3u);
  EXPECT_EQ(sent_[0].fence_contribute().attempt(), 2u);
  fence(4, 5, "old-token", 4);  // skipping a fence is still refused once the attempt stands
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[1].second.code(), Code::CODE_INVALID);
}

// Each registration resyncs the fence state: nothing before any fence, then the unanswered
// contribution again, then the last release with its pairs (a new coordinator rebuilds from it).
TEST_F(RendezvousServerTest, ResyncCarriesTheUnansweredContributionAndTheLastRelease) {
  server_.Resync();
  EXPECT_TRUE(sent_.empty());  // no fence yet: nothing to say

  Fence(4, 1, {{"addr/4", "d"}}, 1);
  Fence(5, 1, {{"addr/5", "e"}}, 2);
  ASSERT_EQ(sent_.size(), 1u);
  server_.Resync();
  ASSERT_EQ(sent_.size(), 2u);
  const auto& again = sent_[1].fence_contribute();
  EXPECT_TRUE(again.resync());
  EXPECT_EQ(again.epoch(), 1u);
  EXPECT_EQ(again.released(), 0u);
  EXPECT_EQ(ContributedPuts(1), ContributedPuts(0));

  server_.OnFenceResult(Result(1, {{"addr/0", "a"}, {"addr/4", "d"}, {"addr/5", "e"}}));
  server_.Resync();
  ASSERT_EQ(sent_.size(), 3u);
  const auto& after = sent_[2].fence_contribute();
  EXPECT_TRUE(after.resync());
  EXPECT_EQ(after.epoch(), 0u);  // in no fence now
  EXPECT_EQ(after.released(), 1u);
  EXPECT_TRUE(after.puts().empty());
  std::map<std::string, std::string> released;
  for (const auto& kv : after.released_pairs()) released[kv.key()] = kv.value();
  EXPECT_EQ(released, (std::map<std::string, std::string>{
                          {"addr/0", "a"}, {"addr/4", "d"}, {"addr/5", "e"}}));

  // The resent contribution is answered like the first: the ranks of fence 2 are released.
  Fence(4, 2, {}, 3);
  Fence(5, 2, {}, 4);
  server_.Resync();
  ASSERT_EQ(sent_.size(), 5u);
  EXPECT_EQ(sent_[4].fence_contribute().epoch(), 2u);
  EXPECT_EQ(sent_[4].fence_contribute().released(), 1u);
  replies_.clear();
  server_.OnFenceResult(Result(2, {{"addr/0", "a"}}));
  EXPECT_EQ(replies_.size(), 2u);
}

// Ranks that run as another user than the agent (here: nobody, while the test runs as root) get
// an endpoint of their own, which only they can connect to; the agent's own stays 0600.
class RendezvousUserEndpointTest : public ::testing::Test {
 protected:
  static constexpr uid_t kNobody = 65534;

  RendezvousUserEndpointTest()
      : dir_(fs::temp_directory_path() / ("rdzv-user-" + std::to_string(::getpid()))),
        server_("node-u", dir_.string(),
                [this](v1::Envelope e) { sent_.push_back(std::move(e)); }) {
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec |
                              fs::perms::group_exec);  // 0711, as the step makes the state dir
  }
  ~RendezvousUserEndpointTest() override { fs::remove_all(dir_); }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a socket to another user";
  }

  std::string UserSocketPath() const { return dir_.string() + "/rendezvous/uid-65534.sock"; }

  // Runs `child` as nobody in a forked process while this one serves the rendezvous: every
  // contribution is answered with fence 1 holding `pairs`. The child's exit code; 124 when it
  // takes over 10 s (killed).
  int RunAsNobody(const std::function<int()>& child,
                  const std::map<std::string, std::string>& pairs) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)
        ::_exit(90);
      ::_exit(child());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    size_t answered = 0;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return 124;
      }
      std::vector<zmq_pollitem_t> items;
      server_.AddPollItems(items);
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(20));
      server_.OnPolled(items, Clock::now());
      for (; answered < sent_.size(); ++answered) {
        const auto& c = sent_[answered].fence_contribute();
        v1::FenceResult r;
        r.set_job(c.job());
        r.set_attempt(c.attempt());
        r.set_epoch(c.epoch());
        r.set_ok(true);
        for (const auto& [k, v] : pairs) {
          auto* kv = r.add_pairs();
          kv->set_key(k);
          kv->set_value(v);
        }
        server_.OnFenceResult(r);
      }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  fs::path dir_;
  zmq::context_t ctx_;
  std::vector<v1::Envelope> sent_;
  RendezvousServer server_;
};

// One fence through the C client as rank 0 of j/1, then a get of "peer" (only in the snapshot).
// 0: it read `want`; 3: the fence failed with IO within 2 s, naming `must_name` (the expected
// failure when one is given); 4: the get failed; 5: the fence failed otherwise. Why on stderr.
int FenceAndGet(const std::string& endpoint, const std::string& token, const std::string& want,
                const std::string& must_name = "") {
  trainlet_rdzv* h = nullptr;
  if (trainlet_rdzv_open_with(endpoint.c_str(), token.c_str(), "j", 1, 0, &h) != TRAINLET_RDZV_OK)
    return 2;
  trainlet_rdzv_put(h, "mine", "m", 1);
  const auto start = std::chrono::steady_clock::now();
  if (int rc = trainlet_rdzv_fence(h, 5000); rc != TRAINLET_RDZV_OK) {
    const std::string why = trainlet_rdzv_last_error(h);
    std::fprintf(stderr, "fence: %d %s\n", rc, why.c_str());
    const bool prompt = std::chrono::steady_clock::now() - start < std::chrono::seconds(2);
    return rc == TRAINLET_RDZV_IO && prompt && !must_name.empty() &&
                   why.find(must_name) != std::string::npos
               ? 3
               : 5;
  }
  char buf[64];
  size_t len = 0;
  const int rc = trainlet_rdzv_get(h, "peer", buf, sizeof buf, &len, 0);
  if (rc != TRAINLET_RDZV_OK) std::fprintf(stderr, "get: %s\n", trainlet_rdzv_last_error(h));
  trainlet_rdzv_close(h);
  return rc == TRAINLET_RDZV_OK && std::string(buf, len) == want ? 0 : 4;
}

TEST_F(RendezvousUserEndpointTest, RankOfAnotherUserFencesOnItsOwnEndpoint) {
  ASSERT_TRUE(server_.Bind(ctx_).ok());
  const auto env = server_.AddAttempt("j", 1, {0}, RendezvousUser{kNobody, kNobody});
  EXPECT_EQ(env.at("TRAINLET_RENDEZVOUS_ENDPOINT"), "ipc://" + UserSocketPath());
  struct stat st {};
  ASSERT_EQ(::stat(UserSocketPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_ / "rendezvous").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);  // searched, not listed
  ASSERT_EQ(::stat((dir_ / "rendezvous.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  const std::string token = env.at("TRAINLET_RENDEZVOUS_TOKEN");
  const std::string ep = env.at("TRAINLET_RENDEZVOUS_ENDPOINT");
  EXPECT_EQ(RunAsNobody([&] { return FenceAndGet(ep, token, "from-1"); }, {{"peer", "from-1"}}), 0);
  // The snapshot the rank mapped is its user's only.
  const fs::path snap = dir_ / "rendezvous" / "j" / "attempt-1" / "fence-1.snap";
  ASSERT_EQ(::stat(snap.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(snap.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);

  server_.EndAttempt("j", 1, "done");
  EXPECT_FALSE(fs::exists(UserSocketPath()));  // no attempt runs as nobody any more
}

TEST_F(RendezvousUserEndpointTest, RankOfAnotherUserOnTheAgentsEndpointFailsPromptly) {
  ASSERT_TRUE(server_.Bind(ctx_).ok());
  const auto env = server_.AddAttempt("j", 1, {0});  // as if the agent did not know the user
  const std::string main_path = dir_.string() + "/rendezvous.sock";
  EXPECT_EQ(RunAsNobody(
                [&] {
                  return FenceAndGet(env.at("TRAINLET_RENDEZVOUS_ENDPOINT"),
                                     env.at("TRAINLET_RENDEZVOUS_TOKEN"), "", main_path);
                },
                {}),
            3);
}

TEST_F(RendezvousUserEndpointTest, KeptWhileAnyAttemptOfTheUserRuns) {
  ASSERT_TRUE(server_.Bind(ctx_).ok());
  server_.AddAttempt("a", 1, {0}, RendezvousUser{kNobody, kNobody});
  server_.AddAttempt("b", 1, {0}, RendezvousUser{kNobody, kNobody});
  server_.EndAttempt("a", 0, "stopped");
  EXPECT_TRUE(fs::exists(UserSocketPath()));
  server_.EndAttempt("b", 1, "stopped");
  EXPECT_FALSE(fs::exists(UserSocketPath()));
  // Bound again for a later attempt of that user.
  server_.AddAttempt("c", 1, {0}, RendezvousUser{kNobody, kNobody});
  EXPECT_TRUE(fs::exists(UserSocketPath()));
}

TEST_F(RendezvousUserEndpointTest, RestoredAttemptBindsItsUsersEndpointAgain) {
  // Adopted before Bind (NodeAttempts::Attach order), as after an agent restart.
  server_.RestoreAttempt("j", 1, {0}, "tok", RendezvousUser{kNobody, kNobody});
  EXPECT_FALSE(fs::exists(UserSocketPath()));
  ASSERT_TRUE(server_.Bind(ctx_).ok());
  struct stat st {};
  ASSERT_EQ(::stat(UserSocketPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(RunAsNobody([&] { return FenceAndGet("ipc://" + UserSocketPath(), "tok", "p"); },
                        {{"peer", "p"}}),
            0);
}

}  // namespace
}  // namespace trainlet::agent
