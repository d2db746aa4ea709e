#include "agent/pmix/dstore_sizes.h"

#include <gtest/gtest.h>

namespace trainlet::pmix {
namespace {

// libpmix 4.2.2's rank_meta_info and the segment's leading count.
constexpr uint64_t kMetaEntry = 24;

TEST(DstoreSizes, ASmallJobGetsSegmentsFarBelowLibpmixDefaults) {
  const DstoreSizes s = FitDstoreSizes(6, 3, 20 << 10);
  EXPECT_EQ(s.meta_bytes, 4096u);
  EXPECT_EQ(s.data_bytes, 1u << 20);
}

TEST(DstoreSizes, SizesArePagesAndHoldEveryRankAndTheJobsBlob) {
  for (const uint64_t ranks : {1ull, 64ull, 1000ull, 20000ull, 80000ull}) {
    for (const uint64_t xml : {0ull, 4096ull, 300000ull}) {
      const uint64_t nodes = (ranks + 7) / 8;
      const DstoreSizes s = FitDstoreSizes(ranks, nodes, xml);
      SCOPED_TRACE(::testing::Message() << ranks << " ranks, xml " << xml);
      if (s.meta_bytes != 0) {
        EXPECT_EQ(s.meta_bytes % 4096, 0u);
        // Every rank's slot (and the job's) in the first segment.
        EXPECT_GE(s.meta_bytes, 8 + (ranks + 1) * kMetaEntry);
        EXPECT_LT(s.meta_bytes, kPmixDefaultSegmentBytes);
      }
      if (s.data_bytes != 0) {
        EXPECT_EQ(s.data_bytes % 4096, 0u);
        // The XML twice (hwloc v1 and v2), with room to spare; an unknown XML counts as 512 KiB.
        EXPECT_GE(s.data_bytes, 4 * (xml == 0 ? 512u << 10 : xml));
        EXPECT_LT(s.data_bytes, kPmixDefaultSegmentBytes);
      }
    }
  }
}

TEST(DstoreSizes, AnUnknownTopologyStillGetsASmallerDataSegment) {
  const DstoreSizes s = FitDstoreSizes(6, 3, 0);
  EXPECT_GT(s.data_bytes, 2u << 20);
  EXPECT_LT(s.data_bytes, kPmixDefaultSegmentBytes);
}

TEST(DstoreSizes, AJobLibpmixsDefaultsFitNoBetterKeepsThem) {
  // 200000 ranks need more than 4 MiB of meta entries; a 3 MiB topology more than 4 MiB of data.
  EXPECT_EQ(FitDstoreSizes(200000, 25000, 20 << 10).meta_bytes, 0u);
  EXPECT_EQ(FitDstoreSizes(8, 1, 3 << 20).data_bytes, 0u);
  EXPECT_NE(FitDstoreSizes(8, 1, 3 << 20).meta_bytes, 0u);
}

}  // namespace
}  // namespace trainlet::pmix
