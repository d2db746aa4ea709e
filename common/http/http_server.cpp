// The only file that includes httplib.h (compile time: see http_server.h).
#include "common/http/http_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace trainlet {

// What the loop and httplib's threads share; every member below `mu` is guarded by it.
struct HttpServer::Impl {
  struct Pending {
    HttpRequest request;
    HttpResponse response;
    bool done = false;
  };

  Options options;
  HttpHandler handler;  // called on the loop only
  std::unique_ptr<httplib::Server> server;
  std::thread listener;
  std::string bound_address;
  uint16_t port = 0;
  int wake_read = -1;  // readable while `queue` may hold requests
  int wake_write = -1;

  std::mutex mu;
  std::condition_variable answered;
  std::deque<std::shared_ptr<Pending>> queue;
  bool stopping = false;

  ~Impl() {
    if (server) server->stop();
    if (listener.joinable()) listener.join();
    if (wake_read >= 0) close(wake_read);
    if (wake_write >= 0) close(wake_write);
  }

  // On an httplib thread: queue the request for the loop and wait for its answer.
  HttpResponse AskLoop(HttpRequest request) {
    auto pending = std::make_shared<Pending>();
    pending->request = std::move(request);
    std::unique_lock lock(mu);
    if (stopping) return HttpResponse{503, "text/plain; charset=utf-8", "stopping\n", {}};
    queue.push_back(pending);
    const char byte = 1;
    [[maybe_unused]] ssize_t n = write(wake_write, &byte, 1);  // full pipe: already awake
    if (!answered.wait_for(lock, options.loop_timeout, [&] { return pending->done || stopping; })) {
      std::erase(queue, pending);
      return HttpResponse{503, "text/plain; charset=utf-8", "the event loop did not answer\n", {}};
    }
    if (!pending->done) return HttpResponse{503, "text/plain; charset=utf-8", "stopping\n", {}};
    return std::move(pending->response);
  }

  void Serve(const httplib::Request& req, httplib::Response& res) {
    HttpRequest request;
    request.method = req.method;
    request.path = req.path;
    request.authorization = req.get_header_value("Authorization");
    request.body = req.body;
    request.tls = !options.tls_cert_file.empty();
    HttpResponse answer = AskLoop(std::move(request));
    res.status = answer.status;
    for (auto& [k, v] : answer.headers) res.set_header(k.c_str(), v);
    res.set_content(std::move(answer.body), answer.content_type.c_str());
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->answered.notify_all();
}

int HttpServer::fd() const { return impl_->wake_read; }
const std::string& HttpServer::bound_address() const { return impl_->bound_address; }
uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::Handle() {
  char drain[256];
  while (read(impl_->wake_read, drain, sizeof drain) > 0) {
  }
  std::deque<std::shared_ptr<Impl::Pending>> batch;
  {
    std::lock_guard lock(impl_->mu);
    batch.swap(impl_->queue);
  }
  for (auto& pending : batch) {
    HttpResponse response = impl_->handler(pending->request);  // no lock held: the loop's work
    std::lock_guard lock(impl_->mu);
    pending->response = std::move(response);
    pending->done = true;
  }
  if (!batch.empty()) impl_->answered.notify_all();
}

namespace {

Status OpenWakePipe(int* read_end, int* write_end) {
  int fds[2];
  if (pipe(fds) != 0) return InternalError(std::string("pipe: ") + std::strerror(errno));
  for (int fd : fds) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  *read_end = fds[0];
  *write_end = fds[1];
  return Status::Ok();
}

// SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second daemon bind a
// port this one holds and take half its connections.
void SocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  fcntl(sock, F_SETFD, FD_CLOEXEC);  // ranks the daemon starts must not inherit the listener
}

// Bodies for the answers httplib gives by itself.
std::string ReasonOf(int status) {
  switch (status) {
    case 400:
      return "bad request\n";
    case 404:
      return "not found\n";
    case 413:
      return "request body too large\n";
    case 414:
      return "request line too long\n";
    default:
      return "error " + std::to_string(status) + "\n";
  }
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const Options& options, HttpHandler handler) {
  TRAINLET_ASSIGN_OR_RETURN(auto host_port, SplitHostPort(options.address));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return InvalidError("HTTPS needs both a certificate and a key file");
  }
  if (options.tls_cert_file.empty()) {
    impl->server = std::make_unique<httplib::Server>();
  } else {
    impl->server = std::make_unique<httplib::SSLServer>(options.tls_cert_file.c_str(),
                                                        options.tls_key_file.c_str());
  }
  if (!impl->server->is_valid()) {
    return InvalidError("HTTPS on " + options.address + ": cannot load " + options.tls_cert_file +
                        " and " + options.tls_key_file);
  }
  TRAINLET_RETURN_IF_ERROR(OpenWakePipe(&impl->wake_read, &impl->wake_write));
  httplib::Server& s = *impl->server;
  const size_t threads = options.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_socket_options(SocketOptions);
  s.set_tcp_nodelay(true);  // a head and a body in two writes must not wait for a delayed ACK
  s.set_payload_max_length(options.max_body_bytes);
  s.set_read_timeout(options.io_timeout);
  s.set_write_timeout(options.io_timeout);
  s.set_keep_alive_timeout(options.io_timeout.count());
  s.set_keep_alive_max_count(options.keep_alive ? 100 : 1);
  Impl* raw = impl.get();
  auto serve = [raw](const httplib::Request& req, httplib::Response& res) { raw->Serve(req, res); };
  s.Get(".*", serve).Post(".*", serve).Put(".*", serve).Patch(".*", serve).Delete(".*", serve);
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      res.set_content(ReasonOf(res.status), "text/plain; charset=utf-8");
    }
  });

  const std::string host = host_port.first.empty() ? "0.0.0.0" : host_port.first;
  errno = 0;
  int port = host_port.second;
  if (port == 0) {
    port = s.bind_to_any_port(host);
  } else if (!s.bind_to_port(host, port)) {
    port = -1;
  }
  if (port < 0) {
    const int err = errno;
    const std::string why = err != 0 ? std::strerror(err) : "cannot bind";
    if (err == EADDRINUSE) {
      return Status(ErrorCode::kExists, "address \"" + options.address + "\": " + why);
    }
    return UnavailableError("address \"" + options.address + "\": " + why);
  }
  impl->port = static_cast<uint16_t>(port);
  impl->bound_address =
      (host.find(':') != host.npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  impl->listener = std::thread([raw] { raw->server->listen_after_bind(); });
  // httplib's stop() does nothing before the listener runs, so a server destroyed at once would
  // leave it listening and the destructor waiting for it: wait until it runs.
  while (!raw->server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace trainlet
