// ProgressTokens: the bearer tokens a job attempt's ranks present to this agent's progress
// endpoint (KUBEFLOW_TRAINER_SERVER_TOKEN names a file holding one).
//
// A token is "tlp1.<job, base64url>.<attempt>.<HMAC-SHA256, base64url>", the MAC taken with a
// per-node secret over ("trainlet-progress-v1", job, attempt). It names the (job, attempt) it
// is good for, so the endpoint can tell a forged token (401) from a real one used on another
// job's URL or after its attempt ended (403). Nothing is stored per token: the secret lives in
// the agent's state dir, so a restarted agent accepts the tokens of the ranks it adopts.
// Tokens do not expire by time; the attempt check makes an old attempt's token useless.
//
// Pure values; any thread. Verify compares MACs in constant time.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace trainlet::agent {

struct ProgressTokenClaim {
  std::string job;
  uint32_t attempt = 0;
};

class ProgressTokens {
 public:
  static constexpr size_t kSecretBytes = 32;
  // `secret`: kSecretBytes random bytes (ProgressCredentials keeps them).
  explicit ProgressTokens(std::string secret);

  std::string Issue(const std::string& job, uint32_t attempt) const;
  // The claim of a token this node issued; kPermission for anything else (malformed, another
  // node's, altered), with a message that says which, never the expected MAC.
  Result<ProgressTokenClaim> Verify(const std::string& token) const;

 private:
  std::string Mac(const std::string& job, uint32_t attempt) const;
  std::string secret_;
};

}  // namespace trainlet::agent
