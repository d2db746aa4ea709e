#include "coordinator/etcd_client.h"

// The only translation unit that includes cpp-httplib (a large header): the rest of the
// coordinator sees EtcdClient alone. TLS support comes with the library's pkg-config flags
// (CPPHTTPLIB_OPENSSL_SUPPORT), which must match how Debian built libcpp-httplib.so.
#include <httplib.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

namespace trainlet::coordinator {

namespace {

using Json = nlohmann::json;

constexpr char kBase64Chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kBase64Chars[(n >> shift) & 63]);
  }
  if (i < in.size()) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kBase64Chars[(n >> 18) & 63]);
    out.push_back(kBase64Chars[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kBase64Chars[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> Base64Decode(const std::string& in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::strchr(kBase64Chars, c);
    if (p == nullptr || c == '\0') return IoError("etcd answered invalid base64");
    acc = (acc << 6) | static_cast<uint32_t>(p - kBase64Chars);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// The gateway writes 64-bit integers as JSON strings (proto3's JSON mapping); accept numbers too.
int64_t Int(const Json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  return it->get<int64_t>();
}

const char* TargetName(EtcdCompare::Target t) {
  switch (t) {
    case EtcdCompare::Target::kVersion:
      return "VERSION";
    case EtcdCompare::Target::kCreate:
      return "CREATE";
    case EtcdCompare::Target::kMod:
      return "MOD";
    case EtcdCompare::Target::kValue:
      return "VALUE";
    case EtcdCompare::Target::kLease:
      return "LEASE";
  }
  return "MOD";
}

const char* ResultName(EtcdCompare::Result r) {
  switch (r) {
    case EtcdCompare::Result::kEqual:
      return "EQUAL";
    case EtcdCompare::Result::kGreater:
      return "GREATER";
    case EtcdCompare::Result::kLess:
      return "LESS";
    case EtcdCompare::Result::kNotEqual:
      return "NOT_EQUAL";
  }
  return "EQUAL";
}

Json CompareJson(const EtcdCompare& c) {
  Json j = {{"key", Base64Encode(c.key)},
            {"target", TargetName(c.target)},
            {"result", ResultName(c.result)}};
  switch (c.target) {
    case EtcdCompare::Target::kVersion:
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kCreate:
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kMod:
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["value"] = Base64Encode(c.value);
      break;
    case EtcdCompare::Target::kLease:
      j["lease"] = std::to_string(c.number);
      break;
  }
  return j;
}

Json RangeJson(const std::string& key, const std::string& range_end) {
  Json j = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) j["range_end"] = Base64Encode(range_end);
  return j;
}

Json OpJson(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      Json put = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return {{"request_put", put}};
    }
    case EtcdOp::Kind::kDelete:
      return {{"request_delete_range", RangeJson(op.key, op.range_end)}};
    case EtcdOp::Kind::kRange:
      return {{"request_range", RangeJson(op.key, op.range_end)}};
  }
  return {};
}

Result<std::vector<EtcdKeyValue>> ReadKvs(const Json& range_response) {
  std::vector<EtcdKeyValue> out;
  auto kvs = range_response.find("kvs");
  if (kvs == range_response.end()) return out;
  for (const Json& kv : *kvs) {
    EtcdKeyValue e;
    TRAINLET_ASSIGN_OR_RETURN(e.key, Base64Decode(kv.value("key", "")));
    TRAINLET_ASSIGN_OR_RETURN(e.value, Base64Decode(kv.value("value", "")));
    e.create_revision = Int(kv, "create_revision");
    e.mod_revision = Int(kv, "mod_revision");
    e.version = Int(kv, "version");
    e.lease = Int(kv, "lease");
    out.push_back(std::move(e));
  }
  return out;
}

Result<Json> ParseJson(const std::string& body, const std::string& where) {
  try {
    return Json::parse(body);
  } catch (const Json::exception& e) {
    return IoError(where + ": answered something that is not JSON (" + e.what() + ")");
  }
}

// gRPC status codes as the gateway reports them ("code" in an error body).
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;

// The text of an answer's "error" (or "message"): a string from unary calls, an object
// ({"grpc_code", "message", ...}) from streaming ones such as lease keepalive; "" when none.
std::string ErrorText(const Json& j) {
  for (const char* key : {"error", "message"}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object()) return ErrorText(*it);
  }
  return "";
}

