#include "agent/http_request_head.h"

#include <algorithm>
#include <cctype>

namespace trainlet::agent {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

HttpResponse PlainHttpResponse(int status, const std::string& body) {
  return HttpResponse{status, "text/plain; charset=utf-8", body + "\n", {}};
}

HttpRequestHead ParseHttpRequestHead(const std::string& head) {
  HttpRequestHead h;
  const size_t line_end = head.find("\r\n");
  const std::string line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) {
    h.error = PlainHttpResponse(400, "bad request line");
    return h;
  }
  h.request.method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.request.path = target.substr(0, target.find('?'));
  const std::string version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    h.error = PlainHttpResponse(400, "bad request line");
    return h;
  }
  h.keep_alive = version == "HTTP/1.1";
  size_t at = line_end == std::string::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string::npos) end = head.size();
    const std::string field = head.substr(at, end - at);
    at = end + 2;
    const size_t colon = field.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = Lower(Trim(field.substr(0, colon)));
    const std::string value = Trim(field.substr(colon + 1));
    if (name == "authorization") {
      h.request.authorization = value;
    } else if (name == "content-length") {
      if (value.empty() || value.size() > 18 ||
          value.find_first_not_of("0123456789") != value.npos) {
        h.error = PlainHttpResponse(400, "bad Content-Length");
        return h;
      }
      h.content_length = std::stoull(value);
    } else if (name == "transfer-encoding") {
      h.error = PlainHttpResponse(411, "a Content-Length is required");
      return h;
    } else if (name == "connection") {
      const std::string v = Lower(value);
      if (v.find("close") != std::string::npos) h.keep_alive = false;
      if (v.find("keep-alive") != std::string::npos) h.keep_alive = true;
    } else if (name == "expect") {
      h.expect_continue = Lower(value) == "100-continue";
    }
  }
  return h;
}

}  // namespace trainlet::agent
