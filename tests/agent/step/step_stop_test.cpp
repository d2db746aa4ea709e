// The step's stop and warning requests (agent/step/step_stop.h): round trip, and clear errors for
// a request that is missing, malformed or names no signal.
#include "agent/step/step_stop.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/step/step_launch.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;

TEST(StepStop, RoundTripsThroughAFile) {
  char tmpl[] = "/tmp/trainlet-stop-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/stop";
  StopRequest in{SIGUSR2, 30000, 1700000000123};
  ASSERT_TRUE(WriteStopRequest(path, in).ok());
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  auto out = ReadStopRequest(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->warning_signal, SIGUSR2);
  EXPECT_EQ(out->warning_grace_ms, 30000u);
  EXPECT_EQ(out->sent_unix_ms, 1700000000123);
  fs::remove_all(tmpl);
  EXPECT_EQ(ReadStopRequest(path).status().code(), ErrorCode::kNotFound);
}

TEST(StepStop, BadRequestsNameTheField) {
  EXPECT_EQ(DecodeStopRequest("nope").status().code(), ErrorCode::kInvalid);
  auto no_grace = DecodeStopRequest(R"({"warning_signal": 10, "sent_unix_ms": 1})");
  ASSERT_FALSE(no_grace.ok());
  EXPECT_NE(no_grace.status().message().find("warning_grace_ms"), std::string::npos);
  auto bad_signal =
      DecodeStopRequest(R"({"warning_signal": 99, "warning_grace_ms": 1, "sent_unix_ms": 1})");
  ASSERT_FALSE(bad_signal.ok());
  EXPECT_NE(bad_signal.status().message().find("warning_signal"), std::string::npos);
  auto negative =
      DecodeStopRequest(R"({"warning_signal": 10, "warning_grace_ms": -1, "sent_unix_ms": 1})");
  EXPECT_FALSE(negative.ok());
  auto none = DecodeStopRequest(EncodeStopRequest(StopRequest{}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->warning_signal, 0);
}

// Launch files say whether their step takes these requests: an older step would die of the
// SIGUSR2 of a warning, so a file without the field reads as "no".
TEST(StepStop, LaunchFilesSayWhetherTheStepTakesRequests) {
  StepLaunch l;
  l.job = "j";
  l.attempt = 1;
  l.stop_requests = true;
  auto back = DecodeLaunch(EncodeLaunch(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->stop_requests);
  auto old = DecodeLaunch(
      R"({"version":1,"job":"j","attempt":1,"stop_grace_ms":5,"base_env":[],"ranks":[]})");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_FALSE(old->stop_requests);
}

}  // namespace
}  // namespace trainlet::step
