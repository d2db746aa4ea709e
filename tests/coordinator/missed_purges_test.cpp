// MissedPurges (issue 19, defect 9): a node away when a delete completes gets the job's PurgeJob
// when it registers again, and only for jobs this coordinator deleted. Over JobController and
// the SQLite store of controller_fixture.h, and alone over a NodeRegistry.
#include "coordinator/missed_purges.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "controller_fixture.h"
#include "coordinator/job_controller.h"
#include "coordinator/missed_purges_tombstone.h"
#include "coordinator/sqlite_job_store.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using testing::JobYaml;
using testing::RecordingSink;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;

std::vector<std::pair<std::string, std::string>> Purges(const RecordingSink& sink) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [node, env] : sink.sent) {
    if (env.has_purge_job()) out.emplace_back(node, env.purge_job().job());
  }
  return out;
}

class MissedPurgesTest : public ControllerFixture {};

TEST_F(MissedPurgesTest, ANodeAwayAtTheDeleteIsPurgedWhenItRegisters) {
  RunHelloThenLoseN2();
  sink_.sent.clear();
  // Forced: gone at once, n2 away. Today's main sent n2 a PurgeJob it never got, and nothing more.
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 11000, "", /*force=*/true).ok());
  ASSERT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_EQ(Purges(sink_), (std::vector<std::pair<std::string, std::string>>{{"n1", "hello"}}));

  // n1 registering again is sent nothing more; n2 is.
  sink_.sent.clear();
  controller_->ReconcileNode("n1", {}, kT0 + 12000);
  EXPECT_TRUE(Purges(sink_).empty());
  v1::NodeInfo info = registry_.Find("n2")->info;
  ASSERT_TRUE(registry_.Register(info, "rid-n2", "key-n2", Clock::now(), kT0 + 20000).ok());
  controller_->ReconcileNode("n2", {}, kT0 + 20000);
  EXPECT_EQ(Purges(sink_), (std::vector<std::pair<std::string, std::string>>{{"n2", "hello"}}));
  // Once.
  sink_.sent.clear();
  controller_->ReconcileNode("n2", {}, kT0 + 21000);
  EXPECT_TRUE(Purges(sink_).empty());
}

// A coordinator restarted between the delete and n2's return still purges n2, with the deleted
// incarnation's UID: a job applied again under the name (a new UID) keeps its data there. On
// today's main the tombstone was in memory only and the restarted coordinator sent nothing.
TEST_F(MissedPurgesTest, ATombstoneOutlivesACoordinatorRestart) {
  RunHelloThenLoseN2();
  const std::string old_uid = JobOrDie("hello").uid();
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 11000, "", /*force=*/true).ok());
  ASSERT_EQ(controller_->Find("hello"), nullptr);
  MakeController();                 // kill -9 and start again: only the store remains
  ApplyOk(JobYaml("hello", 1, 1));  // the name again, placed on n1 or n3 while n2 is away
  const std::string new_uid = JobOrDie("hello").uid();
  ASSERT_NE(new_uid, old_uid);
  sink_.sent.clear();
  v1::NodeInfo info = registry_.Find("n2")->info;
  ASSERT_TRUE(registry_.Register(info, "rid-n2", "key-n2", Clock::now(), kT0 + 20000).ok());
  controller_->ReconcileNode("n2", {}, kT0 + 20000);
  std::vector<std::string> uids;
  for (const auto& [node, env] : sink_.sent) {
    if (env.has_purge_job() && node == "n2") uids.push_back(env.purge_job().uid());
  }
  EXPECT_EQ(uids, std::vector<std::string>{old_uid});
  // Sent once, and gone from the store: another restart sends nothing.
  MakeController();
  sink_.sent.clear();
  controller_->ReconcileNode("n2", {}, kT0 + 21000);
  EXPECT_TRUE(Purges(sink_).empty());
  auto left = store_->ListClusterValues(kPurgeTombstonePrefix);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

