// The step's on-disk formats: the events file records and the launch file. Both are read back
// after crashes, so bad bytes must give a clear error and never a crash.
#include "agent/step/step_records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "agent/step/step_launch.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;
using Kind = StepRecord::Kind;

StepRecord Rec(Kind kind, uint32_t rank = 0, pid_t pid = 0, uint64_t start = 0, int code = 0,
               int sig = 0, std::string message = "") {
  StepRecord r;
  r.kind = kind;
  r.rank = rank;
  r.pid = pid;
  r.start_time = start;
  r.exit_code = code;
  r.signal = sig;
  r.message = std::move(message);
  return r;
}

TEST(StepRecords, RoundTripEveryKind) {
  std::vector<StepRecord> in = {Rec(Kind::kHeader, 0, 4242, 987654321),
                                Rec(Kind::kStarted, 3, 100, 55),
                                Rec(Kind::kStartFailed, 4, 0, 0, 0, 0, "spawn nope: No such file"),
                                Rec(Kind::kExited, 3, 100, 0, 7, 0),
                                Rec(Kind::kExited, 5, 101, 0, 137, 9),
                                Rec(Kind::kDone),
                                Rec(Kind::kDone)};
  in.back().contained = true;
  std::string bytes;
  for (const auto& r : in) bytes += EncodeRecord(r);
  EXPECT_EQ(EncodeRecord(in[0]), "H 1 4242 987654321\n");
  EXPECT_EQ(EncodeRecord(in[3]), "X 3 100 7 0\n");
  EXPECT_EQ(EncodeRecord(in[5]), "D\n");
  EXPECT_EQ(EncodeRecord(in[6]), "D C\n");
  std::vector<StepRecord> out;
  auto used = ParseRecords(bytes, 0, &out);
  ASSERT_TRUE(used.ok()) << used.status().message();
  EXPECT_EQ(*used, bytes.size());
  EXPECT_EQ(out, in);
}

TEST(StepRecords, MessagesLoseNewlinesAndStayShort) {
  std::string bytes = EncodeRecord(Rec(Kind::kHeader, 0, 1, 1)) +
                      EncodeRecord(Rec(Kind::kStartFailed, 1, 0, 0, 0, 0,
                                       "line one\nline two\r" + std::string(10000, 'x')));
  std::vector<StepRecord> out;
  auto used = ParseRecords(bytes, 0, &out);
  ASSERT_TRUE(used.ok()) << used.status().message();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].message.substr(0, 18), "line one line two ");
  EXPECT_LE(out[1].message.size(), kMaxRecordBytes);
}

TEST(StepRecords, UnfinishedLastLineIsLeftForLater) {
  std::string bytes = "H 1 10 20\nS 0 11 2";
  std::vector<StepRecord> out;
  auto used = ParseRecords(bytes, 0, &out);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, 10u);
  EXPECT_EQ(out.size(), 1u);
  // The rest arrives: parsing resumes at the byte offset it stopped at.
  std::string rest = bytes.substr(*used) + "1\n";
  auto more = ParseRecords(rest, *used, &out);
  ASSERT_TRUE(more.ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1], Rec(Kind::kStarted, 0, 11, 21));
}

TEST(StepRecords, BadBytesAreErrorsNamingTheOffset) {
  const std::string h = "H 1 10 20\n";
  struct Case {
    std::string bytes;
    std::string offset;
  };
  std::vector<Case> cases = {
      {"S 0 1 2\n", "byte 0"},                                  // no header first
      {"H 2 10 20\n", "byte 0"},                                // unknown version
      {h + "Q 1 2\n", "byte 10"},                               // unknown kind
      {h + "S 1 -5 2\n", "byte 10"},                            // negative pid
      {h + "S 01 5 2\n", "byte 10"},                            // two spellings of one number
      {h + "S 1 5\n", "byte 10"},                               // missing field
      {h + "X 1 5 7 0 9\n", "byte 10"},                         // extra field
      {h + "X 1 5 300 0\n", "byte 10"},                         // exit code out of range
      {h + "X 1 5 -1 0\n", "byte 10"},                          // negative exit code
      {h + "X 1 5 0 99\n", "byte 10"},                          // no such signal
      {h + "D 1\n", "byte 10"},                                 // D takes only C
      {h + "D C C\n", "byte 10"},                               // once
      {h + "D c\n", "byte 10"},                                 // as written
      {h + std::string("S 1 5 2\0\n", 9), "byte 10"},           // NUL
      {h + "\n", "byte 10"},                                    // empty line
      {h + "S  1 5 2\n", "byte 10"},                            // doubled space
      {h + "S 99999999999999999999 5 2\n", "byte 10"},          // overflow
      {h + std::string(kMaxRecordBytes + 10, 'x'), "byte 10"},  // no newline, too long
  };
  for (const auto& c : cases) {
    std::vector<StepRecord> out;
    auto used = ParseRecords(c.bytes, 0, &out);
    ASSERT_FALSE(used.ok()) << c.bytes;
    EXPECT_EQ(used.status().code(), ErrorCode::kInvalid);
    EXPECT_NE(used.status().message().find(c.offset), std::string::npos) << used.status().message();
    EXPECT_LE(used.status().message().size(), 200u);
    // What came before the bad line stands.
    EXPECT_EQ(out.size(), c.offset == "byte 0" ? 0u : 1u) << c.bytes;
  }
}

