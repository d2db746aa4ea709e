// The progress port's request-head parser: what a rank's client sends, and what a hostile one
// might.
#include "agent/http_request_head.h"

#include <gtest/gtest.h>

namespace trainlet::agent {
namespace {

TEST(HttpRequestHeadTest, APostWithItsHeaders) {
  const auto h = ParseHttpRequestHead(
      "POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/j/status?x=1 "
      "HTTP/1.1\r\nHost: a\r\nAuthorization:  Bearer t0k \r\nContent-Length: 42\r\n"
      "expect: 100-Continue\r\n");
  ASSERT_FALSE(h.error.has_value());
  EXPECT_EQ(h.request.method, "POST");
  EXPECT_EQ(h.request.path,
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/j/status");
  EXPECT_EQ(h.request.authorization, "Bearer t0k");
  EXPECT_EQ(h.content_length, 42u);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_TRUE(h.expect_continue);
}

TEST(HttpRequestHeadTest, KeepAliveFollowsTheVersionAndTheConnectionField) {
  EXPECT_FALSE(ParseHttpRequestHead("GET / HTTP/1.0\r\n").keep_alive);
  EXPECT_TRUE(ParseHttpRequestHead("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n").keep_alive);
  EXPECT_FALSE(ParseHttpRequestHead("GET / HTTP/1.1\r\nConnection: close\r\n").keep_alive);
}

TEST(HttpRequestHeadTest, WhatCannotBeServedNamesWhy) {
  struct Case {
    const char* head;
    int status;
  };
  for (const Case& c : {Case{"GET", 400}, Case{"GET /", 400}, Case{"GET / HTTP/2.0", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: -1\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: 1e3\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: \r\n", 400},
                        Case{"GET / HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n", 400},
                        Case{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n", 411}}) {
    const auto h = ParseHttpRequestHead(c.head);
    ASSERT_TRUE(h.error.has_value()) << c.head;
    EXPECT_EQ(h.error->status, c.status) << c.head;
    EXPECT_FALSE(h.error->body.empty()) << c.head;
  }
}

TEST(HttpRequestHeadTest, FieldsWithoutAColonAreSkipped) {
  const auto h = ParseHttpRequestHead("GET /x HTTP/1.1\r\nno colon here\r\nContent-Length: 0\r\n");
  ASSERT_FALSE(h.error.has_value());
  EXPECT_EQ(h.request.path, "/x");
  EXPECT_EQ(h.content_length, 0u);
}

}  // namespace
}  // namespace trainlet::agent
