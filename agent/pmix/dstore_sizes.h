// The size of libpmix's shared-memory store segments, fitted to one attempt's job.
//
// libpmix 4.2.2 keeps each namespace's data for its local clients in shared-memory segments (its
// gds/ds21 component): a meta segment (one 24-byte entry per rank) and data segments (each
// rank's blob, and the job's). Both are 4 MiB by default, files in the server's directory, and
// the server zeroes each one whole as it creates it (dstore_segment.c, a memset right after the
// mmap), at its first client's connection: 8 MiB of page faults, on the path of the node's first
// PMIx_Init. Where that directory is on a disk file system (the job's work dir, ext4 here) each
// page fault also allocates the file's block. Measured (bench/README.md, issue 16): 10-12 ms of
// the server's CPU to serve 6 ranks, against 6 ms with segments fitted to the job.
//
// libpmix reads the sizes from its environment (NS_META_SEG_SIZE, NS_DATA_SEG_SIZE, in bytes), in
// the server and in every client: the clients map the segments with the sizes they read, so the
// ranks get the same values (in the rank env stream). A data segment holds any number of blobs
// and more segments are added as they fill, but one blob must fit in one segment; the largest is
// the job's own (its info, node and proc maps, and the node's topology as XML, twice: the hwloc
// v1 and v2 exports libpmix shares), sized here from the job map and the XML with a wide margin.
// A job too large for the fitted sizes to be smaller than libpmix's own keeps libpmix's.
//
// Plain functions. Safe from any thread.
#pragma once

#include <cstdint>

namespace trainlet::pmix {

// libpmix 4.2.2's defaults (dstore_base.h: NS_META_SEG_SIZE, NS_DATA_SEG_SIZE).
inline constexpr uint64_t kPmixDefaultSegmentBytes = uint64_t{4} << 20;
// The env keys libpmix reads (server and clients).
inline constexpr const char* kMetaSegmentEnv = "NS_META_SEG_SIZE";
inline constexpr const char* kDataSegmentEnv = "NS_DATA_SEG_SIZE";

// Each a multiple of the page size and below kPmixDefaultSegmentBytes, or 0: libpmix's default
// is no larger (a very large job, a huge topology), leave it.
struct DstoreSizes {
  uint64_t meta_bytes = 0;
  uint64_t data_bytes = 0;
};

// The segment sizes for a job of `ranks` ranks on `nodes` nodes, whose node topology XML is
// `topology_xml_bytes` long (0: unknown, libpmix discovers the machine: a generous guess is
// used).
DstoreSizes FitDstoreSizes(uint64_t ranks, uint64_t nodes, uint64_t topology_xml_bytes);

}  // namespace trainlet::pmix
