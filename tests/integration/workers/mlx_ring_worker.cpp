// A stand-in for an MLX ring-backend rank, for tests: it follows MLX's contract for processes
// started without mlx.launch. MLX_RANK is this rank; MLX_HOSTFILE names a JSON list with one entry
// per rank, each a list of "ip:port" strings (one per connection). Each rank listens on its own
// addresses, connects to rank + 1's (its right neighbour) and accepts rank - 1's, checks who is on
// each connection, then sums a vector around the ring (each connection carries a slice of it).
// Prints "mlx ring rank R of W: sum OK ..." and exits 0 when every element is right.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kElements = 1024;  // 8 KiB a step: fits the socket buffers
constexpr auto kConnectTimeout = std::chrono::seconds(30);

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "mlx_ring_worker: %s\n", what.c_str());
  std::exit(2);
}

struct HostPort {
  std::string host;
  std::string port;
};

HostPort Split(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) Die("address without a port: " + text);
  std::string host = text.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, text.substr(colon + 1)};
}

addrinfo* Resolve(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &res) != 0 || res == nullptr) {
    Die("cannot parse address " + hp.host + ":" + hp.port);
  }
  return res;
}

int Listen(const HostPort& hp) {
  addrinfo* ai = Resolve(hp);
  const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // The agent may still be handing the reserved port over: retry briefly.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      Die("bind " + hp.host + ":" + hp.port + ": " + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  freeaddrinfo(ai);
  if (listen(fd, 16) != 0) Die(std::string("listen: ") + std::strerror(errno));
  return fd;
}

int Connect(const HostPort& hp) {
  const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
  for (;;) {
    addrinfo* ai = Resolve(hp);
    const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    const int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    close(fd);
    if (std::chrono::steady_clock::now() > deadline) {
      Die("connect " + hp.host + ":" + hp.port + ": " + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) Die(std::string("send: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) Die(k == 0 ? "peer closed" : std::string("recv: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

int main() {
  const char* rank_env = std::getenv("MLX_RANK");
  const char* hostfile = std::getenv("MLX_HOSTFILE");
  if (rank_env == nullptr || hostfile == nullptr) Die("MLX_RANK and MLX_HOSTFILE must be set");
  std::ifstream in(hostfile);
  if (!in) Die(std::string("cannot read MLX_HOSTFILE ") + hostfile);
  const nlohmann::json hosts = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!hosts.is_array() || hosts.empty()) Die("MLX_HOSTFILE is not a non-empty JSON list");
  const auto world = static_cast<uint32_t>(hosts.size());
  const auto rank = static_cast<uint32_t>(std::strtoul(rank_env, nullptr, 10));
  if (rank >= world) Die("MLX_RANK out of range");
  const size_t links = hosts[rank].size();
  for (const auto& h : hosts) {
    if (!h.is_array() || h.size() != links || links == 0) {
      Die("every rank must list the same number (> 0) of addresses");
    }
  }
  const uint32_t right = (rank + 1) % world;
  const uint32_t left = (rank + world - 1) % world;

  std::vector<double> mine(kElements), sum(kElements), passing(kElements);
  for (size_t i = 0; i < kElements; ++i) mine[i] = static_cast<double>((rank + 1) * (i + 1));
  sum = mine;

  if (world > 1) {
    std::vector<int> listeners, to_right, from_left;
    for (size_t c = 0; c < links; ++c) listeners.push_back(Listen(Split(hosts[rank][c])));
    for (size_t c = 0; c < links; ++c) {
      to_right.push_back(Connect(Split(hosts[right][c])));
      const uint32_t hello[2] = {rank, static_cast<uint32_t>(c)};
      SendAll(to_right.back(), hello, sizeof(hello));
    }
    for (size_t c = 0; c < links; ++c) {
      const int fd = accept(listeners[c], nullptr, nullptr);
      if (fd < 0) Die(std::string("accept: ") + std::strerror(errno));
      uint32_t hello[2];
      RecvAll(fd, hello, sizeof(hello));
      if (hello[0] != left || hello[1] != c) {
        Die("connection " + std::to_string(c) + " came from rank " + std::to_string(hello[0]) +
            " link " + std::to_string(hello[1]) + ", expected rank " + std::to_string(left));
      }
      from_left.push_back(fd);
    }
    // W - 1 steps: pass along what came from the left (first our own), add what arrives. Each
    // connection carries its own slice; messages are small enough for the socket buffers.
    passing = mine;
    const size_t slice = (kElements + links - 1) / links;
    for (uint32_t step = 0; step + 1 < world; ++step) {
      for (size_t c = 0; c < links; ++c) {
        const size_t lo = c * slice, n = std::min(slice, kElements - std::min(lo, kElements));
        if (n > 0) SendAll(to_right[c], passing.data() + lo, n * sizeof(double));
      }
      std::vector<double> incoming(kElements);
      for (size_t c = 0; c < links; ++c) {
        const size_t lo = c * slice, n = std::min(slice, kElements - std::min(lo, kElements));
        if (n > 0) RecvAll(from_left[c], incoming.data() + lo, n * sizeof(double));
      }
      for (size_t i = 0; i < kElements; ++i) sum[i] += incoming[i];
      passing = incoming;
    }
    for (int fd : to_right) close(fd);
    for (int fd : from_left) close(fd);
    for (int fd : listeners) close(fd);
  }

  const double tri = world * (world + 1) / 2.0;
  size_t wrong = 0;
  for (size_t i = 0; i < kElements; ++i) {
    if (sum[i] != tri * static_cast<double>(i + 1)) ++wrong;
  }
  char host[256] = "?";
  gethostname(host, sizeof(host));
  std::printf(
      "mlx ring rank %u of %u on %s: %zu connection(s) to rank %u, sum %s (sum[0] %g, "
      "expected %g)\n",
      rank, world, host, links, right, wrong == 0 ? "OK" : "WRONG", sum[0], tri);
  return wrong == 0 ? 0 : 1;
}
