// describe trainjob: one "Workspace:" line per node, saying how its ranks reached the job's
// workspace (RankStatus.workspace from their STARTED events), and one "Runs as:" line per node,
// saying who they run as (RankStatus.run_as).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "trainletctl/render.h"

namespace trainlet::cli {
namespace {

v1::JobStatus Job() {
  v1::JobStatus j;
  j.set_name("train");
  j.set_job_phase(v1::JOB_PHASE_RUNNING);
  j.set_attempt(1);
  j.set_num_nodes(2);
  j.set_procs_per_node(2);
  for (uint32_t i = 0; i < 4; ++i) {
    auto* r = j.add_ranks();
    r->set_rank(i);
    r->set_node(i < 2 ? "node-a" : "node-b");
    r->set_rank_state(v1::RANK_STATE_RUNNING);
  }
  return j;
}

TEST(DescribeWorkspace, OneLinePerNodeOnceRanksStarted) {
  v1::JobStatus j = Job();
  EXPECT_EQ(DescribeJob(j, 0).find("Workspace:"), std::string::npos);  // nothing started yet
  j.mutable_ranks(0)->set_workspace("/workspace (private mount namespace)");
  j.mutable_ranks(1)->set_workspace("/workspace (private mount namespace)");
  j.mutable_ranks(3)->set_workspace("TRAINLET_WORKSPACE=/var/lib/trainlet/work/train/workspace");
  const std::string text = DescribeJob(j, 0);
  const size_t at = text.find("Workspace:\n");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string section = text.substr(at, text.find("\n", text.find("node-b", at)) - at + 1);
  EXPECT_EQ(section,
            "Workspace:\n"
            "  node-a   /workspace (private mount namespace)\n"
            "  node-b   TRAINLET_WORKSPACE=/var/lib/trainlet/work/train/workspace\n");
}

// issue 19: the user each node's ranks run as (run_as, or the job's securityContext).
TEST(DescribeRunAs, OneLinePerNodeOnceRanksStarted) {
  v1::JobStatus j = Job();
  for (int i = 0; i < 4; ++i) j.mutable_ranks(i)->set_pid(100 + i);
  EXPECT_EQ(DescribeJob(j, 0).find("Runs as:"), std::string::npos);  // all as the agents' user
  for (int i = 0; i < 2; ++i) j.mutable_ranks(i)->set_run_as("nobody (uid 65534, gid 65534)");
  j.mutable_ranks(3)->set_run_as("uid 4000, gid 100");
  const std::string text = DescribeJob(j, 0);
  const size_t at = text.find("Runs as:\n");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.substr(at, text.find("\n", text.find("node-b", at)) - at + 1),
            "Runs as:\n"
            "  node-a   nobody (uid 65534, gid 65534)\n"
            "  node-b   the agent's own user; uid 4000, gid 100\n");
}

// issue 19, defect 11: the current attempt's CpusShared notes, from every node (an MPI job's
// other nodes too); an older attempt's stay in Events only.
TEST(DescribeSharedCpus, OneLinePerNoteOfTheCurrentAttempt) {
  v1::JobStatus j = Job();
  EXPECT_EQ(DescribeJob(j, 0).find("CPUs shared:"), std::string::npos);
  j.set_attempt(2);
  for (const char* m : {"attempt 1: CPUs 0 of node node-a shared with trainjob/old (no free CPUs "
                        "left)",
                        "attempt 2: CPUs 1 of node node-b shared with trainjob/a, trainjob/b (no "
                        "free CPUs left)"}) {
    auto* e = j.add_events();
    e->set_type("Normal");
    e->set_reason("CpusShared");
    e->set_message(m);
  }
  const std::string text = DescribeJob(j, 0);
  const size_t at = text.find("CPUs shared:\n");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.substr(at, text.find('\n', text.find("node-b", at)) - at + 1),
            "CPUs shared:\n"
            "  CPUs 1 of node node-b shared with trainjob/a, trainjob/b (no free CPUs left)\n");
  EXPECT_EQ(text.find("trainjob/old", at), text.rfind("trainjob/old"));  // in Events only
}

// -o yaml: a JSON string that plain YAML would read as another type is quoted, so a script reading
// the output (yq, PyYAML) gets the string back; other scalars stay plain.
TEST(JsonToYaml, StringsThatReadAsOtherTypesAreQuoted) {
  const std::string yaml =
      JsonToYaml(R"({"command": ["true", "1.10", "null", "yes", "", "-3", "train.py"], "n": 3,)"
                 R"( "ok": true, "sentUnixMs": "1700000000000"})");
  const YAML::Node back = YAML::Load(yaml);
  const std::vector<std::string> want = {"true", "1.10", "null", "yes", "", "-3", "train.py"};
  ASSERT_EQ(back["command"].size(), want.size()) << yaml;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != "train.py") {
      EXPECT_EQ(back["command"][i].Tag(), "!") << "not quoted: " << want[i] << "\n" << yaml;
    }
    EXPECT_EQ(back["command"][i].Scalar(), want[i]);
  }
  EXPECT_NE(yaml.find("- train.py"), std::string::npos) << yaml;  // no quotes it does not need
  EXPECT_NE(yaml.find("n: 3"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("ok: true"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("sentUnixMs: \"1700000000000\""), std::string::npos) << yaml;
}

}  // namespace
}  // namespace trainlet::cli
