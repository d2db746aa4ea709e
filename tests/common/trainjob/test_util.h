// Helpers shared by the trainjob tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace trainlet::trainjob::testing {

// Kubeflow's own files (the conformance suite) live beside the repository, in shared/.
inline std::filesystem::path KubeflowDir() {
  return std::filesystem::path(TRAINLET_SOURCE_DIR) / ".." / "shared" / "kubeflow-trainer";
}

// Every .yaml/.yml file of the repository's fixtures, deploy/ and examples/, and of Kubeflow's
// files when they are beside the checkout.
inline std::vector<std::filesystem::path> RepositoryYamlFiles() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path source(TRAINLET_SOURCE_DIR);
  for (const auto& root :
       {source / "tests" / "fixtures", source / "deploy", source / "examples", KubeflowDir()}) {
    if (!std::filesystem::is_directory(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) out.push_back(entry.path());
    }
  }
  return out;
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `text` with the first occurrence of `from` replaced by `to`; fails loudly if absent, so a
// mutation test cannot pass by mutating nothing.
inline std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("mutation target not found: " + from);
  text.replace(at, from.size(), to);
  return text;
}

}  // namespace trainlet::trainjob::testing
