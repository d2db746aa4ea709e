#include "agent/http_request_head.h"

#include <algorithm>

namespace trainlet::agent {
namespace {

// Views, not copies: a kept-alive rank's post is parsed without allocating for its head.
std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// ASCII only, inline: header names and these values are ASCII, and std::tolower is a call into
// the C library per character (1% of the agent's CPU per post in bench/progress's profile).
char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsLower(std::string_view s, std::string_view lower) {
  return std::equal(s.begin(), s.end(), lower.begin(), lower.end(),
                    [](char a, char b) { return AsciiLower(a) == b; });
}

bool ContainsLower(std::string_view s, std::string_view lower) {
  return std::search(s.begin(), s.end(), lower.begin(), lower.end(),
                     [](char a, char b) { return AsciiLower(a) == b; }) != s.end();
}

}  // namespace

HttpResponse PlainHttpResponse(int status, const std::string& body) {
  return HttpResponse{status, "text/plain; charset=utf-8", body + "\n", {}};
}

HttpRequestHead ParseHttpRequestHead(std::string_view head) {
  HttpRequestHead h;
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) {
    h.error = PlainHttpResponse(400, "bad request line");
    return h;
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    h.error = PlainHttpResponse(400, "bad request line");
    return h;
  }
  h.request.method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.request.path = target.substr(0, target.find('?'));
  h.keep_alive = version == "HTTP/1.1";
  size_t at = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view field = head.substr(at, end - at);
    at = end + 2;
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(field.substr(0, colon));
    const std::string_view value = Trim(field.substr(colon + 1));
    if (EqualsLower(name, "authorization")) {
      h.request.authorization = value;
    } else if (EqualsLower(name, "content-length")) {
      if (value.empty() || value.size() > 18 ||
          value.find_first_not_of("0123456789") != value.npos) {
        h.error = PlainHttpResponse(400, "bad Content-Length");
        return h;
      }
      h.content_length = 0;
      for (const char d : value) h.content_length = h.content_length * 10 + (d - '0');
    } else if (EqualsLower(name, "transfer-encoding")) {
      h.error = PlainHttpResponse(411, "a Content-Length is required");
      return h;
    } else if (EqualsLower(name, "connection")) {
      if (ContainsLower(value, "close")) h.keep_alive = false;
      if (ContainsLower(value, "keep-alive")) h.keep_alive = true;
    } else if (EqualsLower(name, "expect")) {
      h.expect_continue = EqualsLower(value, "100-continue");
    }
  }
  return h;
}

}  // namespace trainlet::agent
