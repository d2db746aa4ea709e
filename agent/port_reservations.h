// PortReservations: the listening ports an agent holds for attempts about to start (the
// coordinator's ReservePorts), so that a rank's MASTER_PORT or MLX ring port is free when the rank
// binds it and no two attempts on the node are ever given the same port.
//
// A port is reserved by binding it (SO_REUSEADDR off) and listening on the wildcard addresses,
// 0.0.0.0 and [::] (IPV6_V6ONLY, where the host has IPv6), after a probe of the node's advertised
// address: real programs bind the wildcard (torch's TCPStore, the xgboost tracker), so a port
// another process holds on any local address (another cluster's 127.0.0.3, say) is skipped, and
// while the sockets are held no other process can take the port on any address. Right before the
// attempt's ranks are spawned, HandOver() closes the sockets so the ranks can bind the ports, and
// checks each port is still free at that moment. From Reserve() until Release() the attempt owns
// its ports, also after HandOver(): an owned port is never reserved for another attempt, even
// though nothing of this agent is bound to it any more.
//
// Every socket is opened close-on-exec, so spawned ranks never inherit a held port.
//
// With a journal path, every change is written to that file (a few lines of text, replaced by
// rename), so a restarted agent knows which ports its running attempts own and which it had
// promised to attempts still waiting for their plans: Restore() takes them back.
//
// Owned by the agent's loop; no locks.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace trainlet::agent {

// An inclusive range of TCP ports, from the agent's `worker_ports` key.
struct PortRange {
  uint16_t low = 20000;
  uint16_t high = 29999;
  uint32_t size() const { return static_cast<uint32_t>(high) - low + 1; }
  std::string ToString() const { return std::to_string(low) + "-" + std::to_string(high); }
};

// Parses "LOW-HIGH" (1 <= LOW <= HIGH <= 65535). Invalid, naming `key` (when not empty) and the
// text, otherwise.
Result<PortRange> ParsePortRange(std::string_view text, std::string_view key = "worker_ports");

class PortReservations {
 public:
  using Clock = std::chrono::steady_clock;
  using AttemptKey = std::pair<std::string, uint32_t>;  // (job, attempt)

  // `address` is the node's advertised address (a numeric IPv4 or IPv6 address, or a name that
  // resolves to one); the ports are bound there. Invalid, naming the address, when it does not
  // resolve. `hold_timeout`: how long ports are held for an attempt whose plan never comes.
  static Result<PortReservations> Create(
      const std::string& address, PortRange range,
      std::chrono::milliseconds hold_timeout = std::chrono::seconds(60),
      std::string journal_path = "");
  PortReservations(PortReservations&& other) noexcept;
  PortReservations& operator=(PortReservations&& other) noexcept;
  PortReservations(const PortReservations&) = delete;
  PortReservations& operator=(const PortReservations&) = delete;
  ~PortReservations();  // closes every held socket

  // Holds `count` ports for (job, attempt), scanning the range from a cursor that moves on with
  // every reservation, so a port just given back is the last one picked again. Asking again for
  // an attempt that already has ports returns the same ports (a resent request). Unavailable
  // ("no free port in 20000-29999 on 10.0.0.2") when the range has too few free ports, Internal
  // for any other socket error; either way nothing is held.
  Result<std::vector<uint32_t>> Reserve(const std::string& job, uint32_t attempt, uint32_t count,
                                        Clock::time_point now);

  // Called right before the attempt's ranks are spawned: closes its held sockets and checks that
  // each port can still be bound. Unavailable with "port 20017 on 10.0.0.2 was taken by another
  // process before the ranks started" when one cannot, or when the hold timed out before the plan
  // came; the ranks must then not be started. OK, doing nothing, for an attempt with no ports
  // here (a plan whose runtime asked for none) or one already handed over (a resent plan).
  Status HandOver(const std::string& job, uint32_t attempt);
  // HandOver's two steps, apart so a test can let another process take a port in between:
  // CloseHeld() closes the sockets (the ports stay owned); Recheck() probes every port of a
  // handed-over attempt and says which was taken.
  Status CloseHeld(const std::string& job, uint32_t attempt);
  Status Recheck(const std::string& job, uint32_t attempt) const;

