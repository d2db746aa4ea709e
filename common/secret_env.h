// The one way every reader of a rank's per-attempt secret takes it from its environment: the
// launcher key (TRAINLET_EXEC_KEY) for trainlet-exec, the rendezvous token
// (TRAINLET_RENDEZVOUS_TOKEN) for the rendezvous client, trainletctl rendezvous and
// trainlet-pmix.
//
// trainlet-step puts each secret into a 0400 file owned by the rank's user and gives the rank
// NAME_FILE=<path> instead of NAME=<value> (agent/step/rank_files.h), so no secret sits in an
// env that /proc/<pid>/environ, `ps e` or a child shows. NAME itself is still read, and wins when
// both are set: ranks of an agent before the files, and a caller who sets the value by hand.
//
// Header-only and plain C++/libc: the rendezvous client library (libtrainlet_rendezvous, loaded
// by Python through ctypes) links nothing of trainlet_common. Safe from any thread that does not
// change the environment meanwhile.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace trainlet {

struct SecretFromEnv {
  std::string value;  // "" when neither NAME nor NAME_FILE is set (or either is empty)
  std::string error;  // not empty when NAME_FILE is set but cannot be read: the reason, naming it
};

// NAME when set and not empty, else the contents of the file NAME_FILE names (one trailing
// newline dropped, as for a file written by hand; at most 64 KiB read).
inline SecretFromEnv ReadSecretFromEnv(const std::string& name) {
  SecretFromEnv out;
  if (const char* v = std::getenv(name.c_str()); v != nullptr && *v != '\0') {
    out.value = v;
    return out;
  }
  const std::string file_var = name + "_FILE";
  const char* path = std::getenv(file_var.c_str());
  if (path == nullptr || *path == '\0') return out;
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) {
    out.error = file_var + "=" + path + ": cannot be read";
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && out.value.size() < (64u << 10)) {
    out.value.append(buf, n);
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    out.value.clear();
    out.error = file_var + "=" + path + ": read error";
    return out;
  }
  if (!out.value.empty() && out.value.back() == '\n') out.value.pop_back();
  if (out.value.empty()) out.error = file_var + "=" + path + ": empty";
  return out;
}

}  // namespace trainlet
