#include "agent/pmix/dstore_sizes.h"

#include <algorithm>

namespace trainlet::pmix {

namespace {

constexpr uint64_t kPage = 4096;
// libpmix 4.2.2's rank_meta_info: three size_t (rank, offset, count); the segment starts with a
// size_t count. Slot 0 is the job's (PMIX_RANK_WILDCARD), slot r + 1 rank r's.
constexpr uint64_t kMetaEntryBytes = 24;
// Unknown topology (no agent XML): a large machine's hwloc XML (many cores, NUMA nodes, GPUs
// and NICs) is a few hundred KiB; this VM's 27 KiB.
constexpr uint64_t kUnknownXmlBytes = 512 << 10;
// The job's blob besides the XML: its fixed keys, and the node and proc maps (PMIx regexes, a
// few bytes per node and per rank; bounded here by much more).
constexpr uint64_t kJobFixedBytes = 64 << 10;
constexpr uint64_t kPerNodeBytes = 256;
constexpr uint64_t kPerRankBytes = 64;
// Never below this: one blob must fit one segment, and a rank may PMIx_Put (and a fence carry) a
// value of its own of any size; libpmix refuses a larger one by name ("PLEASE set
// NS_DATA_SEG_SIZE ..."), and the trainer env's NS_DATA_SEG_SIZE then wins.
constexpr uint64_t kMinDataBytes = 1 << 20;

uint64_t RoundUpToPage(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

}  // namespace

DstoreSizes FitDstoreSizes(uint64_t ranks, uint64_t nodes, uint64_t topology_xml_bytes) {
  const uint64_t xml = topology_xml_bytes == 0 ? kUnknownXmlBytes : topology_xml_bytes;
  // Every rank's entry in the first meta segment, twice over.
  const uint64_t meta = RoundUpToPage(8 + 2 * (ranks + 1) * kMetaEntryBytes);
  // The job's blob: the XML twice (hwloc v1 and v2), its keys and maps; the whole twice over.
  const uint64_t job = 2 * xml + kJobFixedBytes + kPerNodeBytes * nodes + kPerRankBytes * ranks;
  const uint64_t data = RoundUpToPage(std::max(kMinDataBytes, 2 * job));
  return DstoreSizes{meta < kPmixDefaultSegmentBytes ? meta : 0,
                     data < kPmixDefaultSegmentBytes ? data : 0};
}

}  // namespace trainlet::pmix