  // The attempt ended (stopped, replaced by a newer one, its last rank exited): its sockets are
  // closed and its ports may be reserved again. Unknown attempts are ignored.
  void Release(const std::string& job, uint32_t attempt);
  // Releases every attempt of `job` below `attempt` (UINT32_MAX: all of them).
  void ReleaseBelow(const std::string& job, uint32_t attempt);
  // Releases the sockets held past the hold timeout (their plan never came, e.g. the coordinator
  // restarted), returning those attempts. A plan that comes later fails in HandOver.
  std::vector<AttemptKey> Expire(Clock::time_point now);
  // When Expire() next has something to do; nullopt when nothing is held.
  std::optional<Clock::time_point> NextExpiry() const;

  // Reads the journal a previous agent left (none: nothing to do). Handed-over attempts own their
  // ports again. Held ones are bound again with a fresh hold timeout; when one of their ports was
  // taken meanwhile, the attempt is expired instead, so its plan fails HandOver with that reason
  // and the coordinator retries. Returns the restored attempts; unreadable lines are skipped with
  // a warning (the journal is advisory: the worst case is a port probed again at HandOver).
  std::vector<AttemptKey> Restore(Clock::time_point now);
  // After the steps are re-adopted: releases handed-over attempts not in `live` (they ended while
  // the agent was down, and no exit report will release them).
  void ReleaseHandedOverExcept(const std::set<AttemptKey>& live);

  // The attempt's ports (empty when it has none).
  std::vector<uint32_t> Ports(const std::string& job, uint32_t attempt) const;
  // Ports owned by live attempts (held or handed over).
  size_t owned() const { return owned_.size(); }
  // Ports currently held open (each by one socket per wildcard address).
  size_t held_sockets() const;
  const PortRange& range() const { return range_; }

 private:
  enum class Phase {
    kHeld,        // sockets open, waiting for the plan
    kHandedOver,  // sockets closed for the ranks; ports still owned
    kExpired,     // the plan never came: ports given back, a late plan must fail
  };
  struct Attempt {
    Phase phase = Phase::kHeld;
    std::vector<uint32_t> ports;
    std::vector<int> fds;        // while kHeld: wildcards_.size() sockets per port, in order
    Clock::time_point deadline;  // kHeld: expiry; kExpired: when the record is forgotten
    std::string expired_why;     // kExpired: why the ports were given back
  };

  PortReservations(sockaddr_storage addr, socklen_t addr_len, std::string address, PortRange range,
                   std::chrono::milliseconds hold_timeout, std::string journal_path);
  // Binds (and, when `listen_too`, listens on) `port` of `addr`; the fd, or -errno.
  static int BindOn(sockaddr_storage addr, socklen_t addr_len, uint32_t port, bool listen_too);
  // Holds `port`: probes the advertised address, then binds and listens on every wildcard,
  // appending the sockets to `fds`. 0, or -errno of the first address that refused (nothing of
  // this port is then left open).
  int HoldPort(uint32_t port, std::vector<int>* fds) const;
  // Whether a rank could bind `port` now, on the advertised address and on every wildcard: 0, or
  // -errno of the first that refused.
  int ProbePort(uint32_t port) const;
  void CloseAll();
  void Forget(std::map<AttemptKey, Attempt>::iterator it);
  void MarkExpired(Attempt& a, Clock::time_point now, std::string why);
  // Rewrites the journal from attempts_ (kHeld and kHandedOver); a failure is logged, not fatal.
  void WriteJournal() const;

  // Constant after construction.
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  std::string address_;
  std::vector<std::pair<sockaddr_storage, socklen_t>> wildcards_;  // 0.0.0.0, [::] with IPv6
  PortRange range_;
  std::chrono::milliseconds hold_timeout_;
  std::string journal_path_;  // "" keeps no journal
  // Owned by the loop.
  uint32_t cursor_ = 0;  // offset into the range where the next scan starts
  std::map<AttemptKey, Attempt> attempts_;
  std::set<uint32_t> owned_;  // ports of kHeld and kHandedOver attempts
};

}  // namespace trainlet::agent
