// ParseHttpRequestHead: the head of one HTTP/1.x request (request line and header fields, without
// the blank line that ends it), as ProgressHttpsServer receives it from a rank, or from anything
// else that reaches the progress port: untrusted bytes (fuzz/http_request_head_fuzz.cpp).
//
// It keeps what the progress endpoint needs: method, path (the target without its query),
// Authorization, Content-Length, keep-alive and Expect: 100-continue. What cannot be served is an
// `error` response naming why: a malformed request line or version (400), a Content-Length that
// is not 1-18 decimal digits (400), or any Transfer-Encoding (411: bodies must say their length).
// Header fields without a colon are skipped. Pure; any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/http/http_server.h"  // HttpRequest, HttpResponse

namespace trainlet::agent {

struct HttpRequestHead {
  HttpRequest request;
  size_t content_length = 0;
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  bool expect_continue = false;
  std::optional<HttpResponse> error;
};

// A text/plain response with `body` and a newline.
HttpResponse PlainHttpResponse(int status, const std::string& body);

HttpRequestHead ParseHttpRequestHead(std::string_view head);

}  // namespace trainlet::agent
