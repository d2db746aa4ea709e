// How a node's share of a PMIx fence travels through trainlet's rendezvous store, and how the
// whole job's data is put back together from what the fence published (agent/pmix/pmix_host.h).
//
// libpmix hands its host one opaque blob per node per fence (the node's clients' contributions,
// self-describing) and wants back the blobs of every node, one after another. Each node puts its
// blob under "pmix/fence-<F>/node-<N>/<C>", in chunks of at most the store's value cap; the
// fence's result holds every node's chunks, which are joined in node-rank order, then chunk order
// (numeric: node 10 comes after node 9).
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainlet::pmix {

// The rendezvous store caps a value at 1 MiB (docs/rendezvous.md).
inline constexpr size_t kFenceChunkBytes = 1u << 20;

// The (key, value) puts of node `node`'s `data` for fence number `fence` (1, 2, ...); none for
// empty data. Each value is at most `chunk_bytes` (> 0).
std::vector<std::pair<std::string, std::string>> FenceDataPuts(
    uint64_t fence, uint32_t node, std::string_view data, size_t chunk_bytes = kFenceChunkBytes);

// Every node's data of fence `fence`, joined in node order then chunk order, from the pairs a
// fence published (all of the attempt's pairs; keys of other fences and other users are skipped,
// as are keys that only look like fence keys).
std::string JoinFenceData(uint64_t fence,
                          const std::vector<std::pair<std::string_view, std::string_view>>& pairs);

}  // namespace trainlet::pmix