// What an error answer from a member means for trainlet. `where` names the endpoint.
Status ErrorAnswer(const std::string& where, int http_status, const std::string& body) {
  auto parsed = ParseJson(body, where);
  int code = parsed.ok() ? static_cast<int>(Int(*parsed, "code")) : 0;
  if (parsed.ok() && code == 0) {  // a streaming call's {"error": {"grpc_code": ...}}
    if (auto e = parsed->find("error"); e != parsed->end() && e->is_object()) {
      code = static_cast<int>(Int(*e, "grpc_code"));
    }
  }
  std::string message = parsed.ok() ? ErrorText(*parsed) : body;
  if (parsed.ok() && message.empty()) message = body;
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  if (message.find("no leader") != std::string::npos) {
    return UnavailableError("etcd " + where + " has no quorum: " + message +
                            "; nothing was written");
  }
  const bool no_quorum = message.find("timed out") != std::string::npos ||
                         message.find("leader changed") != std::string::npos;
  if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded || no_quorum) {
    return UnavailableError("etcd " + where + " has no quorum: " + message +
                            "; a write may or may not have been applied");
  }
  if (code == kGrpcInvalidArgument) {
    if (message.find("too many operations") != std::string::npos) {
      message += " (etcd's --max-txn-ops, 128 by default)";
    }
    return InvalidError("etcd " + where + " refused the request: " + message);
  }
  if (code == kGrpcResourceExhausted) {
    if (message.find("request is too large") != std::string::npos) {
      message += " (etcd's --max-request-bytes, 1.5 MiB by default)";
      return InvalidError("etcd " + where + " refused the request: " + message);
    }
    return IoError("etcd " + where + ": " + message +
                   " (compact and defragment, or raise --quota-backend-bytes, then "
                   "`etcdctl alarm disarm`)");
  }
  if (code == kGrpcNotFound) return NotFoundError("etcd " + where + ": " + message);
  return IoError("etcd " + where + ": " + message);
}

}  // namespace

struct EtcdClient::Connection {
  std::string endpoint;
  std::unique_ptr<httplib::Client> http;
};

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  return op;
}

EtcdOp EtcdOp::Range(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdClient::EtcdClient(EtcdClientConfig config) : config_(std::move(config)) {}
EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdClientConfig config) {
  if (config.endpoints.empty()) return InvalidError("endpoints: at least one etcd endpoint");
  for (const auto& [field, path] :
       {std::pair<const char*, const std::string&>{"ca_file", config.ca_file},
        {"cert_file", config.cert_file},
        {"key_file", config.key_file}}) {
    std::error_code ec;
    if (!path.empty() && !std::filesystem::is_regular_file(path, ec)) {
      return InvalidError(std::string(field) + ": " + path + ": no such file");
    }
  }
  if (config.cert_file.empty() != config.key_file.empty()) {
    return InvalidError("cert_file, key_file: give both or neither");
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(config));
  for (const std::string& endpoint : client->config_.endpoints) {
    const bool tls = endpoint.rfind("https://", 0) == 0;
    if (!tls && endpoint.rfind("http://", 0) != 0) {
      return InvalidError("endpoints: \"" + endpoint +
                          "\": must be http://host:port or https://host:port");
    }
    auto c = std::make_unique<Connection>();
    c->endpoint = endpoint;
    c->http = config.cert_file.empty()
                  ? std::make_unique<httplib::Client>(endpoint)
                  : std::make_unique<httplib::Client>(endpoint, config.cert_file, config.key_file);
    if (!c->http->is_valid()) {
      return InvalidError("endpoints: \"" + endpoint + "\": cannot be used (bad URL or TLS files)");
    }
    if (tls) {
      if (!config.ca_file.empty()) c->http->set_ca_cert_path(config.ca_file);
      c->http->enable_server_certificate_verification(true);
    }
    c->http->set_keep_alive(true);
    // httplib writes the headers and the body apart: with Nagle's algorithm and the server's
    // delayed ACK each request would wait ~40 ms.
    c->http->set_tcp_nodelay(true);
    c->http->set_connection_timeout(config.connect_timeout);
    c->http->set_read_timeout(config.request_timeout);
    c->http->set_write_timeout(config.request_timeout);
    client->connections_.push_back(std::move(c));
  }
  return client;
}

