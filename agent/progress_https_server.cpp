#include "agent/progress_https_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "agent/http_request_head.h"

namespace trainlet::agent {
namespace {

constexpr size_t kMaxHead = 8 * 1024;  // request line and headers, as HttpServer allowed
constexpr auto kSweepPeriod = std::chrono::seconds(1);

// Poll-set tags: connections are tagged by socket (odd values, which no pointer to the listener
// or the timer can be), so an event for a connection closed earlier in the same batch finds
// nothing instead of a freed object.
void* SocketTag(int fd) { return reinterpret_cast<void*>((static_cast<uintptr_t>(fd) << 1) | 1); }
std::optional<int> TagSocket(void* tag) {
  const auto v = reinterpret_cast<uintptr_t>(tag);
  if ((v & 1) == 0) return std::nullopt;
  return static_cast<int>(v >> 1);
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

}  // namespace

struct ProgressHttpsServer::Connection {
  int fd = -1;
  SSL* ssl = nullptr;
  bool ready = false;          // the TLS handshake is done
  bool wants_write = false;    // the last TLS call needs the socket writable
  bool polled_write = false;   // what the poll set waits for now: writable,
  bool polled_read = true;     // and readable (not while max_unsent_bytes of answers wait)
  bool close_after = false;    // close once `out` is written
  bool draining = false;       // answered and shut down for writing: discard what still comes
  bool continue_sent = false;  // "100 Continue" sent for the request in `in`
  std::string in;              // bytes of requests not yet answered
  std::string out;             // answers not yet written, from out_at
  size_t out_at = 0;
  Clock::time_point since;  // the last progress either way

