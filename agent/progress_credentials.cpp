#include "agent/progress_credentials.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "agent/progress_token.h"

namespace trainlet::agent {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

constexpr long kCaDays = 3650;
constexpr long kServerDays = 825;
constexpr long kRenewDays = 30;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `content` to `path` with `mode` as one rename, so a crash leaves the old file or the new.
Status WriteAtomically(const std::string& path, const std::string& content, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
  fchmod(fd, mode);  // whatever the umask
  const bool ok =
      write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

template <typename Writer>
Status WritePem(const std::string& path, mode_t mode, Writer write_pem) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write_pem(bio.get()) != 1) return InternalError("PEM encoding for " + path);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return WriteAtomically(path, std::string(data, static_cast<size_t>(len)), mode);
}

Key LoadKey(const std::string& path) {
  auto pem = ReadFile(path);
  if (!pem) return nullptr;
  Bio bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  return Key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

Cert LoadCert(const std::string& path) {
  auto pem = ReadFile(path);
  if (!pem) return nullptr;
  Bio bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

bool IsIp(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key`, signed by `issuer_key` (self-signed when `issuer` is null).
Cert MakeCert(EVP_PKEY* key, const std::string& cn, long days, X509* issuer, EVP_PKEY* issuer_key,
              const std::vector<std::string>& hosts) {
  Cert cert(X509_new());
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_set_version(cert.get(), 2);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool ok = true;
  if (issuer == nullptr) {
    ok = AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
         AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
         AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  } else {
    std::string san;
    for (const auto& h : hosts)
      san += std::string(san.empty() ? "" : ",") + (IsIp(h) ? "IP:" : "DNS:") + h;
    ok = AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
         AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
         AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth") &&
         AddExtension(cert.get(), signer, NID_subject_alt_name, san) &&
         AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid");
  }
  if (!ok || X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

// The server certificate can be kept: signed by the CA, covering every host, not about to expire.
bool ServerCertIsGood(X509* cert, EVP_PKEY* ca_key, const std::vector<std::string>& hosts) {
  if (cert == nullptr || X509_verify(cert, ca_key) != 1) return false;
  for (const auto& h : hosts) {
    const int covered = IsIp(h) ? X509_check_ip_asc(cert, h.c_str(), 0)
                                : X509_check_host(cert, h.c_str(), h.size(), 0, nullptr);
    if (covered != 1) return false;
  }
  time_t renew_at = time(nullptr) + kRenewDays * 86400;
  return X509_cmp_time(X509_get0_notAfter(cert), &renew_at) > 0;
}

Status EnsureCa(const ProgressCredentials& c, Key* ca_key, Cert* ca_cert) {
  const std::string key_file = c.dir + "/ca.key";
  *ca_key = LoadKey(key_file);
  *ca_cert = LoadCert(c.ca_cert_file);
  if (*ca_key && *ca_cert && X509_check_private_key(ca_cert->get(), ca_key->get()) == 1) {
    return Status::Ok();
  }
  ca_key->reset(EVP_EC_gen("P-256"));
  if (!*ca_key) return InternalError("cannot generate the progress CA key");
  *ca_cert =
      MakeCert(ca_key->get(), "trainlet-agent progress CA", kCaDays, nullptr, ca_key->get(), {});
  if (!*ca_cert) return InternalError("cannot make the progress CA certificate");
  EVP_PKEY* k = ca_key->get();
  X509* x = ca_cert->get();
  TRAINLET_RETURN_IF_ERROR(WritePem(key_file, 0600, [k](BIO* b) {
    return PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  }));
  return WritePem(c.ca_cert_file, 0644, [x](BIO* b) { return PEM_write_bio_X509(b, x); });
}

Status EnsureServerCert(const ProgressCredentials& c, EVP_PKEY* ca_key, X509* ca_cert,
                        const std::vector<std::string>& hosts) {
  Key key = LoadKey(c.key_file);
  Cert cert = LoadCert(c.cert_file);
  if (key && cert && X509_check_private_key(cert.get(), key.get()) == 1 &&
      ServerCertIsGood(cert.get(), ca_key, hosts)) {
    return Status::Ok();
  }
  key.reset(EVP_EC_gen("P-256"));
  if (!key) return InternalError("cannot generate the progress server key");
  cert = MakeCert(key.get(), hosts.empty() ? "trainlet-agent" : hosts.front(), kServerDays, ca_cert,
                  ca_key, hosts);
  if (!cert) return InternalError("cannot make the progress server certificate");
  EVP_PKEY* k = key.get();
  X509* x = cert.get();
  TRAINLET_RETURN_IF_ERROR(WritePem(c.key_file, 0600, [k](BIO* b) {
    return PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  }));
  return WritePem(c.cert_file, 0644, [x](BIO* b) { return PEM_write_bio_X509(b, x); });
}

}  // namespace

Result<ProgressCredentials> ProgressCredentials::LoadOrCreate(
    const std::string& state_dir, const std::vector<std::string>& hosts) {
  TRAINLET_ASSIGN_OR_RETURN(ProgressCredentials c, Locate(state_dir));
  TRAINLET_RETURN_IF_ERROR(c.Complete(hosts));
  return c;
}

Result<ProgressCredentials> ProgressCredentials::Locate(const std::string& state_dir) {
  ProgressCredentials c;
  c.dir = state_dir + "/progress";
  c.ca_cert_file = c.dir + "/ca.crt";
  c.cert_file = c.dir + "/server.crt";
  c.key_file = c.dir + "/server.key";
  if (mkdir(c.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return IoError("cannot create " + c.dir + ": " + std::strerror(errno));
  }
  chmod(c.dir.c_str(), 0700);
  if (auto port = ReadFile(c.dir + "/port")) {
    const long p = std::strtol(port->c_str(), nullptr, 10);
    if (p > 0 && p <= 65535) c.last_port = static_cast<uint16_t>(p);
  }
  return c;
}

Status ProgressCredentials::Complete(const std::vector<std::string>& hosts) {
  Key ca_key;
  Cert ca_cert;
  TRAINLET_RETURN_IF_ERROR(EnsureCa(*this, &ca_key, &ca_cert));
  TRAINLET_RETURN_IF_ERROR(EnsureServerCert(*this, ca_key.get(), ca_cert.get(), hosts));

  const std::string secret_file = dir + "/token.secret";
  auto secret = ReadFile(secret_file);
  if (!secret || secret->size() != ProgressTokens::kSecretBytes) {
    secret = std::string(ProgressTokens::kSecretBytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(secret->data()),
                   static_cast<int>(secret->size())) != 1) {
      return InternalError("cannot draw the progress token secret");
    }
    TRAINLET_RETURN_IF_ERROR(WriteAtomically(secret_file, *secret, 0600));
  }
  token_secret = std::move(*secret);
  return Status::Ok();
}

Status ProgressCredentials::RememberPort(uint16_t port) const {
  return WriteAtomically(dir + "/port", std::to_string(port) + "\n", 0600);
}

}  // namespace trainlet::agent
