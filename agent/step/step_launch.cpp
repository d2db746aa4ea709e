#include "agent/step/step_launch.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "agent/step/private_file.h"
#include "common/platform/process_cgroup.h"

namespace trainlet::step {
namespace {

using json = nlohmann::json;

std::string_view KeyOf(std::string_view kv) { return kv.substr(0, kv.find('=')); }

// Typed field access that reports the field's path instead of throwing.
class Reader {
 public:
  explicit Reader(std::string* error) : error_(error) {}

  const json* Field(const json& obj, const char* key, const std::string& where,
                    json::value_t type) {
    if (!error_->empty()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end()) {
      *error_ = where + key + ": missing";
      return nullptr;
    }
    const bool ok = it->type() == type ||
                    (type == json::value_t::number_unsigned &&
                     it->type() == json::value_t::number_integer && it->get<int64_t>() >= 0);
    if (!ok) {
      *error_ = where + key + ": has the wrong type (" + it->type_name() + ")";
      return nullptr;
    }
    return &*it;
  }
  bool U32(const json& obj, const char* key, const std::string& where, uint32_t* out) {
    const json* v = Field(obj, key, where, json::value_t::number_unsigned);
    if (v == nullptr) return false;
    const uint64_t n = v->get<uint64_t>();
    if (n > UINT32_MAX) {
      *error_ = where + key + ": out of range";
      return false;
    }
    *out = static_cast<uint32_t>(n);
    return true;
  }
  bool U64(const json& obj, const char* key, const std::string& where, uint64_t* out) {
    const json* v = Field(obj, key, where, json::value_t::number_unsigned);
    if (v == nullptr) return false;
    *out = v->get<uint64_t>();
    return true;
  }
  bool Bool(const json& obj, const char* key, const std::string& where, bool* out) {
    const json* v = Field(obj, key, where, json::value_t::boolean);
    if (v == nullptr) return false;
    *out = v->get<bool>();
    return true;
  }
  bool Str(const json& obj, const char* key, const std::string& where, std::string* out) {
    const json* v = Field(obj, key, where, json::value_t::string);
    if (v == nullptr) return false;
    *out = v->get<std::string>();
    return true;
  }
  bool StrList(const json& obj, const char* key, const std::string& where,
               std::vector<std::string>* out) {
    const json* v = Field(obj, key, where, json::value_t::array);
    if (v == nullptr) return false;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        *error_ = where + key + "[" + std::to_string(i) + "]: not a string";
        return false;
      }
      out->push_back((*v)[i].get<std::string>());
    }
    return true;
  }

 private:
  std::string* error_;
};

// "steps": [{"name": ..., "depends_on": [{"step": ..., "status": "Ready"|"Complete"}]}].
void DecodeSteps(const json& doc, Reader& rd, std::vector<StepOrder>* out, std::string* error) {
  const json* steps = rd.Field(doc, "steps", "", json::value_t::array);
  for (size_t i = 0; steps != nullptr && i < steps->size() && error->empty(); ++i) {
    const json& s = (*steps)[i];
    const std::string where = "steps[" + std::to_string(i) + "].";
    if (!s.is_object()) {
      *error = "steps[" + std::to_string(i) + "]: not an object";
      return;
    }
    StepOrder order;
    rd.Str(s, "name", where, &order.name);
    const json* needs = rd.Field(s, "depends_on", where, json::value_t::array);
    for (size_t d = 0; needs != nullptr && d < needs->size() && error->empty(); ++d) {
      const std::string at = where + "depends_on[" + std::to_string(d) + "].";
      if (!(*needs)[d].is_object()) {
        *error = at + ": not an object";
        return;
      }
      StepNeed need;
      rd.Str((*needs)[d], "step", at, &need.step);
      if (rd.Str((*needs)[d], "status", at, &need.status) && need.status != "Ready" &&
          need.status != "Complete") {
        *error = at + "status: '" + need.status + "' is not Ready or Complete";
      }
      order.depends_on.push_back(std::move(need));
    }
    out->push_back(std::move(order));
  }
}

}  // namespace