std::string EtcdClient::endpoints() const {
  std::string out;
  for (const auto& e : config_.endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

namespace {

// One answer, or why none came. etcd's gateway ends an error answer with HTTP trailers
// (Grpc-Trailer-*), which cpp-httplib 0.11 does not parse: it reports a read error after the
// whole body arrived. So the status and body are taken as they stream in, and a read error after
// a complete JSON body is an answer.
struct Exchange {
  int status = 0;
  std::string body;
  httplib::Error error = httplib::Error::Success;
};

Exchange PostOnce(httplib::Client& http, const std::string& path, const std::string& body) {
  Exchange x;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  // A member refuses at once when it knows no leader, instead of holding the request until its
  // own timeout: gRPC metadata "hasleader", which the gateway takes from this header.
  req.set_header("Grpc-Metadata-hasleader", "true");
  req.response_handler = [&x](const httplib::Response& r) {
    x.status = r.status;
    return true;
  };
  req.content_receiver = [&x](const char* data, size_t len, uint64_t, uint64_t) {
    x.body.append(data, len);
    return true;
  };
  httplib::Response res;
  if (http.send(req, res, x.error)) return x;
  const bool body_complete =
      x.status != 0 && !x.body.empty() && Json::accept(x.body);  // only the trailers were lost
  if (x.error == httplib::Error::Read && body_complete) x.error = httplib::Error::Success;
  return x;
}

}  // namespace

Result<std::string> EtcdClient::Post(const std::string& path, const std::string& body,
                                     bool may_resend) {
  std::string failures;
  Status unreachable = Status::Ok();
  Status answered = Status::Ok();  // a member's refusal says more than a refused connection
  for (size_t tried = 0; tried < connections_.size(); ++tried) {
    const size_t i = (current_ + tried) % connections_.size();
    Connection& c = *connections_[i];
    Exchange x = PostOnce(*c.http, path, body);
    if (x.error != httplib::Error::Success) {
      failures += (failures.empty() ? "" : "; ") + c.endpoint + ": " + httplib::to_string(x.error);
      // Read / Write: the member may have taken the request; a write's outcome is unknown.
      const bool sent = x.error == httplib::Error::Read || x.error == httplib::Error::Write;
      if (sent && !may_resend) {
        return UnavailableError("etcd " + c.endpoint + " did not answer within " +
                                std::to_string(config_.request_timeout.count()) +
                                " ms (no quorum?); the write may or may not have been applied");
      }
      unreachable = UnavailableError("etcd " + endpoints() + " unreachable: " + failures);
      continue;
    }
    if (x.status == 200) {
      current_ = i;
      return std::move(x.body);
    }
    answered = ErrorAnswer(c.endpoint, x.status, x.body);
    // No leader: refused before anything was proposed, so another member may take it.
    const bool unproposed = answered.message().find("nothing was written") != std::string::npos;
    if (answered.code() != ErrorCode::kUnavailable || !(unproposed || may_resend)) {
      return answered;
    }
  }
  return !answered.ok() ? answered : unreachable;
}

Result<std::vector<EtcdKeyValue>> EtcdClient::Range(const std::string& key,
                                                    const std::string& range_end) {
  TRAINLET_ASSIGN_OR_RETURN(std::string body,
                            Post("/v3/kv/range", RangeJson(key, range_end).dump(), true));
  TRAINLET_ASSIGN_OR_RETURN(Json j, ParseJson(body, endpoints()));
  return ReadKvs(j);
}

Result<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compares,
                                      const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure) {
  Json req = {{"compare", Json::array()}, {"success", Json::array()}, {"failure", Json::array()}};
  bool writes = false;
  for (const auto& c : compares) req["compare"].push_back(CompareJson(c));
  for (const auto& op : success) {
    req["success"].push_back(OpJson(op));
    writes = writes || op.kind != EtcdOp::Kind::kRange;
  }
  for (const auto& op : failure) {
    req["failure"].push_back(OpJson(op));
    writes = writes || op.kind != EtcdOp::Kind::kRange;
  }
  TRAINLET_ASSIGN_OR_RETURN(std::string body, Post("/v3/kv/txn", req.dump(), !writes));
  TRAINLET_ASSIGN_OR_RETURN(Json j, ParseJson(body, endpoints()));
  EtcdTxnResult out;
  out.succeeded = j.value("succeeded", false);
  if (auto h = j.find("header"); h != j.end()) out.revision = Int(*h, "revision");
  if (auto responses = j.find("responses"); responses != j.end()) {
    for (const Json& r : *responses) {
      if (auto range = r.find("response_range"); range != r.end()) {
        TRAINLET_ASSIGN_OR_RETURN(auto kvs, ReadKvs(*range));
        out.ranges.push_back(std::move(kvs));
      } else {
        out.ranges.emplace_back();
      }
    }
  }
  return out;
}

Result<int64_t> EtcdClient::LeaseGrant(int64_t ttl_seconds) {
  Json req = {{"TTL", std::to_string(ttl_seconds)}};
  TRAINLET_ASSIGN_OR_RETURN(std::string body, Post("/v3/lease/grant", req.dump(), false));
  TRAINLET_ASSIGN_OR_RETURN(Json j, ParseJson(body, endpoints()));
  if (const std::string error = ErrorText(j); j.contains("error") && !error.empty()) {
    return ErrorAnswer(endpoints(), 200, body);
  }
  return Int(j, "ID");
}

Result<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease_id) {
  Json req = {{"ID", std::to_string(lease_id)}};
  TRAINLET_ASSIGN_OR_RETURN(std::string body, Post("/v3/lease/keepalive", req.dump(), true));
  // A streaming call: the gateway answers {"result": {...}} per message received.
  TRAINLET_ASSIGN_OR_RETURN(Json j, ParseJson(body.substr(0, body.find('\n')), endpoints()));
  if (auto r = j.find("result"); r != j.end()) return Int(*r, "TTL");
  if (j.contains("error")) return ErrorAnswer(endpoints(), 200, j.dump());
  return Int(j, "TTL");
}

Result<bool> EtcdClient::FirstEndpointIsLeader() {
  Exchange x = PostOnce(*connections_[0]->http, "/v3/maintenance/status", "{}");
  if (x.error != httplib::Error::Success) {
    return UnavailableError("etcd " + connections_[0]->endpoint +
                            " unreachable: " + httplib::to_string(x.error));
  }
  if (x.status != 200) return ErrorAnswer(connections_[0]->endpoint, x.status, x.body);
  TRAINLET_ASSIGN_OR_RETURN(Json j, ParseJson(x.body, connections_[0]->endpoint));
  // Member ids are uint64 written as strings: compared as written.
  const std::string leader = j.value("leader", "");
  const std::string self = j.contains("header") ? j["header"].value("member_id", "") : "";
  return !leader.empty() && leader == self;
}

Status EtcdClient::LeaseRevoke(int64_t lease_id) {
  Json req = {{"ID", std::to_string(lease_id)}};
  auto body = Post("/v3/lease/revoke", req.dump(), true);
  if (!body.ok() && body.status().code() == ErrorCode::kNotFound) return Status::Ok();
  return body.status();
}

}  // namespace trainlet::coordinator
