// Real etcd members for tests: Debian's etcd-server (/usr/bin/etcd, or $TRAINLET_ETCD), started
// on free loopback ports with data in a temporary directory. Members are killed by PID when the
// cluster object goes (a failed test included) and, should the test process die first, by the
// kernel (PR_SET_PDEATHSIG). Timings are short (heartbeat 50 ms, election 500 ms) so losing and
// regaining quorum takes about a second.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainlet::testing {

class EtcdCluster {
 public:
  // The etcd binary, or "" when it is not installed (tests then skip).
  static std::string Binary();
  // Certificates for a cluster that serves clients over TLS and requires client certificates.
  struct Tls {
    std::string ca;                       // signed both certificates below
    std::string server_cert, server_key;  // for IP 127.0.0.1
    std::string client_cert, client_key;
  };
  // Makes a CA, a server and a client certificate in `dir` with the openssl command; false when
  // it could not.
  static bool MakeTls(const std::string& dir, Tls* tls);

  // Starts `members` members as one cluster and waits (up to 20 s) until it serves a read.
  // Ignores SIGPIPE in the test process, as the coordinator does.
  // With `tls`, clients are served over https and must show a certificate the CA signed.
  // nullptr, with why in `error`, when it could not.
  static std::unique_ptr<EtcdCluster> Start(int members, std::string* error,
                                            const Tls* tls = nullptr);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // Client URL of member i: http://127.0.0.1:<port>.
  const std::string& client_url(int i) const { return members_[i].client_url; }
  std::vector<std::string> client_urls() const;
  // Waits until member i itself serves a linearizable read (a restarted member serves clients
  // only once it has rejoined, which needs a quorum); false after `timeout_ms`.
  bool WaitServing(int i, int timeout_ms) const;
  // The index of the member that leads now, -1 when none answers that it does.
  int Leader() const;
  // SIGKILL and reap member i (no-op when it is not running).
  void Kill(int i);
  // Starts member i again on its data dir and ports; false when it could not be spawned.
  bool Restart(int i);
  pid_t pid(int i) const { return members_[i].pid; }
  // The last lines of member i's log, for failure messages.
  std::string LogTail(int i) const;

 private:
  struct Member {
    std::string name;
    std::string client_url;
    std::string peer_url;
    std::string data_dir;
    std::string log_file;
    pid_t pid = -1;
  };
  EtcdCluster() = default;
  bool Spawn(Member& m);

  std::string root_;  // temporary directory, removed at the end
  std::string initial_cluster_;
  std::optional<Tls> tls_;
  std::string token_;
  std::vector<Member> members_;
};

}  // namespace trainlet::testing
