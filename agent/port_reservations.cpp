#include "agent/port_reservations.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/platform/descriptors.h"

namespace trainlet::agent {
namespace {

// An expired attempt is remembered this many hold timeouts, so a plan that comes late fails with
// a reason rather than starting ranks on ports that are no longer theirs.
constexpr int kExpiredMemory = 10;

std::optional<uint32_t> ParseUint32(std::string_view s) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// 0.0.0.0, and [::] where the host can bind IPv6 at all (a kernel without IPv6, or with it
// disabled, has no [::] that a program could take a port on).
std::vector<std::pair<sockaddr_storage, socklen_t>> WildcardAddresses() {
  std::vector<std::pair<sockaddr_storage, socklen_t>> out;
  sockaddr_storage v4{};
  reinterpret_cast<sockaddr_in*>(&v4)->sin_family = AF_INET;
  reinterpret_cast<sockaddr_in*>(&v4)->sin_addr.s_addr = htonl(INADDR_ANY);
  out.emplace_back(v4, static_cast<socklen_t>(sizeof(sockaddr_in)));
  sockaddr_storage v6{};
  reinterpret_cast<sockaddr_in6*>(&v6)->sin6_family = AF_INET6;
  reinterpret_cast<sockaddr_in6*>(&v6)->sin6_addr = in6addr_any;
  const int fd = platform::OpenSocket(AF_INET6, SOCK_STREAM, 0);
  if (fd >= 0) {
    const int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&v6), sizeof(sockaddr_in6)) == 0) {
      out.emplace_back(v6, static_cast<socklen_t>(sizeof(sockaddr_in6)));
    }
    close(fd);
  }
  return out;
}

}  // namespace

Result<PortRange> ParsePortRange(std::string_view text, std::string_view key) {
  const auto bad = [&](const std::string& why) {
    return InvalidError((key.empty() ? "" : std::string(key) + ": ") + why + ", got \"" +
                        std::string(text) + "\"");
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos)
    return bad("must be a port range LOW-HIGH such as 20000-29999");
  auto low = ParseUint32(text.substr(0, dash));
  auto high = ParseUint32(text.substr(dash + 1));
  if (!low || !high) return bad("must be a port range LOW-HIGH such as 20000-29999");
  if (*low < 1 || *high > 65535) return bad("ports must be from 1 to 65535");
  if (*low > *high) return bad("LOW must not be above HIGH");
  return PortRange{static_cast<uint16_t>(*low), static_cast<uint16_t>(*high)};
}

Result<PortReservations> PortReservations::Create(const std::string& address, PortRange range,
                                                  std::chrono::milliseconds hold_timeout,
                                                  std::string journal_path) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr) {
    return InvalidError("address " + address +
                        ": cannot reserve worker ports on it: " + gai_strerror(rc));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  const socklen_t len = found->ai_addrlen;
  freeaddrinfo(found);
  return PortReservations(addr, len, address, range, hold_timeout, std::move(journal_path));
}

PortReservations::PortReservations(sockaddr_storage addr, socklen_t addr_len, std::string address,
                                   PortRange range, std::chrono::milliseconds hold_timeout,
                                   std::string journal_path)
    : addr_(addr),
      addr_len_(addr_len),
      address_(std::move(address)),
      wildcards_(WildcardAddresses()),
      range_(range),
      hold_timeout_(hold_timeout),
      journal_path_(std::move(journal_path)) {}

PortReservations::PortReservations(PortReservations&& other) noexcept
    : addr_(other.addr_),
      addr_len_(other.addr_len_),
      address_(std::move(other.address_)),
      wildcards_(std::move(other.wildcards_)),
      range_(other.range_),
      hold_timeout_(other.hold_timeout_),
      journal_path_(std::move(other.journal_path_)),
      cursor_(other.cursor_),
      attempts_(std::move(other.attempts_)),
      owned_(std::move(other.owned_)) {
  other.attempts_.clear();
  other.owned_.clear();
}

