// CURVE key pairs and allowlists on disk.
//
// A key file holds one key pair in ZeroMQ's Z85 text form:
//     public-key = "<40 chars>"
//     secret-key = "<40 chars>"      (absent in a public-only file)
// Secret key files are written 0600. An allowlist holds one public key per line, optionally
// followed by a name ("<z85> node-1"); a line starting with '#' is a comment (Z85 itself uses
// '#', so a comment cannot follow a key).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::platform {
class Env;
}  // namespace trainlet::platform

namespace trainlet {

struct CurveKeyPair {
  std::string public_z85;  // 40 characters
  std::string secret_z85;  // 40 characters; empty when only the public half is known
};

Result<CurveKeyPair> GenerateCurveKeyPair();
// Writes `path` (both halves, mode 0600) and `path + ".pub"` (public half, 0644).
Status WriteKeyPair(const std::string& path, const CurveKeyPair& keys);
// Reads a key file written by WriteKeyPair (or its .pub). Errors name the file and the problem.
Result<CurveKeyPair> ReadKeyPair(const std::string& path);
// The same, read through `env` (the daemons' seam over the OS, common/platform/env.h).
Result<CurveKeyPair> ReadKeyPair(platform::Env& env, const std::string& path);
bool IsValidZ85Key(const std::string& key);

// A key's name (a node or a user): 1 to 253 of letters, digits, '.', '_' and '-', starting with a
// letter or digit. It names the key's files and its allowlist line, so nothing that could leave
// the key directory or split the line (a '/', a space, a newline) passes.
bool IsValidKeyName(std::string_view name);

// Public key (Z85) -> name.
using Allowlist = std::map<std::string, std::string>;
Result<Allowlist> ReadAllowlist(const std::string& path);
// The same from its text; errors name `path` and the line.
Result<Allowlist> ParseAllowlist(const std::string& text, const std::string& path);
// Appends one entry, creating the file when needed. Refuses a malformed key.
Status AppendToAllowlist(const std::string& path, const std::string& public_z85,
                         const std::string& name);

}  // namespace trainlet
