// The progress body parser: what Kubeflow accepts is taken, every refusal names its field.
#include "agent/progress_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/json_subset_scanner.h"

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

// What ParseProgressBody made of `body`, as text: the refusal, or the status serialized.
std::string Outcome(const std::string& body, ProgressJsonParser parser) {
  auto r = ParseProgressBody(body, parser);
  if (!r.ok()) return "refused: " + r.status().message();
  if (!r->has_value()) return "no trainerStatus";
  return "taken: " + (*r)->SerializeAsString();
}

// The SDK's body (python/trainlet/progress.py), as bench/progress posts it.
const char kSdkBody[] =
    R"({"trainerStatus": {"progressPercentage": 1, "estimatedRemainingSeconds": 27, "metrics": )"
    R"([{"name": "loss", "value": "0.0123"}, {"name": "rank", "value": "17"}], )"
    R"("lastUpdatedTime": "2026-11-25T13:51:02Z"}})";

// Counts the events, to tell whether the subset scanner took a body.
struct CountingSax : nlohmann::json_sax<nlohmann::json> {
  int events = 0;
  bool null() override { return ++events; }
  bool boolean(bool) override { return ++events; }
  bool number_integer(number_integer_t) override { return ++events; }
  bool number_unsigned(number_unsigned_t) override { return ++events; }
  bool number_float(number_float_t, const string_t&) override { return ++events; }
  bool string(string_t&) override { return ++events; }
  bool binary(binary_t&) override { return ++events; }
  bool start_object(std::size_t) override { return ++events; }
  bool key(string_t&) override { return ++events; }
  bool end_object() override { return ++events; }
  bool start_array(std::size_t) override { return ++events; }
  bool end_array() override { return ++events; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

bool InSubset(const std::string& body) {
  CountingSax sax;
  return ScanJsonSubset(body, &sax);
}

TEST(ProgressBody, TheSubsetScannerTakesPlainPostsAndLeavesTheRest) {
  EXPECT_TRUE(InSubset(kSdkBody));
  EXPECT_TRUE(InSubset(" {\"a\" : [ [], {}, true, false, null, -0, 0, 123456789012345678 ] }\r\n"));
  for (const char* outside : {
           "",                      // nothing
           "[1]",                   // the top is not an object
           "{\"a\":\"\\n\"}",       // an escape
           "{\"a\":\"\xc3\xa9\"}",  // not ASCII
           "\xef\xbb\xbf{}",        // a byte order mark
           "{\"a\":1.5}",
           "{\"a\":1e3}",
           "{\"a\":01}",                   // a fraction, an exponent, a leading zero
           "{\"a\":1234567890123456789}",  // 19 digits
           "{\"a\":-}",
           "{\"a\":tru}",
           "{\"a\":1,}",
           "{\"a\" 1}",
           "{} x",
           "{\"a\":\"\t\"}",
       }) {
    EXPECT_FALSE(InSubset(outside)) << outside;
  }
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < kMaxJsonSubsetDepth; ++i) deep += "[";
  EXPECT_TRUE(InSubset(deep + std::string(kMaxJsonSubsetDepth - 1, ']') + "}"));
  EXPECT_FALSE(InSubset(deep + "[" + std::string(kMaxJsonSubsetDepth, ']') + "}"));
}

// Whichever path reads a body, the result is the same: for bodies in the subset, outside it, and
// every one-byte change of the SDK's body (deleted, or replaced or preceded by a byte that matters
// to JSON).
TEST(ProgressBody, TheSubsetScannerAndNlohmannAgree) {
  std::vector<std::string> bodies = {
      kSdkBody,
      R"({"trainerStatus":{"progressPercentage":-0}})",
      R"({"trainerStatus":{"progressPercentage":100,"progressPercentage":null}})",
      R"({"trainerStatus":{"estimatedRemainingSeconds":999999999999999999}})",
      R"({"trainerStatus":{"estimatedRemainingSeconds":-999999999999999999}})",
      R"({"trainerStatus":{"estimatedRemainingSeconds":18446744073709551616}})",
      R"({"trainerStatus":{"metrics":[{"name":"a","value":"\u00e9"}]}})",
      R"({"trainerStatus":{"metrics":[{"name":"a","value":"1"},[],{"x":{"name":"b"}}]}})",
      R"({"trainerStatus":{"metrics":null,"lastUpdatedTime":null}})",
      R"({"trainerStatus":null})",
      R"({"x":{"trainerStatus":{"progressPercentage":5}},"trainerStatus":{}})",
      R"({"trainerStatus":{"progressPercentage":5}} {})",
      "{\"trainerStatus\":{\"progressPercentage\":5}}\n\t ",
      Metrics(256),
      Metrics(257),
  };
  const std::string sdk = kSdkBody;
  for (size_t i = 0; i < sdk.size(); ++i) {
    bodies.push_back(sdk.substr(0, i) + sdk.substr(i + 1));
    for (const char c : std::string("{}[]\":,-.0159eEtfn \\\x01\x7f\x80")) {
      bodies.push_back(sdk.substr(0, i) + c + sdk.substr(i + 1));
      bodies.push_back(sdk.substr(0, i) + c + sdk.substr(i));
    }
  }
  size_t in_subset = 0;
  for (const std::string& body : bodies) {
    in_subset += InSubset(body);
    EXPECT_EQ(Outcome(body, ProgressJsonParser::kSubsetFirst),
              Outcome(body, ProgressJsonParser::kFullParserOnly))
        << body;
  }
  // Both paths were compared on many bodies.
  EXPECT_GT(in_subset, bodies.size() / 4);
  EXPECT_LT(in_subset, bodies.size());
}

}  // namespace
}  // namespace trainlet::agent