PortReservations& PortReservations::operator=(PortReservations&& other) noexcept {
  if (this != &other) {
    CloseAll();
    addr_ = other.addr_;
    addr_len_ = other.addr_len_;
    address_ = std::move(other.address_);
    wildcards_ = std::move(other.wildcards_);
    range_ = other.range_;
    hold_timeout_ = other.hold_timeout_;
    journal_path_ = std::move(other.journal_path_);
    cursor_ = other.cursor_;
    attempts_ = std::move(other.attempts_);
    owned_ = std::move(other.owned_);
    other.attempts_.clear();
    other.owned_.clear();
  }
  return *this;
}

PortReservations::~PortReservations() { CloseAll(); }

void PortReservations::CloseAll() {
  for (auto& [key, a] : attempts_) {
    for (int fd : a.fds) close(fd);
    a.fds.clear();
  }
}

int PortReservations::BindOn(sockaddr_storage addr, socklen_t addr_len, uint32_t port,
                             bool listen_too) {
  if (addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(static_cast<uint16_t>(port));
  }
  const int fd = platform::OpenSocket(addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  if (addr.ss_family == AF_INET6) {
    // [::] held v6-only beside 0.0.0.0: a dual-stack [::] would collide with our own 0.0.0.0.
    const int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (!listen_too) {
    // The probe only asks whether a rank could bind the port now. A connection our own held
    // socket had may leave the port in TIME_WAIT, which ranks binding with SO_REUSEADDR (as
    // torch's store does) ignore; anything bound or listening still refuses the probe.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0 ||
      (listen_too && listen(fd, 8) != 0)) {
    const int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int PortReservations::HoldPort(uint32_t port, std::vector<int>* fds) const {
  // The advertised address is only probed: a held wildcard of its family covers it (and would
  // refuse our own bind of it). The probe keeps a non-local address an error, as it always was.
  if (const int probe = BindOn(addr_, addr_len_, port, false); probe < 0) {
    return probe;
  } else {
    close(probe);
  }
  const size_t first = fds->size();
  for (const auto& [addr, len] : wildcards_) {
    const int fd = BindOn(addr, len, port, true);
    if (fd < 0) {
      for (size_t i = first; i < fds->size(); ++i) close((*fds)[i]);
      fds->resize(first);
      return fd;
    }
    fds->push_back(fd);
  }
  return 0;
}

int PortReservations::ProbePort(uint32_t port) const {
  const int fd = BindOn(addr_, addr_len_, port, false);
  if (fd < 0) return fd;
  close(fd);
  for (const auto& [addr, len] : wildcards_) {
    const int probe = BindOn(addr, len, port, false);
    if (probe < 0) return probe;
    close(probe);
  }
  return 0;
}

Result<std::vector<uint32_t>> PortReservations::Reserve(const std::string& job, uint32_t attempt,
                                                        uint32_t count, Clock::time_point now) {
  const AttemptKey key{job, attempt};
  if (auto it = attempts_.find(key); it != attempts_.end()) {
    if (it->second.phase != Phase::kExpired) return it->second.ports;
    Forget(it);  // asked again after the hold ran out: reserve afresh
  }
  Attempt a;
  a.deadline = now + hold_timeout_;
  const uint32_t size = range_.size();
  for (uint32_t tried = 0; tried < size && a.ports.size() < count; ++tried) {
    const uint32_t port = range_.low + cursor_;
    cursor_ = (cursor_ + 1) % size;
    if (owned_.count(port) != 0) continue;  // a live attempt's, bound or not
    const int fd = HoldPort(port, &a.fds);
    if (fd >= 0) {
      a.ports.push_back(port);
      continue;
    }
    if (-fd == EADDRINUSE || -fd == EACCES) continue;  // another process's (or privileged)
    for (int held : a.fds) close(held);
    return InternalError("cannot reserve port " + std::to_string(port) + " on " + address_ + ": " +
                         std::strerror(-fd));
  }
  if (a.ports.size() < count) {
    for (int held : a.fds) close(held);
    return UnavailableError("no free port in " + range_.ToString() + " on " + address_ + " (" +
                            std::to_string(count) + " needed, " + std::to_string(a.ports.size()) +
                            " free)");
  }
  owned_.insert(a.ports.begin(), a.ports.end());
  std::vector<uint32_t> ports = a.ports;
  attempts_.emplace(key, std::move(a));
  WriteJournal();
  return ports;
}

Status PortReservations::HandOver(const std::string& job, uint32_t attempt) {
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end() || it->second.phase == Phase::kHandedOver) return Status::Ok();
  TRAINLET_RETURN_IF_ERROR(CloseHeld(job, attempt));
  return Recheck(job, attempt);
}

Status PortReservations::CloseHeld(const std::string& job, uint32_t attempt) {
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end()) return Status::Ok();
  Attempt& a = it->second;
  if (a.phase == Phase::kExpired) {
    return UnavailableError("the ports reserved on " + address_ + " for attempt " +
                            std::to_string(attempt) + " " + a.expired_why);
  }
  for (int fd : a.fds) close(fd);
  a.fds.clear();
  a.phase = Phase::kHandedOver;
  WriteJournal();
  return Status::Ok();
}

Status PortReservations::Recheck(const std::string& job, uint32_t attempt) const {
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end() || it->second.phase != Phase::kHandedOver) return Status::Ok();
  // Held until CloseHeld, so anything that holds a port now took it in between: the ranks would
  // fail to bind it, so they must not start.
  for (uint32_t port : it->second.ports) {
    if (ProbePort(port) == 0) continue;
    return UnavailableError("port " + std::to_string(port) + " on " + address_ +
                            " was taken by another process before the ranks started");
  }
  return Status::Ok();
}

void PortReservations::Forget(std::map<AttemptKey, Attempt>::iterator it) {
  Attempt& a = it->second;
  for (int fd : a.fds) close(fd);
  if (a.phase != Phase::kExpired) {
    for (uint32_t p : a.ports) owned_.erase(p);
  }
  attempts_.erase(it);
}

void PortReservations::Release(const std::string& job, uint32_t attempt) {
  if (auto it = attempts_.find({job, attempt}); it != attempts_.end()) {
    Forget(it);
    WriteJournal();
  }
}

void PortReservations::ReleaseBelow(const std::string& job, uint32_t attempt) {
  bool changed = false;
  for (auto it = attempts_.lower_bound({job, 0});
       it != attempts_.end() && it->first.first == job && it->first.second < attempt;) {
    Forget(it++);
    changed = true;
  }
  if (changed) WriteJournal();
}

void PortReservations::ReleaseHandedOverExcept(const std::set<AttemptKey>& live) {
  bool changed = false;
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    if (it->second.phase == Phase::kHandedOver && live.count(it->first) == 0) {
      spdlog::info("{} attempt {} ended while the agent was down: its ports are given back",
                   it->first.first, it->first.second);
      Forget(it++);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) WriteJournal();
}

void PortReservations::MarkExpired(Attempt& a, Clock::time_point now, std::string why) {
  for (int fd : a.fds) close(fd);
  a.fds.clear();
  if (a.phase != Phase::kExpired) {
    for (uint32_t p : a.ports) owned_.erase(p);
  }
  a.phase = Phase::kExpired;
  a.deadline = now + hold_timeout_ * kExpiredMemory;
  a.expired_why = std::move(why);
}

// One line per attempt: "<job> <attempt> held|handed <port>,<port>,...". Job names are
// Kubernetes names, so they hold no spaces. Written to a temporary file and renamed over the
// journal, so a crash leaves the old journal or the new one, never half of one. No fsync: it
// guards against the agent process dying, and a machine that goes down takes the ranks with it.
void PortReservations::WriteJournal() const {
  if (journal_path_.empty()) return;
  std::string text = "# trainlet-agent port reservations: job attempt held|handed ports\n";
  for (const auto& [key, a] : attempts_) {
    if (a.phase == Phase::kExpired) continue;
    text += key.first + " " + std::to_string(key.second) +
            (a.phase == Phase::kHeld ? " held " : " handed ");
    for (size_t i = 0; i < a.ports.size(); ++i) text += (i ? "," : "") + std::to_string(a.ports[i]);
    text += "\n";
  }
  const std::string tmp = journal_path_ + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr) ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), journal_path_.c_str()) != 0) {
    spdlog::warn(
        "{}: cannot write the port journal: {}; a restarted agent will not know these "
        "reservations",
        journal_path_, std::strerror(errno));
  }
}

