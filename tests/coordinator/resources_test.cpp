#include "coordinator/resources.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

int64_t Q(std::string_view text, int64_t scale = 1) {
  auto q = ParseQuantity(text, scale);
  EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
  return q.ok() ? *q : -1;
}

TEST(Quantity, PlainAndDecimalSuffixes) {
  EXPECT_EQ(Q("0"), 0);
  EXPECT_EQ(Q("8"), 8);
  EXPECT_EQ(Q("+3"), 3);
  EXPECT_EQ(Q("16G"), 16'000'000'000);
  EXPECT_EQ(Q("1k"), 1000);
  EXPECT_EQ(Q("2M"), 2'000'000);
  EXPECT_EQ(Q("1T"), 1'000'000'000'000);
  EXPECT_EQ(Q("1E"), 1'000'000'000'000'000'000);
}

TEST(Quantity, BinarySuffixes) {
  EXPECT_EQ(Q("4Gi"), int64_t{4} << 30);
  EXPECT_EQ(Q("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(Q("1Ki"), 1024);
  EXPECT_EQ(Q("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(Q("1Ei"), int64_t{1} << 60);
}

TEST(Quantity, CpuInMillicores) {
  EXPECT_EQ(Q("2", 1000), 2000);
  EXPECT_EQ(Q("500m", 1000), 500);
  EXPECT_EQ(Q("0.5", 1000), 500);
  EXPECT_EQ(Q("1.25", 1000), 1250);
  EXPECT_EQ(Q("100u", 1000), 1);  // rounded up to a whole millicore
  EXPECT_EQ(Q(".5", 1000), 500);
}

TEST(Quantity, ExponentsAndRounding) {
  EXPECT_EQ(Q("1e3"), 1000);
  EXPECT_EQ(Q("12E2"), 1200);
  EXPECT_EQ(Q("5e-1"), 1);  // 0.5 rounds up
  EXPECT_EQ(Q("1500m"), 2);
  EXPECT_EQ(Q("1n"), 1);
  EXPECT_EQ(Q("0.0"), 0);
  EXPECT_EQ(Q("0.000000000000000000000000000000000000000001"), 1);
}

TEST(Quantity, RefusesWhatIsNotAQuantity) {
  for (std::string_view bad :
       {"", "GB", "4GB", "4 Gi", "1.2.3", "abc", "1e", "1e+", "Gi", "-", "1Kb", "0x10", "1e3Gi"}) {
    auto q = ParseQuantity(bad);
    EXPECT_FALSE(q.ok()) << "\"" << bad << "\" parsed as " << (q.ok() ? *q : 0);
    if (!q.ok()) {
      EXPECT_EQ(q.status().code(), ErrorCode::kInvalid);
      EXPECT_NE(q.status().message().find("is not a quantity"), std::string::npos);
    }
  }
}

TEST(Quantity, RefusesNegativeAndHuge) {
  auto neg = ParseQuantity("-2");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "\"-2\": must not be negative");
  EXPECT_FALSE(ParseQuantity("100Ei").ok());
  EXPECT_FALSE(ParseQuantity("1e300").ok());
  EXPECT_FALSE(ParseQuantity("99999999999999999999999999999999999999999").ok());
}

TEST(Quantity, Format) {
  EXPECT_EQ(FormatQuantity(ResourceKind::kCpu, 2000), "2");
  EXPECT_EQ(FormatQuantity(ResourceKind::kCpu, 500), "500m");
  EXPECT_EQ(FormatQuantity(ResourceKind::kMemory, int64_t{4} << 30), "4Gi");
  EXPECT_EQ(FormatQuantity(ResourceKind::kMemory, 16'000'000'000), "16G");
  EXPECT_EQ(FormatQuantity(ResourceKind::kMemory, 1001), "1001");
  EXPECT_EQ(FormatQuantity(ResourceKind::kNvidiaGpu, 8), "8");
}

TEST(ResourceRequests, ParsesKnownAndNotesTheRest) {
  auto r = ParseResourceRequests(
      {{"cpu", "4"}, {"memory", "32Gi"}, {"nvidia.com/gpu", "8"}, {"ephemeral-storage", "10Gi"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->resources[ResourceKind::kCpu], 4000);
  EXPECT_EQ(r->resources[ResourceKind::kMemory], int64_t{32} << 30);
  EXPECT_EQ(r->resources[ResourceKind::kNvidiaGpu], 8);
  EXPECT_EQ(r->resources[ResourceKind::kAmdGpu], 0);
  ASSERT_EQ(r->ignored.size(), 1u);
  EXPECT_EQ(r->ignored[0].rfind("spec.trainer.resourcesPerNode.ephemeral-storage: ignored", 0), 0u);
  EXPECT_EQ(FormatResources(r->resources), "cpu: 4, memory: 32Gi, nvidia.com/gpu: 8");
}

TEST(ResourceRequests, ErrorNamesTheField) {
  auto r = ParseResourceRequests({{"memory", "lots"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("spec.trainer.resourcesPerNode.memory: \"lots\" is not a "
                                       "quantity",
                                       0),
            0u);
}

TEST(ResourcesArithmetic, CoversAddSubtract) {
  Resources node, used, ask;
  node[ResourceKind::kCpu] = 8000;
  node[ResourceKind::kNvidiaGpu] = 8;
  used[ResourceKind::kNvidiaGpu] = 6;
  ask[ResourceKind::kNvidiaGpu] = 2;
  Resources free = node;
  free -= used;
  EXPECT_TRUE(free.Covers(ask));
  ask[ResourceKind::kNvidiaGpu] = 3;
  EXPECT_FALSE(free.Covers(ask));
  used[ResourceKind::kNvidiaGpu] = 10;  // more used than there is: nothing free, never negative
  free = node;
  free -= used;
  EXPECT_EQ(free[ResourceKind::kNvidiaGpu], 0);
  free += used;
  EXPECT_EQ(free[ResourceKind::kNvidiaGpu], 10);
  EXPECT_TRUE(Resources{}.empty());
  EXPECT_FALSE(node.empty());
}

TEST(Allocatable, FromTopologyWhenNoMap) {
  v1::NodeInfo info;
  info.mutable_topology()->set_pus(64);
  info.mutable_topology()->set_memory_bytes(uint64_t{512} << 30);
  for (int i = 0; i < 8; ++i) info.mutable_topology()->add_gpus()->set_vendor("nvidia");
  info.mutable_topology()->add_gpus()->set_vendor("amd");
  Resources r = AllocatableOf(info);
  EXPECT_EQ(r[ResourceKind::kCpu], 64000);
  EXPECT_EQ(r[ResourceKind::kMemory], int64_t{512} << 30);
  EXPECT_EQ(r[ResourceKind::kNvidiaGpu], 8);
  EXPECT_EQ(r[ResourceKind::kAmdGpu], 1);
  EXPECT_EQ(r[ResourceKind::kAppleGpu], 0);
}

TEST(Allocatable, TheAgentsMapWins) {
  v1::NodeInfo info;
  info.mutable_topology()->set_pus(64);
  for (int i = 0; i < 8; ++i) info.mutable_topology()->add_gpus()->set_vendor("nvidia");
  (*info.mutable_allocatable())["cpu"] = 60;
  (*info.mutable_allocatable())["memory"] = 1 << 30;
  (*info.mutable_allocatable())["nvidia.com/gpu"] = 7;  // one GPU fell off the bus
  Resources r = AllocatableOf(info);
  EXPECT_EQ(r[ResourceKind::kCpu], 60000);
  EXPECT_EQ(r[ResourceKind::kMemory], 1 << 30);
  EXPECT_EQ(r[ResourceKind::kNvidiaGpu], 7);
}

}  // namespace
}  // namespace trainlet::coordinator
