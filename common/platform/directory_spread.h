// Where new directories land on disk. The agent makes one directory per job under logs/, steps/
// and exec/ and removes it when the job goes; the next job's files are created moments later.
// ext4 without a journal skips inodes deleted in the last minute or so when it allocates new
// ones (fs/ext4/ialloc.c, recently_deleted()), and it allocates a file's inode in its parent
// directory's block group. So in a directory whose jobs come and go, every new rank log scanned
// past the previous jobs' freed inodes: creating 64 logs took 6–14 ms, growing with the churn,
// on the benchmark machine. Marked as the top of unrelated hierarchies (FS_TOPDIR_FL, `chattr
// +T`), the directory's subdirectories are spread over the block groups by the Orlov allocator
// instead, and the same 64 files take about 1 ms (bench/README.md).
#pragma once

#include <string>

#include "common/status.h"

namespace trainlet::platform {

// Sets FS_TOPDIR_FL on the directory `dir`. OK when set (or already set), else why not, naming
// `dir`: kIo when it cannot be opened or the file system refuses the flag (XFS and btrfs ignore
// or refuse it), kUnavailable where there is no such flag (macOS). Either costs nothing but the
// speed-up, so callers only log it. Never changes anything else about `dir`.
Status SpreadSubdirectories(const std::string& dir);

}  // namespace trainlet::platform
