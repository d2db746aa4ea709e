// Queue objects for tests: a YAML text of Kueue objects parsed, staged and committed into a
// QueueCatalog, as `apply` does (failing the test on any error).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/trainjob/yaml_support.h"
#include "coordinator/queue_catalog.h"

namespace trainlet::coordinator {

inline void CommitQueueObjects(QueueCatalog& catalog, const std::string& yaml) {
  auto docs = trainjob::LoadDocuments(yaml);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  std::vector<std::string> warnings;
  auto stage = catalog.StageObjects(*docs, "", &warnings);
  ASSERT_TRUE(stage.ok()) << stage.status().ToString();
  v1::ApplyResult result;
  catalog.Commit(std::move(stage).value(), result);
}

}  // namespace trainlet::coordinator