std::vector<PortReservations::AttemptKey> PortReservations::Restore(Clock::time_point now) {
  std::vector<AttemptKey> restored;
  if (journal_path_.empty()) return restored;
  std::ifstream in(journal_path_);
  if (!in) return restored;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string job, attempt_text, phase, ports_text, extra;
    fields >> job >> attempt_text >> phase >> ports_text;
    const auto attempt = ParseUint32(attempt_text);
    std::vector<uint32_t> ports;
    bool ok =
        !job.empty() && attempt && (phase == "held" || phase == "handed") && !(fields >> extra);
    for (size_t start = 0; ok && start <= ports_text.size();) {
      const size_t comma = std::min(ports_text.find(',', start), ports_text.size());
      const auto port = ParseUint32(std::string_view(ports_text).substr(start, comma - start));
      ok = port && *port >= range_.low && *port <= range_.high && owned_.count(*port) == 0;
      if (ok) ports.push_back(*port);
      start = comma + 1;
    }
    const AttemptKey key{job, attempt.value_or(0)};
    if (!ok || attempts_.count(key) != 0) {
      spdlog::warn("{}:{}: skipping an unreadable port reservation: {}", journal_path_, line_no,
                   line);
      continue;
    }
    Attempt a;
    a.ports = ports;
    a.deadline = now + hold_timeout_;
    owned_.insert(ports.begin(), ports.end());
    if (phase == "held") {
      for (uint32_t port : ports) {
        if (HoldPort(port, &a.fds) < 0) {
          MarkExpired(a, now,
                      "could not be held again when the agent restarted: port " +
                          std::to_string(port) + " was taken meanwhile");
          break;
        }
      }
    } else {
      a.phase = Phase::kHandedOver;
    }
    spdlog::info("restored the ports of {} attempt {} ({}): {}", job, key.second,
                 a.phase == Phase::kExpired ? a.expired_why : phase, ports_text);
    attempts_.emplace(key, std::move(a));
    restored.push_back(key);
  }
  WriteJournal();
  return restored;
}

