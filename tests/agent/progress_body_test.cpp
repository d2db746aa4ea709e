// The progress body parser: what Kubeflow accepts is taken, every refusal names its field.
#include "agent/progress_body.h"

#include <gtest/gtest.h>

namespace trainlet::agent {
namespace {

std::string Refusal(const std::string& body) {
  auto r = ParseProgressBody(body);
  if (r.ok()) return "accepted";
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  return r.status().message();
}

std::string Metrics(size_t n) {
  std::string m;
  for (size_t i = 0; i < n; ++i) {
    m += (i ? "," : "") + std::string("{\"name\":\"m") + std::to_string(i) + "\",\"value\":\"1\"}";
  }
  return R"({"trainerStatus":{"metrics":[)" + m + "]}}";
}

TEST(ProgressBody, TakesKubeflowsExample) {
  auto r = ParseProgressBody(R"({"trainerStatus": {"progressPercentage": 45,
      "estimatedRemainingSeconds": 795649, "metrics": [{"name": "loss", "value": "0.2347"},
      {"name": "eval_loss", "value": "0.2451"}], "lastUpdatedTime": "2025-01-23T10:30:45Z",
      "somethingNew": true}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  const v1::TrainerStatus& s = **r;
  EXPECT_EQ(s.progress_percentage(), 45);
  EXPECT_EQ(s.estimated_remaining_seconds(), 795649);
  ASSERT_EQ(s.metrics_size(), 2);
  EXPECT_EQ(s.metrics(1).name(), "eval_loss");
  EXPECT_EQ(s.metrics(1).value(), "0.2451");
  EXPECT_EQ(s.last_updated_unix_ms(), 1737628245000);
}

TEST(ProgressBody, EveryFieldIsOptional) {
  auto r = ParseProgressBody(R"({"trainerStatus": {"progressPercentage": null}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  EXPECT_FALSE((*r)->has_progress_percentage());
  EXPECT_FALSE((*r)->has_estimated_remaining_seconds());
  EXPECT_EQ((*r)->last_updated_unix_ms(), 0);
  // No trainerStatus at all: nothing to take (Kubeflow answers 200 and changes nothing).
  for (const char* body : {"{}", R"({"trainerStatus": null})"}) {
    auto none = ParseProgressBody(body);
    ASSERT_TRUE(none.ok()) << body;
    EXPECT_FALSE(none->has_value()) << body;
  }
  EXPECT_EQ(Refusal(Metrics(256)), "accepted");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"progressPercentage":0}})"), "accepted");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"progressPercentage":100}})"), "accepted");
}

TEST(ProgressBody, EveryRefusalNamesItsField) {
  EXPECT_EQ(Refusal("{"), "body: not valid JSON");
  EXPECT_EQ(Refusal("[]"), "body: must be a JSON object");
  EXPECT_EQ(Refusal(R"({"trainerStatus": 3})"), "trainerStatus: must be an object");
  for (const char* bad : {"101", "-1", "45.5", "\"45\"", "true"}) {
    EXPECT_EQ(Refusal(std::string(R"({"trainerStatus":{"progressPercentage":)") + bad + "}}"),
              "trainerStatus.progressPercentage: must be an integer from 0 to 100")
        << bad;
  }
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"estimatedRemainingSeconds":-5}})"),
            "trainerStatus.estimatedRemainingSeconds: must be an integer from 0 to 2147483647");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"estimatedRemainingSeconds":2147483648}})"),
            "trainerStatus.estimatedRemainingSeconds: must be an integer from 0 to 2147483647");
  EXPECT_EQ(Refusal(Metrics(300)), "trainerStatus.metrics: at most 256 metrics, got 300");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":{}}})"),
            "trainerStatus.metrics: must be a list");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":[{"name":"a","value":"1"},7]}})"),
            "trainerStatus.metrics[1]: must be an object with name and value");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":[{"name":"loss","value":0.5}]}})"),
            "trainerStatus.metrics[0].value: must be a string");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":[{"value":"1"}]}})"),
            "trainerStatus.metrics[0].name: required");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":[{"name":"","value":"1"}]}})"),
            "trainerStatus.metrics[0].name: must be 1 to 64 bytes");
  EXPECT_EQ(Refusal(R"({"trainerStatus":{"metrics":[{"name":"a","value":")" + std::string(65, 'x') +
                    "\"}]}}"),
            "trainerStatus.metrics[0].value: must be 1 to 64 bytes");
  for (const char* bad : {"\"yesterday\"", "\"2025-01-23 10:30:45Z\"", "\"2025-13-01T00:00:00Z\"",
                          "\"2025-01-23T10:30:45\"", "12"}) {
    EXPECT_EQ(Refusal(std::string(R"({"trainerStatus":{"lastUpdatedTime":)") + bad + "}}"),
              "trainerStatus.lastUpdatedTime: must be an RFC 3339 time such as "
              "\"2025-01-23T10:30:45Z\"")
        << bad;
  }
}

TEST(ProgressBody, ReadsRfc3339WithFractionsAndOffsets) {
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T00:00:01.5Z"), 1500);
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T00:00:01.123456789Z"), 1123);
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T02:00:00+02:00"), 0);
  EXPECT_EQ(ParseRfc3339Ms("1969-12-31T23:00:00-01:00"), 0);
  EXPECT_EQ(ParseRfc3339Ms("2024-02-29T00:00:00Z"), 1709164800000);
  EXPECT_FALSE(ParseRfc3339Ms("1970-01-01T00:00:00.Z"));
  EXPECT_FALSE(ParseRfc3339Ms("1970-01-01T00:00:00Zjunk"));
  EXPECT_FALSE(ParseRfc3339Ms(""));
}

}  // namespace
}  // namespace trainlet::agent