std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base_env,
                                        const std::map<std::string, std::string>& overrides) {
  // Once per rank on the launch's path: the base's keys are sorted once (as views, the first of
  // duplicates first) and walked beside the sorted overrides, without a set or a temporary key.
  std::vector<std::pair<std::string_view, size_t>> keys;
  keys.reserve(base_env.size());
  for (size_t i = 0; i < base_env.size(); ++i) {
    const size_t eq = base_env[i].find('=');
    if (eq != std::string::npos) keys.emplace_back(std::string_view(base_env[i]).substr(0, eq), i);
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  using Entry = std::map<std::string, std::string>::value_type;
  std::vector<const Entry*> set(base_env.size(), nullptr);  // the override of a kept entry
  std::vector<char> keep(base_env.size(), 0);
  std::vector<const Entry*> added;  // overrides of keys the base lacks, in key order
  auto ov = overrides.begin();
  for (size_t j = 0; j < keys.size(); ++j) {
    if (j > 0 && keys[j].first == keys[j - 1].first) continue;  // a duplicate: the first wins
    keep[keys[j].second] = 1;
    for (; ov != overrides.end() && std::string_view(ov->first) < keys[j].first; ++ov)
      added.push_back(&*ov);
    if (ov != overrides.end() && ov->first == keys[j].first) set[keys[j].second] = &*(ov++);
  }
  for (; ov != overrides.end(); ++ov) added.push_back(&*ov);
  auto joined = [](const Entry& e) {
    std::string kv;
    kv.reserve(e.first.size() + 1 + e.second.size());
    kv.append(e.first).append(1, '=').append(e.second);
    return kv;
  };
  std::vector<std::string> env;
  env.reserve(keys.size() + added.size());
  for (size_t i = 0; i < base_env.size(); ++i) {
    if (keep[i]) env.push_back(set[i] == nullptr ? base_env[i] : joined(*set[i]));
  }
  for (const Entry* e : added) env.push_back(joined(*e));
  return env;
}

namespace {

// The env entries every rank has with the same value (none for fewer than two ranks): written
// once as "env_common", so that 64 ranks' file is not 64 copies of the job's env (99 KB of JSON
// to encode in the agent and parse in the step, on every launch's critical path).
//
// Except what an agent from before env_common reads from each rank's own env when it adopts a
// running step (an agent downgraded under running ranks): the rendezvous token, by which it
// serves the attempt's rendezvous again (rendezvous_user.h). Without it there, such an agent
// would refuse every rendezvous call of the adopted ranks.
std::map<std::string, std::string> CommonEnv(const std::vector<StepRank>& ranks) {
  std::map<std::string, std::string> common;
  if (ranks.size() < 2) return common;
  common = ranks[0].env;
  common.erase("TRAINLET_RENDEZVOUS_TOKEN");
  for (size_t i = 1; i < ranks.size() && !common.empty(); ++i) {
    std::erase_if(common, [&](const auto& kv) {
      const auto it = ranks[i].env.find(kv.first);
      return it == ranks[i].env.end() || it->second != kv.second;
    });
  }
  return common;
}

}  // namespace

namespace {

// The launch file written straight into one string, compact (as json::dump(-1) wrote it), without
// a json tree of every rank's env first: that tree was most of the agent's EncodeLaunch time
// (0.9 ms of CPU per 64-rank launch, between the plan and the step's hand-over).
class JsonWriter {
 public:
  std::string& out() { return out_; }
  void Raw(std::string_view text) { out_ += text; }
  // A string value: printable ASCII without quote or backslash as it is; anything else (escapes,
  // UTF-8, invalid bytes) as nlohmann::json writes it, invalid UTF-8 replaced (env values and
  // paths are bytes from outside: never fail on them).
  void Str(std::string_view s) {
    const bool plain = std::all_of(
        s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
    if (plain) {
      out_ += '"';
      out_ += s;
      out_ += '"';
    } else {
      out_ += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  void Key(std::string_view key) {
    Comma();
    Str(key);
    out_ += ':';
    value_next_ = true;  // the value follows without a comma
  }
  template <typename Int>
  void Num(Int n) {
    Comma();
    out_ += std::to_string(n);
  }
  void Bool(bool b) {
    Comma();
    out_ += b ? "true" : "false";
  }
  void Text(std::string_view s) {
    Comma();
    Str(s);
  }
  void Open(char c) {
    Comma();
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }
  void StrList(const std::vector<std::string>& list) {
    Open('[');
    for (const std::string& s : list) Text(s);
    Close(']');
  }

 private:
  // A comma before every member or element but the first of its object or array.
  void Comma() {
    if (value_next_) {
      value_next_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }

  std::string out_;
  bool first_ = true;
  bool value_next_ = false;
};

}  // namespace

std::string EncodeLaunch(const StepLaunch& launch) {
  const std::map<std::string, std::string> common = CommonEnv(launch.ranks);
  JsonWriter w;
  w.out().reserve(4096 + launch.ranks.size() * 512);
  w.Open('{');
  w.Key("version");
  w.Num(kStepLaunchVersion);
  w.Key("job");
  w.Text(launch.job);
  w.Key("attempt");
  w.Num(launch.attempt);
  w.Key("stop_grace_ms");
  w.Num(launch.stop_grace_ms);
  w.Key("agent_lock");
  w.Text(launch.agent_lock);
  w.Key("orphan_grace_ms");
  w.Num(launch.orphan_grace_ms);
  w.Key("cgroup");
  w.Text(launch.cgroup);
  w.Key("agent_stamps");
  w.Bool(launch.agent_stamps);
  w.Key("stop_requests");
  w.Bool(launch.stop_requests);
  w.Key("log_max_bytes");
  w.Num(launch.log_max_bytes);
  w.Key("spare_dir");
  w.Text(launch.spare_dir);
  w.Key("base_env");
  w.StrList(launch.base_env);
  w.Key("env_common");
  w.Open('{');
  for (const auto& [k, v] : common) {
    w.Key(k);
    w.Text(v);
  }
  w.Close('}');
  w.Key("ranks");
  w.Open('[');
  for (const StepRank& r : launch.ranks) {
    w.Open('{');
    w.Key("rank");
    w.Num(r.rank);
    w.Key("local_rank");
    w.Num(r.local_rank);
    w.Key("argv");
    w.StrList(r.argv);
    w.Key("env");
    w.Open('{');
    auto shared = common.begin();  // both sorted by key: walked together, no lookup per entry
    for (const auto& [k, v] : r.env) {
      while (shared != common.end() && shared->first < k) ++shared;
      if (shared != common.end() && shared->first == k) continue;
      w.Key(k);
      w.Text(v);
    }
    w.Close('}');
    w.Key("cwd");
    w.Text(r.cwd);
    w.Key("log_path");
    w.Text(r.log_path);
    w.Key("stderr_path");
    w.Text(r.stderr_path);
    w.Key("cpus");
    w.Open('[');
    for (unsigned c : r.cpus) w.Num(c);
    w.Close(']');
    w.Key("step");
    w.Text(r.step);
    if (!r.run_as.agent_run_as.empty()) {
      w.Key("run_as");
      w.Text(r.run_as.agent_run_as);
    }
    if (r.run_as.job_run_as_user) {
      w.Key("run_as_user");
      w.Num(*r.run_as.job_run_as_user);
    }
    if (r.run_as.job_run_as_group) {
      w.Key("run_as_group");
      w.Num(*r.run_as.job_run_as_group);
    }
    if (r.run_as.fs_group) {
      w.Key("fs_group");
      w.Num(*r.run_as.fs_group);
    }
    if (r.run_as.allow_privilege_escalation) {
      w.Key("allow_privilege_escalation");
      w.Bool(*r.run_as.allow_privilege_escalation);
    }
    w.Close('}');
  }
  w.Close(']');
  w.Key("steps");
  w.Open('[');
  for (const StepOrder& o : launch.steps) {
    w.Open('{');
    w.Key("name");
    w.Text(o.name);
    w.Key("depends_on");
    w.Open('[');
    for (const StepNeed& n : o.depends_on) {
      w.Open('{');
      w.Key("step");
      w.Text(n.step);
      w.Key("status");
      w.Text(n.status);
      w.Close('}');
    }
    w.Close(']');
    w.Close('}');
  }
  w.Close(']');
  w.Close('}');
  w.Raw("\n");
  return std::move(w.out());
}

Result<StepLaunch> DecodeLaunch(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidError("not valid JSON");
  if (!doc.is_object()) return InvalidError("not a JSON object");
  std::string error;
  Reader rd(&error);
  StepLaunch out;
  uint32_t version = 0;
  if (rd.U32(doc, "version", "", &version) && version != kStepLaunchVersion) {
    return InvalidError("version: " + std::to_string(version) + " is not " +
                        std::to_string(kStepLaunchVersion));
  }
  rd.Str(doc, "job", "", &out.job);
  rd.U32(doc, "attempt", "", &out.attempt);
  rd.U32(doc, "stop_grace_ms", "", &out.stop_grace_ms);
  // Optional: absent, the step never stops its ranks on its own.
  if (doc.contains("agent_lock")) rd.Str(doc, "agent_lock", "", &out.agent_lock);
  if (doc.contains("orphan_grace_ms")) rd.U32(doc, "orphan_grace_ms", "", &out.orphan_grace_ms);
  // Optional: agents before it did not stamp the lock.
  if (doc.contains("agent_stamps")) rd.Bool(doc, "agent_stamps", "", &out.agent_stamps);
  // Optional: steps before it took no stop or warning requests.
  if (doc.contains("stop_requests")) rd.Bool(doc, "stop_requests", "", &out.stop_requests);
  // Optional: files written before it cap no log.
  if (doc.contains("log_max_bytes")) rd.U64(doc, "log_max_bytes", "", &out.log_max_bytes);
  // Optional: files written before it give no spare files.
  if (doc.contains("spare_dir")) rd.Str(doc, "spare_dir", "", &out.spare_dir);
  // Optional: files written before it mean "auto".
  if (doc.contains("cgroup") && rd.Str(doc, "cgroup", "", &out.cgroup) &&
      !platform::ParseCgroupMode(out.cgroup)) {
    return InvalidError("cgroup: '" + out.cgroup + "' is not auto, v2, v1 or none");
  }
  rd.StrList(doc, "base_env", "", &out.base_env);
  // Optional: files written before it hold every rank's whole env in the rank.
  std::map<std::string, std::string> common;
  if (const json* c = doc.contains("env_common")
                          ? rd.Field(doc, "env_common", "", json::value_t::object)
                          : nullptr) {
    for (const auto& [k, v] : c->items()) {
      if (!v.is_string()) error = "env_common." + k + ": not a string";
      if (v.is_string()) common[k] = v.get<std::string>();
    }
  }
  const json* ranks = rd.Field(doc, "ranks", "", json::value_t::array);
  if (ranks != nullptr) {
    for (size_t i = 0; i < ranks->size() && error.empty(); ++i) {
      const json& r = (*ranks)[i];
      const std::string where = "ranks[" + std::to_string(i) + "].";
      if (!r.is_object()) {
        error = "ranks[" + std::to_string(i) + "]: not an object";
        break;
      }
      StepRank sr;
      rd.U32(r, "rank", where, &sr.rank);
      rd.U32(r, "local_rank", where, &sr.local_rank);
      rd.StrList(r, "argv", where, &sr.argv);
      rd.Str(r, "cwd", where, &sr.cwd);
      rd.Str(r, "log_path", where, &sr.log_path);
      // Optional: launch files written before exec sessions ran under steps lack it.
      if (r.contains("stderr_path")) rd.Str(r, "stderr_path", where, &sr.stderr_path);
      // Optional: launch files written before replicated jobs ran lack it (the main one).
      if (r.contains("step")) rd.Str(r, "step", where, &sr.step);
      // Optional: absent, the rank runs as the step's user (files written before run_as).
      if (r.contains("run_as")) rd.Str(r, "run_as", where, &sr.run_as.agent_run_as);
      for (const auto& [key, field] : {std::pair{"run_as_user", &sr.run_as.job_run_as_user},
                                       std::pair{"run_as_group", &sr.run_as.job_run_as_group},
                                       std::pair{"fs_group", &sr.run_as.fs_group}}) {
        if (!r.contains(key)) continue;
        if (!r[key].is_number_integer()) {
          error = where + key + ": not an integer";
          break;
        }
        *field = r[key].get<int64_t>();
      }
      // Optional: absent in files written before it, and when the container does not set it.
      if (r.contains("allow_privilege_escalation")) {
        if (!r["allow_privilege_escalation"].is_boolean()) {
          error = where + "allow_privilege_escalation: not a boolean";
        } else {
          sr.run_as.allow_privilege_escalation = r["allow_privilege_escalation"].get<bool>();
        }
      }
      if (const json* env = rd.Field(r, "env", where, json::value_t::object)) {
        for (const auto& [k, v] : env->items()) {
          if (!v.is_string()) {
            error = where + "env." + k + ": not a string";
            break;
          }
          sr.env[k] = v.get<std::string>();
        }
        sr.env.insert(common.begin(), common.end());  // a rank's own entry wins (none clash)
      }
      if (const json* cpus = rd.Field(r, "cpus", where, json::value_t::array)) {
        for (const json& c : *cpus) {
          if (!c.is_number_unsigned() || c.get<uint64_t>() > (1u << 20)) {
            error = where + "cpus: not a CPU number";
            break;
          }
          sr.cpus.push_back(c.get<unsigned>());
        }
      }
      if (error.empty() && sr.argv.empty()) error = where + "argv: empty";
      out.ranks.push_back(std::move(sr));
    }
  }
  if (error.empty() && doc.contains("steps")) DecodeSteps(doc, rd, &out.steps, &error);
  if (!error.empty()) return InvalidError(error);
  if (out.job.empty()) return InvalidError("job: empty");
  if (out.attempt == 0) return InvalidError("attempt: must be >= 1");
  return out;
}

Status WriteLaunchFile(const std::string& path, const StepLaunch& launch) {
  return ReplaceFile(path, EncodeLaunch(launch), "launch file");
}

Result<StepLaunch> ReadLaunchFile(const std::string& path) {
  TRAINLET_ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path, 64u << 20, "launch file"));
  auto launch = DecodeLaunch(text);
  if (!launch.ok()) return InvalidError("launch file " + path + ": " + launch.status().message());
  return launch;
}

}  // namespace trainlet::step