std::vector<PortReservations::AttemptKey> PortReservations::Expire(Clock::time_point now) {
  std::vector<AttemptKey> expired;
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& a = it->second;
    if (a.phase == Phase::kExpired && now >= a.deadline) {
      attempts_.erase(it++);
      continue;
    }
    if (a.phase == Phase::kHeld && now >= a.deadline) {
      MarkExpired(a, now,
                  "were given back after " + std::to_string(hold_timeout_.count()) +
                      " ms without a launch plan; they may be taken");
      expired.push_back(it->first);
    }
    ++it;
  }
  if (!expired.empty()) WriteJournal();
  return expired;
}

std::optional<PortReservations::Clock::time_point> PortReservations::NextExpiry() const {
  std::optional<Clock::time_point> next;
  for (const auto& [key, a] : attempts_) {
    if (a.phase == Phase::kHandedOver) continue;
    if (!next || a.deadline < *next) next = a.deadline;
  }
  return next;
}

std::vector<uint32_t> PortReservations::Ports(const std::string& job, uint32_t attempt) const {
  auto it = attempts_.find({job, attempt});
  return it == attempts_.end() ? std::vector<uint32_t>{} : it->second.ports;
}

size_t PortReservations::held_sockets() const {
  size_t n = 0;
  for (const auto& [key, a] : attempts_) n += a.fds.size();
  return wildcards_.empty() ? n : n / wildcards_.size();
}

}  // namespace trainlet::agent
