// libFuzzer target for the rendezvous snapshot reader: a rank maps a file it did not write, so
// any bytes must parse or be rejected without a crash, a sanitizer report or a read outside them.
// Bytes that parse must be searchable: every key is found by Find() with its own value, and a
// re-encoding of the pairs parses to the same table.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/rendezvous/snapshot_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainlet::rendezvous::SnapshotView;
  // A private copy whose end is the end of the allocation, so ASan sees any over-read.
  std::vector<uint8_t> copy(data, data + size);
  auto view = SnapshotView::Parse(copy.data(), copy.size());
  if (!view.ok()) return 0;
  std::map<std::string, std::string> pairs;
  for (size_t i = 0; i < view->size(); ++i) {
    const auto k = view->key(i);
    const auto v = view->value(i);
    auto found = view->Find(k);
    if (!found || found->data() != v.data() || found->size() != v.size()) std::abort();
    pairs.emplace(k, v);
  }
  if (pairs.size() != view->size()) std::abort();  // Parse promised distinct keys
  const std::string again = trainlet::rendezvous::EncodeSnapshot(view->epoch(), pairs);
  auto reparsed = SnapshotView::Parse(again.data(), again.size());
  if (!reparsed.ok() || reparsed->size() != view->size() || reparsed->epoch() != view->epoch()) {
    std::abort();
  }
  return 0;
}
