// libFuzzer target for what an agent reads back from a step's directory after a restart: the
// events file (ParseRecords) and the launch file (DecodeLaunch). Both may be torn by a crash or
// damaged on disk, so any bytes must parse or be refused with an error, never crash. Records that
// parse must re-encode to bytes that parse to the same records.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "agent/step/step_launch.h"
#include "agent/step/step_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainlet::step;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<StepRecord> records;
  auto used = ParseRecords(text, 0, &records);
  if (used.ok()) {
    if (*used > size) std::abort();
    std::string again;
    for (const StepRecord& r : records) again += EncodeRecord(r);
    std::vector<StepRecord> reread;
    auto used_again = ParseRecords(again, 0, &reread);
    if (!used_again.ok() || *used_again != again.size() || reread.size() != records.size()) {
      std::abort();
    }
  }
  (void)DecodeLaunch(text);
  return 0;
}