// Issue 19: every incarnation of a job has a UID, stored with it, sent in its plans and purges,
// and new when the name is applied again after a delete.
TEST_F(MissedPurgesTest, EveryIncarnationHasItsOwnUid) {
  ApplyOk(JobYaml("hello", 1, 1));
  const std::string uid = JobOrDie("hello").uid();
  EXPECT_EQ(uid.size(), 32u);
  ASSERT_FALSE(sink_.Plans().empty());
  for (const auto& [node, plan] : sink_.Plans()) EXPECT_EQ(plan.job_uid(), uid);
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();  // a coordinator restart keeps it
  EXPECT_EQ(JobOrDie("hello").uid(), uid);
  ReportAll("hello", kStarted, kT0 + 10);
  sink_.sent.clear();
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 20).ok());
  ReportAll("hello", v1::WorkerEvent::KIND_EXITED, kT0 + 30, 0, 15);
  ASSERT_EQ(controller_->Find("hello"), nullptr);
  bool purged = false;
  for (const auto& [node, env] : sink_.sent) {
    if (!env.has_purge_job()) continue;
    purged = true;
    EXPECT_EQ(env.purge_job().uid(), uid);
  }
  EXPECT_TRUE(purged);
  ApplyOk(JobYaml("hello", 1, 1));
  EXPECT_EQ(JobOrDie("hello").uid().size(), 32u);
  EXPECT_NE(JobOrDie("hello").uid(), uid);
}

TEST(MissedPurges, RemembersOnlyAwayNodesAndForgetsAfterTheRetention) {
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  v1::NodeInfo info;
  info.set_name("up");
  info.set_slots(1);
  ASSERT_TRUE(nodes.Register(info, "rid", "key", NodeRegistry::Clock::now(), 1).ok());
  RecordingSink sink;
  AgentCommands agents(&sink);
  MissedPurges missed(&nodes, &agents);
  ASSERT_TRUE(missed.Purge("j", "uid-j", {"up", "down"}, 1000).ok());
  EXPECT_EQ(Purges(sink), (std::vector<std::pair<std::string, std::string>>{{"up", "j"}}));
  EXPECT_EQ(missed.size(), 1u);
  EXPECT_TRUE(missed.OnRegistered("up", 2000).empty());
  ASSERT_TRUE(missed.Purge("k", "", {"down"}, 3000).ok());
  // Past the retention, "j"'s entry is gone; "k"'s is not yet.
  EXPECT_EQ(missed.OnRegistered("down", 1000 + MissedPurges::kRetentionMs + 1),
            std::vector<std::string>{"k"});
  EXPECT_EQ(missed.size(), 0u);
}

// Issue 18: the shared directory is one for all nodes, so exactly one node's PurgeJob says
// shared_dir: the first connected node that ran the job, in name order.
std::vector<std::string> SharedOwners(const RecordingSink& sink) {
  std::vector<std::string> out;
  for (const auto& [node, env] : sink.sent) {
    if (env.has_purge_job() && env.purge_job().shared_dir()) out.push_back(node);
  }
  return out;
}

TEST(MissedPurges, OneConnectedNodeOwnsTheSharedDirectorysPurge) {
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  for (const char* n : {"up-b", "up-a"}) {
    v1::NodeInfo info;
    info.set_name(n);
    info.set_slots(1);
    ASSERT_TRUE(nodes
                    .Register(info, std::string("rid-") + n, std::string("key-") + n,
                              NodeRegistry::Clock::now(), 1)
                    .ok());
  }
  RecordingSink sink;
  AgentCommands agents(&sink);
  MissedPurges missed(&nodes, &agents);
  ASSERT_TRUE(missed.Purge("j", "uid-j", {"up-b", "down", "up-a"}, 1000, /*shared=*/true).ok());
  EXPECT_EQ(SharedOwners(sink), std::vector<std::string>{"up-a"});
  EXPECT_EQ(Purges(sink).size(), 2u);
  sink.sent.clear();
  EXPECT_EQ(missed.OnRegistered("down", 2000), std::vector<std::string>{"j"});
  EXPECT_TRUE(SharedOwners(sink).empty());  // up-a had it
  // A job that did not run in the shared directory: no node is told to purge it.
  sink.sent.clear();
  ASSERT_TRUE(missed.Purge("k", "uid-k", {"up-a", "up-b"}, 3000).ok());
  EXPECT_TRUE(SharedOwners(sink).empty());
}

