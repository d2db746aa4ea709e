// Issue 18: a restart whose nodes' work dirs hold different checkpoints fails at once instead of
// starting ranks that would resume from different epochs and hang in mismatched collectives; a
// restart on nodes that last ran different attempts is warned of.
#include "coordinator/work_dir_agreement.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

PlanRequest Restart(uint32_t attempt, size_t nodes) {
  PlanRequest req;
  req.attempt = attempt;
  for (size_t i = 0; i < nodes; ++i) {
    PlacedNode n;
    n.name = "node-" + std::string(1, static_cast<char>('a' + i));
    req.nodes.push_back(n);
  }
  req.annotations["trainlet.io/checkpoint-path"] = "snapshot.pt";
  return req;
}

v1::WorkDirState Holding(uint64_t bytes, const std::string& sha, uint32_t last_attempt = 1) {
  v1::WorkDirState s;
  s.set_last_attempt(last_attempt);
  s.set_checkpoint("/w/snapshot.pt");
  s.set_checkpoint_exists(true);
  s.set_checkpoint_bytes(bytes);
  s.set_checkpoint_sha256(sha);
  return s;
}

v1::WorkDirState Missing(uint32_t last_attempt = 1) {
  v1::WorkDirState s;
  s.set_last_attempt(last_attempt);
  s.set_checkpoint("/w/snapshot.pt");
  return s;
}

TEST(CheckpointToCompare, OnlyRestartsOfMultiNodeJobsWithPerNodeDirsAndTheAnnotation) {
  EXPECT_EQ(CheckpointToCompare(Restart(2, 2)), "snapshot.pt");
  EXPECT_EQ(CheckpointToCompare(Restart(1, 2)), "");  // a first attempt has nothing to resume
  EXPECT_EQ(CheckpointToCompare(Restart(2, 1)), "");  // one node agrees with itself
  PlanRequest shared = Restart(2, 2);
  shared.annotations["trainlet.io/working-dir"] = "shared";
  EXPECT_EQ(CheckpointToCompare(shared), "");  // every node sees the same file
  PlanRequest none = Restart(2, 2);
  none.annotations.clear();
  EXPECT_EQ(CheckpointToCompare(none), "");
}

TEST(CheckpointToCompare, IsUnderTheRanksWorkingDir) {
  PlanRequest req = Restart(3, 2);
  req.working_dir = "out";
  EXPECT_EQ(CheckpointToCompare(req), "out/snapshot.pt");
  req.working_dir = "/srv/run";
  EXPECT_EQ(CheckpointToCompare(req), "/srv/run/snapshot.pt");
  req.annotations["trainlet.io/checkpoint-path"] = "/ckpt/latest";
  EXPECT_EQ(CheckpointToCompare(req), "/ckpt/latest");
}

TEST(DivergentWorkDirs, AgreeingNodesPass) {
  EXPECT_FALSE(DivergentWorkDirs("snapshot.pt", {"node-a", "node-b"}, {Missing(), Missing()}));
  EXPECT_FALSE(DivergentWorkDirs("snapshot.pt", {"node-a", "node-b"},
                                 {Holding(10, "abcdef0123"), Holding(10, "abcdef0123", 2)}));
}

TEST(DivergentWorkDirs, TheDdpTutorialCaseFailsNamingNodesWhatEachHoldsAndTheFix) {
  auto why = DivergentWorkDirs("snapshot.pt", {"node-a", "node-b"},
                               {Holding(1048576, "1a2b3c4d5e6f"), Missing()});
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "the ranks would resume from different state: snapshot.pt is 1048576 bytes (sha256 "
            "1a2b3c4d), in a work dir last run by attempt 1 on node-a; missing, in a work dir last "
            "run by attempt 1 on node-b. each node keeps its own work dir, so a checkpoint written "
            "on one node is not seen on the others: run the job in the shared directory "
            "(annotation trainlet.io/working-dir: shared), or have every node save it");
}

TEST(DivergentWorkDirs, DifferentContentOrAnUnreadableOneDiverges) {
  EXPECT_TRUE(DivergentWorkDirs("c", {"a", "b"}, {Holding(10, "aaaa"), Holding(10, "bbbb")}));
  EXPECT_TRUE(DivergentWorkDirs("c", {"a", "b"}, {Holding(10, "aaaa"), Holding(11, "aaaa")}));
  v1::WorkDirState bad = Holding(10, "aaaa");
  bad.set_error("cannot read /w/c");
  auto why = DivergentWorkDirs("c", {"a", "b"}, {Holding(10, "aaaa"), bad});
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("unreadable (cannot read /w/c)"), std::string::npos) << *why;
}

v1::JobStatus History(const std::vector<std::vector<std::string>>& attempts) {
  v1::JobStatus st;
  uint32_t n = 0;
  for (const auto& nodes : attempts) {
    auto* rec = st.add_attempts();
    rec->set_attempt(++n);
    for (const auto& node : nodes) rec->add_rank_nodes(node);
  }
  return st;
}

AttemptLayout EveryNodeRuns(size_t nodes) {
  AttemptLayout layout;
  layout.nodes.resize(nodes);
  for (auto& n : layout.nodes) n.ranks.push_back(LaidOutRank{});
  return layout;
}

TEST(MixedAttemptsWarning, ANodeNewToTheJobIsWarnedOf) {
  PlanRequest req = Restart(2, 2);
  req.annotations.clear();
  // Attempt 1 ran on node-a and node-b; attempt 2 goes to node-a and node-c.
  const v1::JobStatus st = History({{"node-a", "node-b"}, {"node-a", "node-c"}});
  EXPECT_EQ(MixedAttemptsWarning(st, req, {"node-a", "node-c"}, EveryNodeRuns(2)),
            "node-a last ran attempt 1, node-c never ran it: ranks that resume from their work "
            "dir may start from different state (annotation trainlet.io/working-dir: shared keeps "
            "one directory for every node; trainlet.io/checkpoint-path makes trainlet compare the "
            "nodes' checkpoints first)");
  // The same nodes again: nothing to say.
  EXPECT_EQ(MixedAttemptsWarning(st, req, {"node-a", "node-b"}, EveryNodeRuns(2)), "");
}

TEST(MixedAttemptsWarning, NotForSharedDirsFirstAttemptsOrNodesWithoutRanks) {
  const v1::JobStatus st = History({{"node-a"}, {"node-a", "node-c"}});
  PlanRequest req = Restart(2, 2);
  EXPECT_NE(MixedAttemptsWarning(st, req, {"node-a", "node-c"}, EveryNodeRuns(2)), "");
  req.annotations["trainlet.io/working-dir"] = "shared";
  EXPECT_EQ(MixedAttemptsWarning(st, req, {"node-a", "node-c"}, EveryNodeRuns(2)), "");
  EXPECT_EQ(MixedAttemptsWarning(st, Restart(1, 2), {"node-a", "node-c"}, EveryNodeRuns(2)), "");
  AttemptLayout mpi = EveryNodeRuns(2);
  mpi.nodes[1].ranks.clear();  // waits for mpirun: no ranks of its own
  EXPECT_EQ(MixedAttemptsWarning(st, Restart(2, 2), {"node-a", "node-c"}, mpi), "");
}

}  // namespace
}  // namespace trainlet::coordinator
