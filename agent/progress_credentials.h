// ProgressCredentials: what the progress endpoint needs to be trusted by this node's ranks and to
// trust them, kept in <state_dir>/progress/ so that it survives an agent restart (adopted ranks
// keep the CA file, the token file and the URL they were started with).
//
//   ca.key, ca.crt          a CA of this node only (EC P-256, 10 years), made at first start
//   server.key, server.crt  the endpoint's certificate, signed by that CA, for the agent's address,
//                           127.0.0.1 and localhost; made again when missing, not signed by the
//                           CA, not covering the addresses, or within 30 days of expiring
//   token.secret            32 random bytes: the key of ProgressTokens
//   port                    the port last served, tried first at the next start
//
// Keys and the secret are written 0600 and the directory is 0700, as a rename of a complete
// temporary file; ca.crt is 0644 (public: ranks read it, KUBEFLOW_TRAINER_SERVER_CA_CERT).
//
// Not on the loop's hot path: Locate runs once, at agent start; Complete once, at the first need
// (a rank to start, or a connection to serve). Errors are kIo (state dir) or kInternal (OpenSSL),
// naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::agent {

struct ProgressCredentials {
  std::string dir;
  std::string ca_cert_file;
  std::string cert_file;
  std::string key_file;
  std::string token_secret;  // ProgressTokens::kSecretBytes bytes
  uint16_t last_port = 0;    // 0: none remembered

  // `hosts`: the names and IP addresses the server certificate must cover. Locate, then Complete.
  static Result<ProgressCredentials> LoadOrCreate(const std::string& state_dir,
                                                  const std::vector<std::string>& hosts);
  // The file names, the directory (made 0700) and last_port, without OpenSSL: what an idle agent
  // needs to bind and to hand ranks the CA path. kIo when the directory cannot be made.
  static Result<ProgressCredentials> Locate(const std::string& state_dir);
  // Loads or makes the CA, the server certificate and the token secret (OpenSSL: about 1.6 MB of
  // RSS, paid at the first job on the node, not by an idle agent). Errors as LoadOrCreate's.
  Status Complete(const std::vector<std::string>& hosts);
  bool complete() const { return !token_secret.empty(); }
  // Remembers the port served now, for the next start. Best effort: an error is only logged.
  Status RememberPort(uint16_t port) const;
};

}  // namespace trainlet::agent
