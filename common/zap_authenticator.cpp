#include "common/zap_authenticator.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace trainlet {

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx) : socket_(ctx, zmq::socket_type::rep) {}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Create(zmq::context_t& ctx) {
  std::unique_ptr<ZapAuthenticator> zap(new ZapAuthenticator(ctx));
  try {
    zap->socket_.set(zmq::sockopt::linger, 0);
    zap->socket_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return InternalError(std::string("cannot bind the ZAP handler: ") + e.what());
  }
  return zap;
}

Status ZapAuthenticator::AddDomain(const std::string& domain, const std::string& allowlist_path) {
  Domain d;
  d.path = allowlist_path;
  // Stamps first, then the text: a change between the two is seen at the next refresh.
  struct stat st {};
  if (::stat(allowlist_path.c_str(), &st) != 0) {
    return NotFoundError("cannot read allowlist " + allowlist_path + ": " + std::strerror(errno));
  }
  auto text = ReadFileText(allowlist_path);
  if (!text.ok()) return NotFoundError("cannot read allowlist " + text.status().message());
  TRAINLET_ASSIGN_OR_RETURN(d.keys, ParseAllowlist(*text, allowlist_path));
  d.version.Update(st, std::move(text).value());
  domains_[domain] = std::move(d);
  return Status::Ok();
}

void ZapAuthenticator::SetAllowlist(const std::string& domain, Allowlist keys) {
  Domain d;
  d.keys = std::move(keys);
  domains_[domain] = std::move(d);
}

const Allowlist* ZapAuthenticator::KeysOf(const std::string& domain) {
  auto it = domains_.find(domain);
  if (it == domains_.end()) return nullptr;
  Refresh(it->second);
  return &it->second.keys;
}

void ZapAuthenticator::Refresh(Domain& d) {
  if (d.path.empty()) return;
  struct stat st {};
  if (::stat(d.path.c_str(), &st) != 0) return;  // keep the last good list
  if (d.version.Unchanged(st)) return;
  auto text = ReadFileText(d.path);
  if (!text.ok()) return;  // tried again at the next handshake
  // Good or bad, this version is read once: the text tells an append the stamps missed.
  if (!d.version.Update(st, std::move(text).value())) return;
  auto fresh = ParseAllowlist(d.version.text(), d.path);
  if (!fresh.ok()) {
    spdlog::error("keeping the previous allowlist: {}", fresh.status().message());
    return;
  }
  d.keys = std::move(fresh).value();
  spdlog::info("reloaded allowlist {} ({} keys)", d.path, d.keys.size());
}

void ZapAuthenticator::Refuse(const std::string& domain, const std::string& what) {
  ++refused_;
  ++refused_by_domain_[domain];
  const auto now = now_();
  if (now - log_window_start_ >= kRefusalLogWindow) {
    if (unlogged_ > 0) {
      spdlog::warn(
          "refused {} more CURVE handshakes without logging them (at most {} lines per "
          "{} s; all are counted in trainlet_coordinator_handshakes_refused_total)",
          unlogged_, kRefusalsLogged, kRefusalLogWindow.count());
    }
    log_window_start_ = now;
    logged_in_window_ = 0;
    unlogged_ = 0;
  }
  if (logged_in_window_ < kRefusalsLogged) {
    ++logged_in_window_;
    spdlog::warn("{}", what);
  } else {
    ++unlogged_;
  }
}

void ZapAuthenticator::HandleRequest() {
  std::vector<zmq::message_t> frames;
  try {
    while (true) {
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::dontwait)) break;
      const bool more = m.more();
      frames.push_back(std::move(m));
      if (!more || frames.size() > 16) break;
    }
  } catch (const zmq::error_t& e) {
    spdlog::error("ZAP receive failed: {}", e.what());
    return;
  }
  if (frames.empty()) return;
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  std::string status = "400";
  std::string text = "refused";
  std::string user_id;
  const std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
  if (frames.size() >= 7 && frames[0].to_string() == "1.0" && frames[5].to_string() == "CURVE" &&
      frames[6].size() == 32) {
    const std::string domain = frames[2].to_string();
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
    auto it = domains_.find(domain);
    if (it == domains_.end()) {
      text = "no allowlist for domain '" + domain + "'";
    } else {
      Refresh(it->second);
      if (it->second.keys.count(z85) != 0) {
        status = "200";
        text = "OK";
        user_id = z85;
      } else {
        text = "key not in the " + domain + " allowlist";
      }
    }
    if (status == "200") {
      ++accepted_;
    } else {
      Refuse(it != domains_.end() ? domain : "other", "refused CURVE client " + std::string(z85) +
                                                          " from " + frames[3].to_string() +
                                                          " on domain '" + domain + "': " + text);
    }
  } else {
    Refuse("other", "refused a malformed or non-CURVE ZAP request");
  }
  // Only the first frame holds a request; answer it even if it was malformed.
  try {
    socket_.send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(status), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(user_id), zmq::send_flags::sndmore);
    socket_.send(zmq::message_t(), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::error("ZAP reply failed: {}", e.what());
  }
}

}  // namespace trainlet
