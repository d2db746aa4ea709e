// The file `trainletctl apply -f` sends, read and checked before anything goes to the
// coordinator, so that what is wrong with a file is said about the file: an empty file is not a
// silent success, and a file too large for one request, or not UTF-8 (which the request cannot
// carry), is not reported as "did not answer within 15 s".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::cli {

// The most one apply may carry: what the coordinator's parser takes (trainjob::kMaxYamlBytes,
// 4 MiB), well under the message cap. The coordinator also refuses more than 2,000 documents in
// one file (coordinator/apply_limits.h), the size measured to keep its loop on time
// (docs/operations.md, "Large applies and long lists").
inline constexpr size_t kMaxApplyBytes = 4u << 20;

// Reads `file` ("-": stdin) and checks it. Invalid, starting "-f FILE: ", when it cannot be read,
// is empty or only whitespace, is over `max_bytes`, or is not UTF-8 (naming the first bad byte's
// line and column). A directory, as kubectl apply -f DIR: every .yaml, .yml and .json file
// directly in it, in name order, as one multi-document text (empty files skipped; an error names
// the file at fault; Invalid when none holds anything).
Result<std::string> ReadApplyInput(const std::string& file, size_t max_bytes = kMaxApplyBytes);

// Where `text` stops being UTF-8: the byte offset, or npos when all of it is. Overlong forms,
// surrogates and code points past U+10FFFF are invalid, as in RFC 3629.
size_t FirstInvalidUtf8(std::string_view text);

}  // namespace trainlet::cli
