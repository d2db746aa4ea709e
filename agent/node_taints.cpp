#include "agent/node_taints.h"

#include <string>

namespace trainlet::agent {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ValidPart(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (c == '=' || c == ':' || c == ',' || c == ' ' || c == '\t') return false;
  }
  return true;
}

}  // namespace

Result<v1::Taint> ParseTaint(std::string_view text) {
  const std::string quoted = "taint \"" + std::string(text) + "\"";
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidError(quoted + ": must be key=value:Effect or key:Effect");
  }
  std::string_view kv = text.substr(0, colon), effect = text.substr(colon + 1);
  if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
    return InvalidError(quoted +
                        ": effect must be NoSchedule, PreferNoSchedule or NoExecute, got \"" +
                        std::string(effect) + "\"");
  }
  std::string_view key = kv, value;
  if (const size_t eq = kv.find('='); eq != std::string_view::npos) {
    key = kv.substr(0, eq);
    value = kv.substr(eq + 1);
    if (!ValidPart(value))
      return InvalidError(quoted + ": bad value \"" + std::string(value) + "\"");
  }
  if (!ValidPart(key)) return InvalidError(quoted + ": bad key \"" + std::string(key) + "\"");
  v1::Taint t;
  t.set_key(std::string(key));
  t.set_value(std::string(value));
  t.set_effect(std::string(effect));
  return t;
}

Result<std::vector<v1::Taint>> ParseTaintList(std::string_view text) {
  std::vector<v1::Taint> out;
  while (!Trim(text).empty()) {
    const size_t comma = text.find(',');
    std::string_view one = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    TRAINLET_ASSIGN_OR_RETURN(v1::Taint t, ParseTaint(one));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace trainlet::agent
