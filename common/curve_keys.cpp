#include "common/curve_keys.h"

#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/file_version.h"
#include "common/platform/env.h"

namespace trainlet {
namespace {

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// `name = "value"` -> value; empty when the line is not of that form for `name`.
std::string ValueOf(const std::string& line, const std::string& name) {
  const std::string t = Trim(line);
  if (t.rfind(name, 0) != 0) return "";
  auto rest = Trim(t.substr(name.size()));
  if (rest.empty() || rest[0] != '=') return "";
  rest = Trim(rest.substr(1));
  if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"') {
    rest = rest.substr(1, rest.size() - 2);
  }
  return rest;
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
    out << text;
    if (!out.flush()) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("cannot install " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

bool IsValidZ85Key(const std::string& key) {
  if (key.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, key.c_str()) != nullptr;
}

Result<CurveKeyPair> GenerateCurveKeyPair() {
  char pub[41];
  char sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return InternalError(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()) +
                         " (libzmq built without CURVE?)");
  }
  return CurveKeyPair{pub, sec};
}

Status WriteKeyPair(const std::string& path, const CurveKeyPair& keys) {
  TRAINLET_RETURN_IF_ERROR(
      WriteFile(path,
                "# trainlet CURVE key pair. Keep this file secret.\npublic-key = \"" +
                    keys.public_z85 + "\"\nsecret-key = \"" + keys.secret_z85 + "\"\n",
                0600));
  return WriteFile(path + ".pub",
                   "# trainlet CURVE public key\npublic-key = \"" + keys.public_z85 + "\"\n", 0644);
}

namespace {

// The keys of key file `path`, whose lines `in` reads.
Result<CurveKeyPair> ParseKeyPair(std::istream& in, const std::string& path) {
  CurveKeyPair keys;
  std::string line;
  while (std::getline(in, line)) {
    if (auto v = ValueOf(line, "public-key"); !v.empty()) keys.public_z85 = v;
    if (auto v = ValueOf(line, "secret-key"); !v.empty()) keys.secret_z85 = v;
  }
  if (!IsValidZ85Key(keys.public_z85)) {
    return InvalidError("key file " + path +
                        ": public-key is missing or not a 40-character Z85 key");
  }
  if (!keys.secret_z85.empty() && !IsValidZ85Key(keys.secret_z85)) {
    return InvalidError("key file " + path + ": secret-key is not a 40-character Z85 key");
  }
  return keys;
}

}  // namespace

Result<CurveKeyPair> ReadKeyPair(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read key file " + path + ": " + std::strerror(errno));
  return ParseKeyPair(in, path);
}

Result<CurveKeyPair> ReadKeyPair(platform::Env& env, const std::string& path) {
  constexpr size_t kMaxKeyFileBytes = 64 * 1024;  // a key file is a few lines
  auto text = env.ReadFile(path, kMaxKeyFileBytes);
  // ReadFile's errors name the path and the system's reason, as the stream version's do.
  if (!text.ok()) return NotFoundError("cannot read key file " + text.status().message());
  std::istringstream in(*text);
  return ParseKeyPair(in, path);
}

Result<Allowlist> ReadAllowlist(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) return NotFoundError("cannot read allowlist " + text.status().message());
  return ParseAllowlist(*text, path);
}

Result<Allowlist> ParseAllowlist(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  Allowlist list;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // Z85 uses '#', so only a whole line can be a comment.
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::istringstream fields(t);
    std::string key;
    std::string name;
    fields >> key >> name;
    if (!IsValidZ85Key(key)) {
      return InvalidError("allowlist " + path + ":" + std::to_string(n) +
                          ": not a 40-character Z85 public key");
    }
    list[key] = name;
  }
  return list;
}

bool IsValidKeyName(std::string_view name) {
  if (name.empty() || name.size() > 253 || !std::isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Status AppendToAllowlist(const std::string& path, const std::string& public_z85,
                         const std::string& name) {
  if (!IsValidZ85Key(public_z85)) return InvalidError("not a 40-character Z85 public key");
  if (!IsValidKeyName(name)) return InvalidError("not a key name: \"" + name + "\"");
  std::ofstream out(path, std::ios::app);
  if (!out) return IoError("cannot append to " + path + ": " + std::strerror(errno));
  out << public_z85 << ' ' << name << '\n';
  if (!out.flush()) return IoError("cannot append to " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace trainlet
