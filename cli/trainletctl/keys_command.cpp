#include "trainletctl/keys_command.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/curve_keys.h"
#include "trainletctl/render.h"

namespace trainlet::cli {
namespace fs = std::filesystem;

int CmdKeysCreate(const std::string& dir, const std::string& name, const std::string& role,
                  const std::string& allowlist) {
  if (role != "agent" && role != "operator" && role != "coordinator") {
    std::cerr << "error: --role " << role << ": use agent, operator or coordinator\n";
    return 2;
  }
  if (!IsValidKeyName(name)) {
    std::cerr << "error: --name "
              << nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << ": a key name is 1 to 253 letters, digits, '.', '_' or '-', starting with a "
                 "letter or digit (it names the key's files and its allowlist line)\n";
    return 2;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "error: --dir " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  const std::string path = dir + "/" + name + ".key";
  if (fs::exists(path)) {
    std::cerr << "error: " << path << " already exists; refusing to overwrite a key\n";
    return 1;
  }
  auto keys = GenerateCurveKeyPair();
  if (!keys.ok()) return std::cerr << "error: " << keys.status().message() << "\n", 1;
  if (Status s = WriteKeyPair(path, *keys); !s.ok()) {
    return std::cerr << "error: " << s.message() << "\n", 1;
  }
  std::cout << "wrote " << path << " (secret, 0600) and " << path << ".pub\n";
  std::cout << "public key: " << keys->public_z85 << "\n";
  if (!allowlist.empty()) {
    if (Status s = AppendToAllowlist(allowlist, keys->public_z85, name); !s.ok()) {
      return std::cerr << "error: --allowlist: " << s.message() << "\n", 1;
    }
    std::cout << "enrolled " << name << " in " << allowlist << "\n";
  } else if (role != "coordinator") {
    std::cout << "enrol it on the coordinator host with:\n  echo '" << keys->public_z85 << " "
              << name << "' >> /etc/trainlet/keys/" << role << "s.allow\n";
  }
  return 0;
}

int CmdKeysList(const std::string& dir, const std::string& output) {
  if (!fs::is_directory(dir)) {
    std::cerr << "error: --dir " << dir << ": not a directory\n";
    return 1;
  }
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"SOURCE", "NAME", "PUBLIC KEY"}};
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    if (p.extension() == ".key") {
      auto k = ReadKeyPair(p.string());
      if (!k.ok()) continue;
      rows.push_back({p.filename().string(), p.stem().string(), k->public_z85});
      out.push_back({{"source", p.filename().string()},
                     {"name", p.stem().string()},
                     {"publicKey", k->public_z85},
                     {"hasSecret", !k->secret_z85.empty()}});
    } else if (p.extension() == ".allow") {
      auto list = ReadAllowlist(p.string());
      if (!list.ok()) {
        std::cerr << "warning: " << list.status().message() << "\n";
        continue;
      }
      for (const auto& [key, name] : *list) {
        rows.push_back({p.filename().string(), name, key});
        out.push_back({{"source", p.filename().string()}, {"name", name}, {"publicKey", key}});
      }
    }
  }
  if (output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << RenderTable(rows);
  }
  return 0;
}

}  // namespace trainlet::cli
