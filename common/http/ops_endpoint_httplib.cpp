// OpsEndpoint::Create with cpp-httplib (HttpServer) as its HTTP server: the coordinator's.
// Apart from ops_endpoint.cpp so that a daemon passing its own server links no httplib.
#include <memory>
#include <string>

#include "common/http/http_server.h"
#include "common/ops_endpoint.h"

namespace trainlet {
namespace {

class HttplibOpsServer : public OpsHttpServer {
 public:
  explicit HttplibOpsServer(std::unique_ptr<HttpServer> server) : server_(std::move(server)) {}
  int fd() const override { return server_->fd(); }
  void OnReadable() override { server_->Handle(); }
  std::string bound_address() const override { return server_->bound_address(); }

 private:
  std::unique_ptr<HttpServer> server_;
};

}  // namespace

Result<std::unique_ptr<OpsEndpoint>> OpsEndpoint::Create(const std::string& metrics_address,
                                                         std::unique_ptr<ServiceNotifier> notifier,
                                                         bool best_effort) {
  auto start = [](const std::string& address, size_t max_body_bytes,
                  HttpHandler handler) -> Result<std::unique_ptr<OpsHttpServer>> {
    HttpServer::Options options;
    options.address = address;
    options.max_body_bytes = max_body_bytes;
    TRAINLET_ASSIGN_OR_RETURN(auto server, HttpServer::Start(options, std::move(handler)));
    return std::unique_ptr<OpsHttpServer>(new HttplibOpsServer(std::move(server)));
  };
  return Create(metrics_address, std::move(notifier), best_effort, start);
}

}  // namespace trainlet
