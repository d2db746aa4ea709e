#include "agent/progress_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>

namespace trainlet::agent {
namespace {

constexpr char kPrefix[] = "tlp1";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64Url(const std::string& in) {
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    nbits += 8;
    while (nbits >= 6) {
      nbits -= 6;
      out += kAlphabet[(bits >> nbits) & 63];
    }
  }
  if (nbits > 0) out += kAlphabet[(bits << (6 - nbits)) & 63];
  return out;
}

// False on a character outside the alphabet or a length no encoding has.
bool FromBase64Url(const std::string& in, std::string* out) {
  if (in.size() % 4 == 1) return false;
  uint32_t bits = 0;
  int nbits = 0;
  for (char c : in) {
    const char* at = std::char_traits<char>::find(kAlphabet, 64, c);
    if (at == nullptr) return false;
    bits = (bits << 6) | static_cast<uint32_t>(at - kAlphabet);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      *out += static_cast<char>((bits >> nbits) & 0xff);
    }
  }
  return true;
}

Status Refused(const std::string& why) {
  return Status(ErrorCode::kPermission, "progress token refused: " + why);
}

}  // namespace

ProgressTokens::ProgressTokens(std::string secret) : secret_(std::move(secret)) {}

std::string ProgressTokens::Mac(const std::string& job, uint32_t attempt) const {
  // Lengths are implied: the job cannot hold a NUL, and the attempt is last.
  const std::string data =
      std::string("trainlet-progress-v1") + '\0' + job + '\0' + std::to_string(attempt);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

std::string ProgressTokens::Issue(const std::string& job, uint32_t attempt) const {
  return std::string(kPrefix) + "." + Base64Url(job) + "." + std::to_string(attempt) + "." +
         Base64Url(Mac(job, attempt));
}

Result<ProgressTokenClaim> ProgressTokens::Verify(const std::string& token) const {
  const size_t a = token.find('.');
  const size_t b = a == token.npos ? a : token.find('.', a + 1);
  const size_t c = b == token.npos ? b : token.find('.', b + 1);
  if (c == token.npos || token.find('.', c + 1) != token.npos ||
      token.compare(0, a, kPrefix) != 0) {
    return Refused("not a trainlet progress token");
  }
  ProgressTokenClaim claim;
  std::string mac;
  const std::string job_text = token.substr(a + 1, b - a - 1);
  const std::string attempt = token.substr(b + 1, c - b - 1);
  const std::string mac_text = token.substr(c + 1);
  const auto [end, ec] =
      std::from_chars(attempt.data(), attempt.data() + attempt.size(), claim.attempt);
  // Each part must be written exactly as Issue writes it: a decoder that ignores a last
  // character's spare bits would let one token be spelt several ways (the fuzzer found one).
  if (!FromBase64Url(job_text, &claim.job) || claim.job.empty() ||
      claim.job.find('\0') != std::string::npos || Base64Url(claim.job) != job_text ||
      ec != std::errc() || end != attempt.data() + attempt.size() ||
      std::to_string(claim.attempt) != attempt || !FromBase64Url(mac_text, &mac) ||
      Base64Url(mac) != mac_text) {
    return Refused("malformed");
  }
  const std::string expected = Mac(claim.job, claim.attempt);
  if (mac.size() != expected.size() ||
      CRYPTO_memcmp(mac.data(), expected.data(), mac.size()) != 0) {
    return Refused("not issued by this node");
  }
  return claim;
}

}  // namespace trainlet::agent
