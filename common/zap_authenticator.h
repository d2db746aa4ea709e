// The ZAP handler (ZeroMQ RFC 27) that admits CURVE clients by public key, per role.
//
// Each server socket names its role in ZMQ_ZAP_DOMAIN ("agent", "operator"); a client is admitted
// only when its public key is in that role's allowlist, so an agent key cannot reach the operator
// endpoint. Unknown domains and unknown keys are refused: the handler fails closed.
//
// Threading: owned by one event loop, which polls socket() and calls HandleRequest() when it is
// readable. libzmq's I/O thread blocks a handshake until the reply arrives, so the loop must not
// stall for long.
//
// Logging: anyone who can reach a port can make refused handshakes as fast as the loop answers
// them (issue 19: 3,700 in 8.5 s, one warning each). So the first kRefusalsLogged refusals of each
// kRefusalLogWindow are logged one by one, with key, address and domain, and the rest only
// counted: the first refusal after the window names how many went unlogged. The exact counts are
// refused_by_domain(), which the coordinator exports as a metric.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/file_version.h"
#include "common/status.h"

namespace trainlet {

class ZapAuthenticator {
 public:
  // Binds inproc://zeromq.zap.01 on `ctx`. Must be created before any CURVE server socket binds.
  static Result<std::unique_ptr<ZapAuthenticator>> Create(zmq::context_t& ctx);

  // Admits the keys listed in the file at `allowlist_path` for `domain`. The file is re-read when
  // it changes (common/file_version.h: its stamps, and its text while the version read is less
  // than a second old), so enrolling or removing a node or operator needs no restart.
  Status AddDomain(const std::string& domain, const std::string& allowlist_path);
  // Admits exactly these keys for `domain` (tests, and callers that manage lists themselves).
  void SetAllowlist(const std::string& domain, Allowlist keys);

  // The keys admitted for `domain` and the name each line gives its key (empty when the line has
  // none), re-read first when the file changed; nullptr for an unknown domain. The pointer stays
  // valid until the next call on this object. The coordinator binds agent names to keys with it.
  const Allowlist* KeysOf(const std::string& domain);

  zmq::socket_t& socket() { return socket_; }
  // Answers one pending ZAP request, if there is one. Never throws.
  void HandleRequest();

  static constexpr int kRefusalsLogged = 3;
  static constexpr std::chrono::seconds kRefusalLogWindow{10};

  // The clock the refusal log's windows follow: steady_clock unless a test sets another.
  void SetClock(std::function<std::chrono::steady_clock::time_point()> now) {
    now_ = std::move(now);
  }

  uint64_t accepted() const { return accepted_; }
  uint64_t refused() const { return refused_; }
  // Refused handshakes by the ZAP domain of the socket they came to ("agent", "operator",
  // "exec"); requests for a domain without an allowlist, or malformed ones, count as "other", so
  // a peer cannot grow this map.
  const std::map<std::string, uint64_t>& refused_by_domain() const { return refused_by_domain_; }

 private:
  explicit ZapAuthenticator(zmq::context_t& ctx);
  struct Domain {
    std::string path;     // empty: static list
    FileVersion version;  // of the file last read (common/file_version.h)
    Allowlist keys;
  };
  void Refresh(Domain& d);
  // Counts one refusal and logs `what` unless this window's share of lines is spent.
  void Refuse(const std::string& domain, const std::string& what);

  zmq::socket_t socket_;
  std::map<std::string, Domain> domains_;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  std::map<std::string, uint64_t> refused_by_domain_;
  std::function<std::chrono::steady_clock::time_point()> now_ = std::chrono::steady_clock::now;
  // The refusal log's window: when it began, lines logged in it, refusals left unlogged.
  std::chrono::steady_clock::time_point log_window_start_{};
  int logged_in_window_ = 0;
  uint64_t unlogged_ = 0;
};

}  // namespace trainlet