TEST(StepRecords, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  const std::string alphabet = "HSFXD 0123456789\n-\x01\xff";
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = i % 2 == 0 ? "H 1 5 6\n" : "";
    const size_t n = rng() % 64;
    for (size_t k = 0; k < n; ++k) bytes += alphabet[rng() % alphabet.size()];
    std::vector<StepRecord> out;
    auto used = ParseRecords(bytes, 0, &out);
    if (used.ok()) {
      ++accepted;
      EXPECT_LE(*used, bytes.size());
    }
  }
  EXPECT_GT(accepted, 0u);
}

TEST(StepLaunch, RoundTripAndEnv) {
  StepLaunch l;
  l.job = "job-a";
  l.attempt = 2;
  l.stop_grace_ms = 1500;
  l.cgroup = "v1";
  l.base_env = {"PATH=/bin", "A=1", "A=2", "junk"};
  StepRank r;
  r.rank = 3;
  r.local_rank = 1;
  r.argv = {"/bin/sh", "-c", "echo \"hi\"\n"};
  r.env = {{"A", "over"}, {"B", "new"}};
  r.cwd = "/tmp";
  r.log_path = "/tmp/x.log";
  r.cpus = {0, 2};
  l.ranks.push_back(r);
  auto back = DecodeLaunch(EncodeLaunch(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job, "job-a");
  EXPECT_EQ(back->attempt, 2u);
  EXPECT_EQ(back->stop_grace_ms, 1500u);
  EXPECT_EQ(back->cgroup, "v1");
  ASSERT_EQ(back->ranks.size(), 1u);
  EXPECT_EQ(back->ranks[0].argv, r.argv);
  EXPECT_EQ(back->ranks[0].env, r.env);
  EXPECT_EQ(back->ranks[0].cpus, r.cpus);
  EXPECT_EQ(back->ranks[0].rank, 3u);
  EXPECT_EQ(back->ranks[0].local_rank, 1u);
  EXPECT_EQ(BuildWorkerEnv(back->base_env, back->ranks[0].env),
            (std::vector<std::string>{"PATH=/bin", "A=over", "B=new"}));
}

// The rank's env as the agent builds it: the base's order, the first of duplicate keys only (as
// getenv reads it), an override in place of its key, entries without '=' dropped, and keys the
// base lacks after it in key order.
TEST(StepLaunch, WorkerEnvOverridesInPlaceAndAppendsNewKeysInKeyOrder) {
  const std::vector<std::string> base = {"PATH=/bin", "Z=1", "noequals", "A=a",
                                         "Z=2",       "M=m", "=empty",   "HOME=/root"};
  const std::map<std::string, std::string> over = {{"AA", "new1"}, {"A", "over"},  {"Z", "zz"},
                                                   {"B", ""},      {"ZZ", "new2"}, {"", "k"}};
  EXPECT_EQ(BuildWorkerEnv(base, over),
            (std::vector<std::string>{"PATH=/bin", "Z=zz", "A=over", "M=m", "=k", "HOME=/root",
                                      "AA=new1", "B=", "ZZ=new2"}));
  EXPECT_EQ(BuildWorkerEnv(base, {}),
            (std::vector<std::string>{"PATH=/bin", "Z=1", "A=a", "M=m", "=empty", "HOME=/root"}));
  EXPECT_EQ(BuildWorkerEnv({}, {{"B", "b"}, {"A", "a"}}), (std::vector<std::string>{"A=a", "B=b"}));
}

// What every rank's env shares is written once ("env_common"), and every rank reads back its
// whole env: 64 ranks of a job were 64 copies of the job's env before (99 KB of launch file).
// A launch of job-a attempt 1 whose `n` ranks run /bin/true with env `env(rank)`.
StepLaunch LaunchOf(uint32_t n,
                    const std::function<std::map<std::string, std::string>(uint32_t)>& env) {
  StepLaunch l;
  l.job = "job-a";
  l.attempt = 1;
  for (uint32_t i = 0; i < n; ++i) {
    StepRank r;
    r.rank = i;
    r.argv = {"/bin/true"};
    r.env = env(i);
    l.ranks.push_back(r);
  }
  return l;
}

TEST(StepLaunch, SharedEnvIsWrittenOnce) {
  StepLaunch l = LaunchOf(3, [](uint32_t i) -> std::map<std::string, std::string> {
    return {{"MASTER_ADDR", "node-1-shared-value"},
            {"RANK", std::to_string(i)},
            {"ODD", i == 1 ? "one" : "other"}};
  });
  l.ranks[2].env.erase("ODD");  // not in every rank: not common
  const std::string text = EncodeLaunch(l);
  size_t copies = 0;
  for (size_t at = text.find("node-1-shared-value"); at != std::string::npos;
       at = text.find("node-1-shared-value", at + 1)) {
    ++copies;
  }
  EXPECT_EQ(copies, 1u) << text;
  auto back = DecodeLaunch(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->ranks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(back->ranks[i].env, l.ranks[i].env) << "rank " << i;
  // A file written before env_common (each rank's whole env in the rank) reads the same.
  auto old = DecodeLaunch(
      R"({"version":1,"job":"j","attempt":1,"stop_grace_ms":0,"base_env":[],)"
      R"("ranks":[{"rank":0,"local_rank":0,"argv":["/bin/true"],"env":{"A":"1"},"cwd":"",)"
      R"("log_path":"","cpus":[]}]})");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->ranks[0].env, (std::map<std::string, std::string>{{"A", "1"}}));
  auto bad = DecodeLaunch(
      R"({"version":1,"job":"j","attempt":1,"stop_grace_ms":0,"base_env":[],"env_common":{"A":2},)"
      R"("ranks":[{"rank":0,"local_rank":0,"argv":["/bin/true"],"env":{},"cwd":"",)"
      R"("log_path":"","cpus":[]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("env_common.A"), std::string::npos)
      << bad.status().message();
}

// The rendezvous token stays in each rank's own env, never in env_common: an agent from before
// env_common, downgraded under running ranks, reads it there when it adopts the step, and serves
// the attempt's rendezvous again with it.
TEST(StepLaunch, TheRendezvousTokenStaysInEachRanksEnvForAnOlderAgent) {
  const StepLaunch l = LaunchOf(2, [](uint32_t) -> std::map<std::string, std::string> {
    return {{"TRAINLET_RENDEZVOUS_TOKEN", "tok"}, {"MASTER_ADDR", "node-1"}};
  });
  const auto doc = nlohmann::json::parse(EncodeLaunch(l));
  EXPECT_FALSE(doc["env_common"].contains("TRAINLET_RENDEZVOUS_TOKEN")) << doc.dump();
  EXPECT_TRUE(doc["env_common"].contains("MASTER_ADDR")) << doc.dump();
  for (const auto& r : doc["ranks"]) EXPECT_EQ(r["env"]["TRAINLET_RENDEZVOUS_TOKEN"], "tok");
  auto back = DecodeLaunch(doc.dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(back->ranks[i].env, l.ranks[i].env) << "rank " << i;
}

// The launch file is written without a json tree (EncodeLaunch's own writer): every string
// reads back as it was, escapes and UTF-8 included, and invalid UTF-8 becomes U+FFFD rather than
// failing the launch, as nlohmann::json's dump with error_handler_t::replace wrote it.
TEST(StepLaunch, EveryStringReadsBackAndInvalidUtf8IsReplaced) {
  StepLaunch l;
  l.job = "j\"ob";
  l.attempt = 1;
  l.base_env = {"PATH=/bin", "Q=a\"b\\c", "W=C:\\dir"};
  l.steps = {{"", {{"init", "Complete"}}}};
  for (uint32_t i = 0; i < 2; ++i) {
    StepRank r;
    r.rank = i;
    r.argv = {"/bin/sh", "-c", "printf '%s\\n' \"\t\x01\""};
    r.env = {{"SHARED", "caf\xc3\xa9 \u00e9"}, {"OWN", "r" + std::to_string(i) + "\x7f"}};
    r.cwd = "/tmp/\xe2\x82\xac";
    r.log_path = "/tmp/x.log";
    r.cpus = {i, 4};
    r.run_as.job_run_as_user = -1;
    l.ranks.push_back(r);
  }
  auto back = DecodeLaunch(EncodeLaunch(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job, l.job);
  EXPECT_EQ(back->base_env, l.base_env);
  EXPECT_EQ(back->steps, l.steps);
  ASSERT_EQ(back->ranks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->ranks[i].argv, l.ranks[i].argv);
    EXPECT_EQ(back->ranks[i].env, l.ranks[i].env);
    EXPECT_EQ(back->ranks[i].cwd, l.ranks[i].cwd);
    EXPECT_EQ(back->ranks[i].cpus, l.ranks[i].cpus);
    EXPECT_EQ(back->ranks[i].run_as, l.ranks[i].run_as);
  }
  l.ranks[0].env["BAD"] = "x\xff\xfey";
  back = DecodeLaunch(EncodeLaunch(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ranks[0].env["BAD"], "x\xef\xbf\xbd\xef\xbf\xbdy");
}

TEST(StepLaunch, RunAsRoundTripsAndIsOptional) {
  StepLaunch l;
  l.job = "j";
  l.attempt = 1;
  StepRank r;
  r.argv = {"true"};
  r.run_as.agent_run_as = "nobody";
  r.run_as.job_run_as_user = 1000;
  r.run_as.job_run_as_group = 0;
  r.run_as.allow_privilege_escalation = true;
  r.run_as.fs_group = 4242;
  l.ranks.push_back(r);
  r.run_as = {};
  l.ranks.push_back(r);
  auto back = DecodeLaunch(EncodeLaunch(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ranks[0].run_as, l.ranks[0].run_as);
  EXPECT_TRUE(back->ranks[1].run_as.empty());  // absent: the step's own user
  std::string text = EncodeLaunch(l);
  text.replace(text.find("\"run_as_user\":1000"), 18, "\"run_as_user\":\"x\"");
  auto bad = DecodeLaunch(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ranks[0].run_as_user: not an integer"), std::string::npos)
      << bad.status().message();
  text = EncodeLaunch(l);
  text.replace(text.find("\"allow_privilege_escalation\":true"), 33,
               "\"allow_privilege_escalation\":1");
  bad = DecodeLaunch(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ranks[0].allow_privilege_escalation: not a boolean"),
            std::string::npos)
      << bad.status().message();
}

TEST(StepLaunch, ErrorsNameTheField) {
  struct Case {
    std::string text;
    std::string field;
  };
  const std::string ok_rank =
      R"({"rank":0,"local_rank":0,"argv":["x"],"env":{},"cwd":"","log_path":"","cpus":[]})";
  auto doc = [](const std::string& ranks) {
    return R"({"version":1,"job":"j","attempt":1,"stop_grace_ms":5,"base_env":[],"ranks":[)" +
           ranks + "]}";
  };
  std::vector<Case> cases = {
      {"not json", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"version":2})", "version"},
      {R"({"version":1,"attempt":1})", "job: missing"},
      {R"({"version":1,"job":"j","attempt":1,"stop_grace_ms":5,"cgroup":"v3","base_env":[],"ranks":[]})",
       "cgroup: 'v3' is not auto, v2, v1 or none"},
      {doc(ok_rank + ",5"), "ranks[1]: not an object"},
      {doc(R"({"rank":-1})"), "ranks[0].rank"},
      {doc(R"({"rank":0,"local_rank":0,"argv":"x"})"), "ranks[0].argv"},
      {doc(R"({"rank":0,"local_rank":0,"argv":[],"env":{},"cwd":"","log_path":"","cpus":[]})"),
       "ranks[0].argv: empty"},
      {doc(R"({"rank":0,"local_rank":0,"argv":["x"],"env":{"A":1},"cwd":"","log_path":"","cpus":[]})"),
       "ranks[0].env.A"},
      {doc(R"({"rank":0,"local_rank":0,"argv":["x"],"env":{},"cwd":"","log_path":"","cpus":["a"]})"),
       "ranks[0].cpus"},
  };
  for (const auto& c : cases) {
    auto r = DecodeLaunch(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
    EXPECT_NE(r.status().message().find(c.field), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
  // Launch files written before the cgroup field mean "auto".
  auto old = DecodeLaunch(doc(ok_rank));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->cgroup, "auto");
}

TEST(StepLaunch, FilesNameThePath) {
  char tmpl[] = "/tmp/trainlet-steplaunch-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  auto missing = ReadLaunchFile((dir / "none.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.json"), std::string::npos);

  std::ofstream(dir / "bad.json") << "{\"version\":1,";
  auto bad = ReadLaunchFile((dir / "bad.json").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.json"), std::string::npos);

  StepLaunch l;
  l.job = "j";
  l.attempt = 1;
  ASSERT_TRUE(WriteLaunchFile((dir / "good.json").string(), l).ok());
  EXPECT_EQ(fs::status(dir / "good.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_FALSE(fs::exists(dir / "good.json.tmp"));
  EXPECT_TRUE(ReadLaunchFile((dir / "good.json").string()).ok());
  EXPECT_FALSE(WriteLaunchFile((dir / "no-dir" / "x.json").string(), l).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainlet::step
