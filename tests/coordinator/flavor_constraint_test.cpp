// FlavorConstraintOf (coordinator/flavor_constraint.h): the nodes a job's admission lets its gang
// use, from the flavors stored with the admission and the catalog's ResourceFlavors.
#include "coordinator/flavor_constraint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/coordinator/queue_objects.h"

namespace trainlet::coordinator {
namespace {

class FlavorConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Apply(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100, zone: z1}
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: cpu-pool}
spec:
  nodeLabels: {pool: cpu, zone: z1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: elsewhere}
spec:
  nodeLabels: {zone: z2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: plain}
)");
  }

  void Apply(const std::string& yaml) { CommitQueueObjects(catalog_, yaml); }

  // A status admitted with these (resource, flavor) pairs.
  static v1::JobStatus Admitted(std::vector<std::pair<std::string, std::string>> flavors) {
    v1::JobStatus st;
    st.mutable_admission()->set_cluster_queue("cq");
    for (const auto& [resource, flavor] : flavors) {
      auto* r = st.mutable_admission()->add_resources();
      r->set_resource(resource);
      r->set_flavor(flavor);
      r->set_amount(1);
    }
    return st;
  }

  QueueCatalog catalog_;
};

TEST_F(FlavorConstraintTest, NoAdmissionOrAnUnmanagedOneConstrainsNothing) {
  auto none = FlavorConstraintOf(v1::JobStatus{}, catalog_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(none->node_labels.empty());
  v1::JobStatus unmanaged;
  unmanaged.mutable_admission()->set_unmanaged(true);
  auto u = FlavorConstraintOf(unmanaged, catalog_);
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->empty());
  auto nothing_asked = FlavorConstraintOf(Admitted({}), catalog_);
  ASSERT_TRUE(nothing_asked.ok());
  EXPECT_TRUE(nothing_asked->empty());
}

TEST_F(FlavorConstraintTest, TheAdmittedFlavorsLabelsAndTolerations) {
  auto c = FlavorConstraintOf(Admitted({{"cpu", "a100"}, {"nvidia.com/gpu", "a100"}}), catalog_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->flavors, "a100");  // named once
  EXPECT_EQ(c->node_labels, (std::map<std::string, std::string>{{"gpu", "a100"}, {"zone", "z1"}}));
  ASSERT_EQ(c->tolerations.size(), 1u);
  EXPECT_EQ(c->tolerations[0], (trainjob::Toleration{"gpu", "Exists", "", "NoSchedule"}));
}

// Two resource groups, two flavors: the pod gets both flavors' labels, as Kueue merges them.
TEST_F(FlavorConstraintTest, TwoFlavorsLabelsAreJoined) {
  auto c =
      FlavorConstraintOf(Admitted({{"nvidia.com/gpu", "a100"}, {"cpu", "cpu-pool"}}), catalog_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->flavors, "a100, cpu-pool");
  EXPECT_EQ(c->node_labels,
            (std::map<std::string, std::string>{{"gpu", "a100"}, {"pool", "cpu"}, {"zone", "z1"}}));
}

TEST_F(FlavorConstraintTest, AFlavorWithoutNodeLabelsLetsTheGangGoAnywhere) {
  auto c = FlavorConstraintOf(Admitted({{"cpu", "plain"}}), catalog_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->flavors, "plain");
  EXPECT_TRUE(c->node_labels.empty());
}

TEST_F(FlavorConstraintTest, FlavorsThatDisagreeOnALabelAreRefused) {
  auto c =
      FlavorConstraintOf(Admitted({{"nvidia.com/gpu", "a100"}, {"cpu", "elsewhere"}}), catalog_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(c.status().message(),
            "admitted to ResourceFlavors a100, elsewhere, whose nodeLabels disagree on zone (z1, "
            "z2): no node can be of both");
}

TEST_F(FlavorConstraintTest, AFlavorDeletedSinceTheAdmissionIsNamed) {
  auto c = FlavorConstraintOf(Admitted({{"cpu", "gone"}}), catalog_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(c.status().message().find("admitted to ResourceFlavor gone, which no longer exists"),
            std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace trainlet::coordinator
