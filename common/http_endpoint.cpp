#include "common/http_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/platform/descriptors.h"

namespace trainlet {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Listen(const std::string& address,
                                                           HttpHandler handler) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidError("metrics address \"" + address + "\": expected host:port");
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
      rc != 0) {
    return InvalidError("metrics address \"" + address + "\": " + gai_strerror(rc));
  }
  std::unique_ptr<HttpEndpoint> ep(new HttpEndpoint(std::move(handler)));
  std::string last_error = "no address";
  bool in_use = false;
  for (addrinfo* ai = res; ai != nullptr && ep->listen_fd_ < 0; ai = ai->ai_next) {
    int fd =
        platform::OpenSocket(ai->ai_family, ai->ai_socktype, 0, platform::Blocking::kNonBlocking);
    if (fd < 0) {
      last_error = Errno();
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      in_use = in_use || errno == EADDRINUSE;
      last_error = Errno();
      close(fd);
      continue;
    }
    ep->listen_fd_ = fd;
  }
  freeaddrinfo(res);
  if (ep->listen_fd_ < 0) {
    if (in_use)
      return Status(ErrorCode::kExists, "metrics address \"" + address + "\": " + last_error);
    return UnavailableError("metrics address \"" + address + "\": " + last_error);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(ep->listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  char name[INET6_ADDRSTRLEN] = {0};
  uint16_t bound_port = 0;
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, name, sizeof name);
    bound_port = ntohs(a->sin6_port);
    ep->bound_address_ = std::string("[") + name + "]:" + std::to_string(bound_port);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, name, sizeof name);
    bound_port = ntohs(a->sin_port);
    ep->bound_address_ = std::string(name) + ":" + std::to_string(bound_port);
  }
  TRAINLET_ASSIGN_OR_RETURN(ep->poll_set_, platform::PollSet::Open());
  // A null tag marks the listening socket.
  if (const int err = ep->poll_set_->Add(ep->listen_fd_, platform::PollSet::kReadable, nullptr);
      err != 0) {
    return InternalError(std::string("adding the listening socket to a poll set: ") +
                         std::strerror(err));
  }
  return ep;
}

HttpEndpoint::~HttpEndpoint() {
  for (auto& c : connections_) close(c.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

void HttpEndpoint::Close(std::list<Connection>::iterator it) {
  close(it->fd);  // also leaves the poll set
  connections_.erase(it);
}

void HttpEndpoint::Accept() {
  while (true) {
    int fd = platform::AcceptConnection(listen_fd_, platform::Blocking::kNonBlocking);
    if (fd < 0) return;  // EAGAIN, or an aborted connection: nothing to do either way
    if (connections_.size() >= kMaxConnections) Close(connections_.begin());
    Connection& c = connections_.emplace_back();
    c.fd = fd;
    c.opened = std::chrono::steady_clock::now();
    // Tagged with its list node, which never moves.
    if (poll_set_->Add(fd, platform::PollSet::kReadable, &c) != 0) {
      Close(std::prev(connections_.end()));
    }
  }
}

void HttpEndpoint::Respond(Connection& c, int status, const std::string& content_type,
                           std::string body, bool head) {
  c.out = "HTTP/1.0 " + std::to_string(status) + " " + Reason(status) +
          "\r\nContent-Type: " + content_type +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) c.out += body;
  c.written = 0;
  poll_set_->Modify(c.fd, platform::PollSet::kWritable, &c);
}

void HttpEndpoint::OnReadable(Connection& c) {
  char buf[4096];
  while (c.out.empty()) {
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      c.in.clear();
      c.out = "x";  // peer closed or failed: mark for closing
      c.written = c.out.size();
      return;
    }
    c.in.append(buf, static_cast<size_t>(n));
    size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) end = c.in.find("\n\n");
    if (end == std::string::npos) {
      if (c.in.size() > kMaxRequestBytes) {
        Respond(c, 431, "text/plain; charset=utf-8", "request head too large\n", false);
      }
      continue;
    }
    if (end > kMaxRequestBytes) {
      Respond(c, 431, "text/plain; charset=utf-8", "request head too large\n", false);
      return;
    }
    const std::string line = c.in.substr(0, c.in.find_first_of("\r\n"));
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos ||
        line.compare(sp2 + 1, 5, "HTTP/") != 0) {
      Respond(c, 400, "text/plain; charset=utf-8", "bad request line\n", false);
      return;
    }
    const std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    if (method != "GET" && method != "HEAD") {
      Respond(c, 405, "text/plain; charset=utf-8", "only GET and HEAD\n", false);
      return;
    }
    HttpResponse r = handler_(path);
    Respond(c, r.status, r.content_type, std::move(r.body), method == "HEAD");
  }
}

bool HttpEndpoint::Write(Connection& c) {
  while (c.written < c.out.size()) {
    const ssize_t n =
        platform::SendNoSignal(c.fd, c.out.data() + c.written, c.out.size() - c.written, 0);
    if (n < 0) return !(errno == EAGAIN || errno == EINTR);  // a failed peer is done too
    c.written += static_cast<size_t>(n);
  }
  return true;
}

void HttpEndpoint::Handle() {
  for (const auto& ready : poll_set_->Ready(64)) {
    if (ready.tag == nullptr) {
      Accept();
      continue;
    }
    auto* c = static_cast<Connection*>(ready.tag);
    // The connection may have been closed by Accept() evicting it in this same batch.
    auto it = connections_.begin();
    while (it != connections_.end() && &*it != c) ++it;
    if (it == connections_.end()) continue;
    if (it->out.empty()) OnReadable(*it);
    if (!it->out.empty() && Write(*it)) Close(it);
  }
  const auto now = std::chrono::steady_clock::now();
  while (!connections_.empty() && now - connections_.front().opened > kConnectionTimeout) {
    Close(connections_.begin());
  }
}

}  // namespace trainlet
