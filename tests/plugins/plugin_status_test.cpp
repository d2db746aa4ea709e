// plugins/plugin_status.h: the public PluginResult and trainlet's Status convert both ways without
// losing the code or the message.
#include "plugins/plugin_status.h"

#include <gtest/gtest.h>

namespace trainlet {
namespace {

constexpr ErrorCode kAll[] = {ErrorCode::kOk,     ErrorCode::kInvalid,     ErrorCode::kNotFound,
                              ErrorCode::kExists, ErrorCode::kUnavailable, ErrorCode::kPermission,
                              ErrorCode::kIo,     ErrorCode::kInternal};

TEST(PluginStatusTest, EveryCodeRoundTripsAndPrintsTheSameName) {
  for (ErrorCode code : kAll) {
    const PluginErrorCode public_code = ToPluginErrorCode(code);
    EXPECT_EQ(ToErrorCode(public_code), code) << ErrorCodeName(code);
    EXPECT_STREQ(PluginErrorCodeName(public_code), ErrorCodeName(code));
    if (code == ErrorCode::kOk) continue;
    const Status status(code, "why");
    EXPECT_EQ(ToPluginStatus(status).ToString(), status.ToString());
    EXPECT_EQ(ToStatus(ToPluginStatus(status)).ToString(), status.ToString());
  }
  EXPECT_TRUE(ToPluginStatus(Status::Ok()).ok());
  EXPECT_TRUE(ToStatus(PluginStatus()).ok());
}

TEST(PluginStatusTest, AnUnknownPublicCodeIsInternal) {
  EXPECT_EQ(ToErrorCode(static_cast<PluginErrorCode>(99)), ErrorCode::kInternal);
}

TEST(PluginStatusTest, ResultsKeepTheValueOrTheError) {
  PluginResult<int> value = ToPluginResult(Result<int>(42));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 42);
  Result<int> back = ToResult(std::move(value));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, 42);

  PluginResult<int> error = ToPluginResult(Result<int>(InvalidError("spec.x: bad")));
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), PluginErrorCode::kInvalid);
  EXPECT_EQ(error.status().message(), "spec.x: bad");
  Result<int> error_back = ToResult(std::move(error));
  ASSERT_FALSE(error_back.ok());
  EXPECT_EQ(error_back.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(error_back.status().message(), "spec.x: bad");
}

}  // namespace
}  // namespace trainlet