  ~Connection() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

ProgressHttpsServer::ProgressHttpsServer(Options options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

ProgressHttpsServer::~ProgressHttpsServer() {
  connections_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

namespace {

// The server's TLS context, or kInvalid naming the files.
Result<SSL_CTX*> MakeContext(const std::string& cert, const std::string& key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Not SSL_MODE_RELEASE_BUFFERS: it frees and allocates both ~17 KiB record buffers at every
  // post (four malloc calls of the large-chunk kind). A connection keeps them while it posts;
  // Sweep gives them back once it has been idle for a sweep period.
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_num_tickets(ctx, 1);  // one resumption ticket per handshake is enough
  // Read whole socket buffers, not a record header then its body: one read per post.
  SSL_CTX_set_read_ahead(ctx, 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    char why[256] = "";
    ERR_error_string_n(ERR_get_error(), why, sizeof why);
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return InvalidError("HTTPS: cannot load " + cert + " and " + key + ": " + why);
  }
  return ctx;
}

// A listening, non-blocking socket on host:port; kExists when the port is taken.
Result<int> Listen(const std::string& host, uint16_t port) {
  const std::string shown =
      (host.find(':') != host.npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc =
          getaddrinfo(host.empty() ? "0.0.0.0" : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return UnavailableError("address \"" + shown + "\": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError("address \"" + shown + "\": " + std::strerror(errno));
  // SO_REUSEADDR only (not SO_REUSEPORT, which would let a second agent share the port).
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 256) != 0) {
    const int err = errno;
    close(fd);
    const std::string message = "address \"" + shown + "\": " + std::strerror(err);
    return err == EADDRINUSE ? Status(ErrorCode::kExists, message) : UnavailableError(message);
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<ProgressHttpsServer>> ProgressHttpsServer::Start(const Options& options,
                                                                        HttpHandler handler) {
  std::unique_ptr<ProgressHttpsServer> s(new ProgressHttpsServer(options, std::move(handler)));
  TRAINLET_ASSIGN_OR_RETURN(s->listen_fd_, Listen(options.host, options.port));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (options.tls && !options.prepare_tls) {
    TRAINLET_ASSIGN_OR_RETURN(s->ctx_, MakeContext(options.tls_cert_file, options.tls_key_file));
  }
  TRAINLET_ASSIGN_OR_RETURN(s->poll_, platform::PollSet::Open());
  if (const int err = s->poll_->Add(s->listen_fd_, platform::PollSet::kReadable, s.get());
      err != 0) {
    return InternalError(std::string("adding the listener to the poll set: ") + strerror(err));
  }
  TRAINLET_ASSIGN_OR_RETURN(s->interrupt_, platform::WakeEvent::Open());
  if (const int err =
          s->poll_->Add(s->interrupt_->fd(), platform::PollSet::kReadable, s->interrupt_.get());
      err != 0) {
    return InternalError(std::string("adding the interrupt to the poll set: ") + strerror(err));
  }
  return s;
}

void ProgressHttpsServer::OnReadable() { Dispatch(poll_->Ready(64)); }

bool ProgressHttpsServer::Wait(int timeout_ms) { return Dispatch(poll_->Wait(64, timeout_ms)); }

bool ProgressHttpsServer::Dispatch(const std::vector<platform::PollSet::Event>& events) {
  for (const auto& ready : events) {
    if (ready.tag == interrupt_.get()) return false;
  }
  // One clock read per wake-up, not one per read and write: the posts of one wake-up are served
  // within microseconds of each other, and the timeouts are seconds.
  now_ = Clock::now();
  // OpenSSL's error queue is emptied here once, and after each call that failed, rather than
  // before every SSL_read and SSL_write (SSL_get_error needs it empty; clearing it costs a
  // thread-local lookup each time).
  ERR_clear_error();
  for (const auto& ready : events) {
    if (ready.tag == this) {
      Accept();
    } else if (sweep_ && ready.tag == sweep_.get()) {
      if (sweep_->Consume()) Sweep(now_);
    } else if (const auto fd = TagSocket(ready.tag)) {
      auto it = connections_.find(*fd);
      if (it != connections_.end()) Drive(*it->second);
    }
  }
  if (connections_.empty()) sweep_.reset();  // an idle agent is not woken every second
  return true;
}

void ProgressHttpsServer::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection that went before we took it
    if (connections_.size() >= options_.max_connections) CloseOldestIdle();
    if (connections_.size() >= options_.max_connections || (options_.tls && !TlsReady())) {
      close(fd);
      continue;
    }
    ERR_clear_error();  // whatever loading the TLS files left
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // head and body, one round trip
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->since = now_;
    c->ready = !options_.tls;  // plain HTTP: no handshake
    if (options_.tls) {
      c->ssl = SSL_new(ctx_);
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) continue;  // c closes the socket
      SSL_set_accept_state(c->ssl);
    }
    if (poll_->Add(fd, platform::PollSet::kReadable, SocketTag(fd)) != 0) continue;
    connections_[fd] = std::move(c);
    if (!sweep_) {  // without it (no timerfd left) timeouts wait for the next event
      if (auto timer = platform::PeriodicTimer::Open(kSweepPeriod); timer.ok()) {
        sweep_ = std::move(timer).value();
        poll_->Add(sweep_->fd(), platform::PollSet::kReadable, sweep_.get());
      }
    }
  }
}

bool ProgressHttpsServer::TlsReady() {
  if (ctx_ != nullptr) return true;
  Status prepared = options_.prepare_tls();
  if (prepared.ok()) {
    auto ctx = MakeContext(options_.tls_cert_file, options_.tls_key_file);
    if (ctx.ok()) {
      ctx_ = *ctx;
      return true;
    }
    prepared = ctx.status();
  }
  spdlog::warn("progress endpoint: cannot serve HTTPS: {}", prepared.message());
  return false;
}

void ProgressHttpsServer::Drive(Connection& c) {
  const auto full = [&] { return c.out.size() - c.out_at > options_.max_unsent_bytes; };
  bool alive = Handshake(c);
  if (alive && c.ready) {
    // Not read while max_unsent_bytes of answers wait: read on once the client has taken them.
    if (!full()) alive = ReadRequests(c);
    // Answer, write, and again while writing made room for requests already read. A pass that
    // began full answers nothing before its write makes room, so it goes round again even so:
    // the requests left in `in` may be the client's last ones, with nothing more in the socket
    // to wake the poll set for them (the connection would stall until the sweep closed it;
    // AnswersWaitingForRoomComeOnceTheClientReads in progress_https_server_test).
    while (alive) {
      const size_t waiting = c.in.size();
      const bool was_full = full();
      alive = AnswerRequests(c) && Flush(c);
      if (c.close_after || full()) break;
      if (c.in.size() == waiting && !was_full) break;
    }
  }
  if (!alive) return Close(c.fd);
  if (c.close_after && c.out_at == c.out.size() && !c.draining) {
    // Answered and closing: say so to TLS and TCP, then read what the client still sends until
    // it closes (the sweep ends it otherwise), so that closing with unread data does not reset
    // the connection before the client has read the answer (a 413 to a 10 MB upload).
    if (c.ssl != nullptr) {
      SSL_shutdown(c.ssl);
      ERR_clear_error();
    }
    shutdown(c.fd, SHUT_WR);
    c.draining = true;
  }
  const bool want_write = c.wants_write || c.out_at < c.out.size();
  const bool want_read = !full();
  if (want_write != c.polled_write || want_read != c.polled_read) {
    c.polled_write = want_write;
    c.polled_read = want_read;
    poll_->Modify(c.fd,
                  (want_read ? platform::PollSet::kReadable : 0) |
                      (want_write ? platform::PollSet::kWritable : 0),
                  SocketTag(c.fd));
  }
}

bool ProgressHttpsServer::Handshake(Connection& c) {
  if (c.ready) return true;
  const int rc = SSL_do_handshake(c.ssl);
  if (rc == 1) {
    c.ready = true;
    c.wants_write = false;
    c.since = now_;
    return true;
  }
  const int err = SSL_get_error(c.ssl, rc);
  c.wants_write = err == SSL_ERROR_WANT_WRITE;
  ERR_clear_error();
  // Anything else (plain HTTP on this port, a client that does not trust the CA): no answer.
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
}

ssize_t ProgressHttpsServer::ReadSome(Connection& c, char* buf, size_t size) {
  if (c.ssl == nullptr) {
    const ssize_t n = recv(c.fd, buf, size, 0);
    if (n > 0) return n;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
  }
  const int n = SSL_read(c.ssl, buf, static_cast<int>(size));
  if (n > 0) return n;
  const int err = SSL_get_error(c.ssl, n);
  ERR_clear_error();
  if (err == SSL_ERROR_WANT_WRITE) c.wants_write = true;
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

ssize_t ProgressHttpsServer::WriteSome(Connection& c, const char* data, size_t size) {
  size = std::min<size_t>(size, 1 << 20);
  if (c.ssl == nullptr) {
    const ssize_t n = send(c.fd, data, size, MSG_NOSIGNAL);
    if (n > 0) return n;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      c.wants_write = true;
      return 0;
    }
    return -1;
  }
  const int n = SSL_write(c.ssl, data, static_cast<int>(size));
  if (n > 0) return n;
  const int err = SSL_get_error(c.ssl, n);
  ERR_clear_error();
  c.wants_write = err == SSL_ERROR_WANT_WRITE;
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

bool ProgressHttpsServer::ReadRequests(Connection& c) {
  char buf[16 * 1024];
  for (;;) {
    // A request being refused is not read further; only a draining connection reads on.
    if (c.close_after && !c.draining) return true;
    const ssize_t n = ReadSome(c, buf, sizeof buf);
    if (n < 0) return false;  // the client closed, or the connection broke
    if (n == 0) return true;
    if (!c.draining) c.in.append(buf, static_cast<size_t>(n));
    c.since = now_;
    // No read to learn the socket is empty (one syscall less per post): what is left in the
    // socket wakes the poll set again; only what OpenSSL holds already must be read now.
    if (c.ssl == nullptr || !SSL_has_pending(c.ssl)) return true;
  }
}

bool ProgressHttpsServer::AnswerRequests(Connection& c) {
  while (!c.close_after && c.out.size() - c.out_at <= options_.max_unsent_bytes) {
    const size_t head_end = c.in.find("\r\n\r\n");
    if (head_end == std::string::npos) {
      if (c.in.size() > kMaxHead) {
        const bool line_done = c.in.find("\r\n") < kMaxHead;
        Answer(c,
               PlainHttpResponse(line_done ? 431 : 414,
                                 line_done ? "request head too large" : "request line too long"),
               true);
      }
      return true;
    }
    if (head_end > kMaxHead) {
      Answer(c, PlainHttpResponse(431, "request head too large"), true);
      return true;
    }
    HttpRequestHead head = ParseHttpRequestHead(std::string_view(c.in).substr(0, head_end));
    if (head.error) {
      Answer(c, *head.error, true);
      return true;
    }
    if (head.content_length > options_.max_body_bytes) {
      Answer(c, PlainHttpResponse(413, "request body too large"), true);
      return true;
    }
    const size_t total = head_end + 4 + head.content_length;
    if (c.in.size() < total) {
      if (head.expect_continue && !c.continue_sent) {
        c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        c.continue_sent = true;
      }
      return true;
    }
    head.request.body = c.in.substr(head_end + 4, head.content_length);
    head.request.tls = options_.tls;
    c.in.erase(0, total);
    c.continue_sent = false;
    Answer(c, handler_(head.request), !head.keep_alive, head.request.method == "HEAD");
  }
  return true;
}

void ProgressHttpsServer::Answer(Connection& c, const HttpResponse& r, bool close, bool head_only) {
  std::string& out = c.out;  // appended piece by piece: no temporaries per answer
  out.append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ").append(Reason(r.status));
  out.append("\r\nContent-Type: ").append(r.content_type);
  out.append("\r\nContent-Length: ").append(std::to_string(r.body.size())).append("\r\n");
  for (const auto& [name, value] : r.headers) out.append(name).append(": ").append(value) += "\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_only) out += r.body;  // HEAD: the length the body would have, not the body
  c.close_after = c.close_after || close;
}

bool ProgressHttpsServer::Flush(Connection& c) {
  while (c.out_at < c.out.size()) {
    const ssize_t n = WriteSome(c, c.out.data() + c.out_at, c.out.size() - c.out_at);
    if (n > 0) {
      c.out_at += static_cast<size_t>(n);
      c.since = now_;
      continue;
    }
    // A client that reads slowly but always: drop what it took, or `out` grows without end
    // (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER lets the retry start at the moved bytes).
    if (c.out_at >= 64 * 1024) {
      c.out.erase(0, c.out_at);
      c.out_at = 0;
    }
    return n == 0;
  }
  c.out.clear();
  c.out_at = 0;
  c.wants_write = false;
  return true;
}

void ProgressHttpsServer::Close(int fd) {
  poll_->Remove(fd);
  connections_.erase(fd);  // the Connection frees its SSL and closes the socket
}

void ProgressHttpsServer::Sweep(Clock::time_point now) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    const Connection& c = *it->second;
    const bool between_requests = c.ready && !c.draining && c.in.empty() && c.out.empty();
    const auto limit = between_requests ? options_.idle_timeout : options_.io_timeout;
    const int fd = it->first;
    ++it;
    if (now - c.since > limit) {
      Close(fd);
    } else if (between_requests && c.ssl != nullptr && now - c.since >= kSweepPeriod) {
      // Idle for a sweep period: its record buffers go back (a no-op once they have; OpenSSL
      // keeps them while it holds unread bytes) and come again with the next post.
      SSL_free_buffers(c.ssl);
    }
  }
}

void ProgressHttpsServer::CloseOldestIdle() {
  const Connection* oldest = nullptr;
  for (const auto& [fd, c] : connections_) {
    if (c->in.empty() && c->out.empty() && (oldest == nullptr || c->since < oldest->since)) {
      oldest = c.get();
    }
  }
  if (oldest != nullptr) Close(oldest->fd);
}

size_t ProgressHttpsServer::unsent_bytes() const {
  size_t total = 0;
  for (const auto& [fd, c] : connections_) total += c->out.size() - c->out_at;
  return total;
}

}  // namespace trainlet::agent