// Every node that shares the directory is Lost at the delete: the first to come back purges it,
// and only that one.
TEST(MissedPurges, WhenEveryNodeIsAwayTheFirstToRegisterOwnsTheSharedPurge) {
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  RecordingSink sink;
  AgentCommands agents(&sink);
  MissedPurges missed(&nodes, &agents);
  ASSERT_TRUE(missed.Purge("j", "uid-j", {"a", "b", "c"}, 1000, /*shared=*/true).ok());
  EXPECT_TRUE(sink.sent.empty());
  missed.OnRegistered("b", 2000);
  EXPECT_EQ(SharedOwners(sink), std::vector<std::string>{"b"});
  missed.OnRegistered("a", 3000);
  missed.OnRegistered("c", 4000);
  EXPECT_EQ(SharedOwners(sink), std::vector<std::string>{"b"});
  EXPECT_EQ(Purges(sink).size(), 3u);
}

// Which node purges the shared directory, when every node of the job was away, is in the store
// too: a coordinator restarted before any came back, and again after the first, still has
// exactly one node purge it. On today's main the choice was in memory only.
TEST(MissedPurges, TheSharedPurgesOwnerOutlivesRestarts) {
  char tmpl[] = "/tmp/trainlet-missed-purges-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto store = SqliteJobStore::Open(root + "/state");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  RecordingSink sink;
  AgentCommands agents(&sink);
  {
    MissedPurges missed(&nodes, &agents, store->get());
    ASSERT_TRUE(missed.Purge("j", "uid-j", {"a", "b", "c"}, 1000, /*shared=*/true).ok());
    EXPECT_TRUE(sink.sent.empty());
  }
  {
    MissedPurges restarted(&nodes, &agents, store->get());
    ASSERT_TRUE(restarted.Load().ok());
    EXPECT_EQ(restarted.size(), 3u);
    EXPECT_EQ(restarted.OnRegistered("b", 2000), std::vector<std::string>{"j"});
  }
  MissedPurges again(&nodes, &agents, store->get());
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.size(), 2u);
  again.OnRegistered("a", 3000);
  again.OnRegistered("c", 4000);
  EXPECT_EQ(SharedOwners(sink), std::vector<std::string>{"b"});
  EXPECT_EQ(Purges(sink).size(), 3u);
  for (const auto& [node, env] : sink.sent) EXPECT_EQ(env.purge_job().uid(), "uid-j");
  EXPECT_TRUE((*store)->ListClusterValues(kPurgeTombstonePrefix)->empty());
  store->reset();
  std::filesystem::remove_all(root);
}

// Past the retention a tombstone leaves the store too; one the store cannot decode is dropped
// at load without stopping the others.
TEST(MissedPurges, ExpiredAndUnreadableTombstonesLeaveTheStore) {
  char tmpl[] = "/tmp/trainlet-missed-purges-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto store = SqliteJobStore::Open(root + "/state");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  RecordingSink sink;
  AgentCommands agents(&sink);
  ASSERT_TRUE((*store)->PutClusterValue("missed-purge/n/bad", "garbage").ok());
  MissedPurges missed(&nodes, &agents, store->get());
  ASSERT_TRUE(missed.Purge("old", "u1", {"n"}, 1000).ok());
  ASSERT_TRUE(missed.Purge("new", "u2", {"n"}, 5000).ok());
  MissedPurges restarted(&nodes, &agents, store->get());
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.size(), 2u);
  EXPECT_EQ(restarted.OnRegistered("other", 1000 + MissedPurges::kRetentionMs + 1),
            std::vector<std::string>{});
  EXPECT_EQ(restarted.size(), 1u);
  auto left = (*store)->ListClusterValues(kPurgeTombstonePrefix);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].first, "missed-purge/n/new");
  store->reset();
  std::filesystem::remove_all(root);
}

// A tombstone without a UID (a job deleted before UIDs) is not sent when the name exists again:
// the agent could not tell the new job's data from the old one's.
TEST(MissedPurges, AUidlessTombstoneSparesAJobAppliedAgain) {
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  RecordingSink sink;
  AgentCommands agents(&sink);
  MissedPurges missed(&nodes, &agents);
  ASSERT_TRUE(missed.Purge("j", "", {"n"}, 1000).ok());
  ASSERT_TRUE(missed.Purge("k", "", {"n"}, 1000).ok());
  auto exists = [](const std::string& job) { return job == "j"; };
  EXPECT_EQ(missed.OnRegistered("n", 2000, exists), std::vector<std::string>{"k"});
  EXPECT_EQ(Purges(sink), (std::vector<std::pair<std::string, std::string>>{{"n", "k"}}));
  EXPECT_EQ(missed.size(), 0u);
}

}  // namespace
}  // namespace trainlet::coordinator
