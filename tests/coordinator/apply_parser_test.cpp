// ApplyParser: files parsed on the parser's thread come back to the loop's thread, in order, with
// their errors, and the loop is told through the notify socket.
#include "coordinator/apply_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace trainlet::coordinator {
namespace {

using ::testing::HasSubstr;

std::string Job(const std::string& name, const std::string& args = "") {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\nspec:\n  runtimeRef:\n    name: plain\n  trainer:\n    command: [\"true\"]\n" +
         (args.empty() ? "" : "    args: [\"" + args + "\", \"" + args + "\", \"" + args + "\"]\n");
}

// Waits (up to 10 s) until the notify socket is readable, then takes what was parsed.
std::vector<ApplyParser::Parsed> Await(ApplyParser& parser, size_t want) {
  std::vector<ApplyParser::Parsed> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    zmq_pollitem_t item{parser.notify_socket(), 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 100) > 0) {
      for (auto& p : parser.TakeParsed()) got.push_back(std::move(p));
    }
  }
  return got;
}

TEST(ApplyParser, ParsesInOrderOffTheCallersThread) {
  zmq::context_t ctx;
  ApplyParser parser(ctx);
  EXPECT_TRUE(parser.TakeParsed().empty());
  const uint64_t a = *parser.Submit(Job("a") + "---\n" + Job("b"), "ab.yaml");
  const uint64_t b = *parser.Submit("kind: [", "bad.yaml");
  const uint64_t c = *parser.Submit(Job("c"), "");
  auto got = Await(parser, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].ticket, a);
  ASSERT_TRUE(got[0].file.ok()) << got[0].file.status().ToString();
  ASSERT_EQ(got[0].file->jobs.size(), 2u);
  EXPECT_EQ(got[0].file->jobs[1].name, "b");
  EXPECT_EQ(got[1].ticket, b);
  ASSERT_FALSE(got[1].file.ok());
  EXPECT_THAT(got[1].file.status().message(), HasSubstr("bad.yaml: "));
  EXPECT_EQ(got[2].ticket, c);
  EXPECT_TRUE(got[2].file.ok());
}

TEST(ApplyParser, RefusesWhatTheLimitsRefuse) {
  zmq::context_t ctx;
  ApplyParser parser(ctx);
  ASSERT_TRUE(parser.Submit(Job("huge", std::string(100 << 10, 'x')), "huge.yaml").ok());
  auto got = Await(parser, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_FALSE(got[0].file.ok());
  EXPECT_THAT(got[0].file.status().message(), HasSubstr("TrainJob/huge: spec.trainer.args"));
}

TEST(ApplyParser, RefusesAFloodOfFiles) {
  zmq::context_t ctx;
  ApplyParser parser(ctx);
  // A file slow to parse holds the worker while the queue fills.
  std::string slow;
  for (int i = 0; i < 1500; ++i) slow += (i == 0 ? "" : "---\n") + Job("s" + std::to_string(i));
  ASSERT_TRUE(parser.Submit(slow, "slow.yaml").ok());
  size_t accepted = 1;
  Status refused = Status::Ok();
  for (int i = 0; i < 100 && refused.ok(); ++i) {
    auto t = parser.Submit(Job("q" + std::to_string(i)), "");
    if (t.ok()) {
      ++accepted;
    } else {
      refused = t.status();
    }
  }
  ASSERT_FALSE(refused.ok()) << "100 files queued behind a slow one";
  EXPECT_EQ(refused.code(), ErrorCode::kUnavailable);
  EXPECT_THAT(refused.message(), HasSubstr("apply again"));
  EXPECT_LE(accepted, ApplyParser::kMaxQueued + 1);
  // Every accepted file still comes back, with tickets in order.
  auto got = Await(parser, accepted);
  ASSERT_EQ(got.size(), accepted);
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i].ticket, got[i - 1].ticket + 1);
}

TEST(ApplyParser, StopsWithWorkQueued) {
  zmq::context_t ctx;
  auto parser = std::make_unique<ApplyParser>(ctx);
  for (int i = 0; i < 50; ++i) (void)parser->Submit(Job("j" + std::to_string(i)), "");
  parser.reset();  // joins after the file in hand; the rest is dropped
  SUCCEED();
}

}  // namespace
}  // namespace trainlet::coordinator
