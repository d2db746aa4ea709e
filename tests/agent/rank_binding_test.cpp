// Binding inside a node: GPUs and CPU sets per local rank, from the hwloc fixtures and the
// accelerators the plugins find in them (no sysfs, no NVML), and the affinity the spawner applies.
#include "agent/rank_binding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <fstream>
#include <set>

#include "agent/process_spawner.h"
#include "agent/topology.h"
#include "common/cpulist.h"

namespace trainlet::agent {
namespace {

using ::testing::ElementsAre;

const std::string kFixtures = std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/";

struct Node {
  v1::Topology topology;
  std::vector<v1::Accelerator> accelerators;
};

Node Load(const std::string& name) {
  Node n;
  auto t = DiscoverTopology(kFixtures + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return n;
  n.topology = *t;
  NodeAccelerators found = DiscoverNodeAccelerators(MakeAcceleratorPlugins(), n.topology,
                                                    AcceleratorEnvFor(kFixtures + name));
  n.accelerators = found.accelerators;
  return n;
}

std::set<unsigned> Set(const std::vector<unsigned>& v) { return {v.begin(), v.end()}; }

TEST(RankBinding, DgxEightRanksEightDistinctGpusOnTheirNumaNode) {
  Node dgx = Load("dgx-2socket-8gpu.xml");
  ASSERT_EQ(dgx.accelerators.size(), 8u);
  auto b = ComputeRankBindings(dgx.topology, dgx.accelerators, 8);
  ASSERT_EQ(b.size(), 8u);
  std::set<uint32_t> gpus;
  std::set<unsigned> all_cpus;
  size_t cpu_count = 0;
  for (uint32_t r = 0; r < 8; ++r) {
    ASSERT_EQ(b[r].devices.size(), 1u) << r;
    EXPECT_EQ(b[r].vendor, "nvidia");
    gpus.insert(b[r].devices[0]);
    const v1::Accelerator& gpu = dgx.accelerators[b[r].devices[0]];
    auto numa_cpus = ParseCpuList(dgx.topology.numa_nodes(gpu.numa_node()).cpuset());
    ASSERT_TRUE(numa_cpus.ok());
    ASSERT_FALSE(b[r].cpus.empty());
    for (unsigned c : b[r].cpus)
      EXPECT_TRUE(Set(*numa_cpus).contains(c)) << "rank " << r << " cpu " << c;
    EXPECT_EQ(b[r].cpus.size(), 28u);  // 112 PUs of a NUMA node, 4 ranks on it
    cpu_count += b[r].cpus.size();
    all_cpus.insert(b[r].cpus.begin(), b[r].cpus.end());
  }
  EXPECT_EQ(gpus.size(), 8u);
  EXPECT_EQ(all_cpus.size(), cpu_count);  // no two ranks share a CPU
  // Cores come with their hyper-thread siblings (N and N+112).
  EXPECT_EQ(b[0].CpuList(), "0-13,112-125");
  EXPECT_EQ(b[5].CpuList(), "70-83,182-195");
  EXPECT_EQ(b[5].DeviceList(), "nvidia:5");
}

TEST(RankBinding, DgxTwoRanksGetFourGpusEach) {
  Node dgx = Load("dgx-2socket-8gpu.xml");
  auto b = ComputeRankBindings(dgx.topology, dgx.accelerators, 2);
  EXPECT_THAT(b[0].devices, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(b[1].devices, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(b[0].CpuList(), "0-55,112-167");
  EXPECT_EQ(b[1].CpuList(), "56-111,168-223");
}

TEST(RankBinding, MoreRanksThanGpusShareInBlocks) {
  Node dgx = Load("dgx-2socket-8gpu.xml");
  auto b = ComputeRankBindings(dgx.topology, dgx.accelerators, 16);
  for (uint32_t r = 0; r < 16; ++r) EXPECT_THAT(b[r].devices, ElementsAre(r / 2)) << r;
  EXPECT_EQ(b[0].CpuList(), "0-6,112-118");
}

TEST(RankBinding, AmdUsesRocrVisibleDevices) {
  Node amd = Load("amd-2socket-8gpu.xml");
  ASSERT_EQ(amd.accelerators.size(), 8u);
  auto b = ComputeRankBindings(amd.topology, amd.accelerators, 8);
  EXPECT_EQ(b[6].DeviceList(), "amd:6");
  EXPECT_EQ(b[6].CpuList(), "144-167,336-359");
  auto env = BindingEnv(b[6], MakeAcceleratorPlugins());
  EXPECT_EQ(env.at("ROCR_VISIBLE_DEVICES"), "6");
  EXPECT_EQ(env.at("TRAINLET_CPUSET"), "144-167,336-359");
  EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES"));
}

TEST(RankBinding, CpuOnlySplitsPusByNuma) {
  Node box = Load("cpu-2socket.xml");
  EXPECT_TRUE(box.accelerators.empty());
  auto b = ComputeRankBindings(box.topology, box.accelerators, 4);
  EXPECT_EQ(b[0].CpuList(), "0-15,64-79");
  EXPECT_EQ(b[1].CpuList(), "16-31,80-95");
  EXPECT_EQ(b[2].CpuList(), "32-47,96-111");
  EXPECT_EQ(b[3].CpuList(), "48-63,112-127");
  for (const auto& r : b) EXPECT_TRUE(r.devices.empty());
  auto env = BindingEnv(b[2], MakeAcceleratorPlugins());
  EXPECT_THAT(env, ElementsAre(std::pair<const std::string, std::string>("TRAINLET_CPUSET",
                                                                         "32-47,96-111")));
  // One rank spans the machine.
  auto one = ComputeRankBindings(box.topology, box.accelerators, 1);
  EXPECT_EQ(one[0].CpuList(), "0-127");
}

TEST(RankBinding, LaptopAndNoNumaInformation) {
  Node laptop = Load("laptop-1socket.xml");
  EXPECT_TRUE(laptop.accelerators.empty());  // an Intel iGPU is no accelerator plugin's
  auto b = ComputeRankBindings(laptop.topology, laptop.accelerators, 2);
  EXPECT_EQ(b[0].CpuList(), "0-3");
  EXPECT_EQ(b[1].CpuList(), "4-7");
  v1::Topology bare;
  bare.set_pus(4);
  auto unbound = ComputeRankBindings(bare, {}, 2);
  EXPECT_TRUE(unbound[0].cpus.empty());
  EXPECT_TRUE(BindingEnv(unbound[0], MakeAcceleratorPlugins()).empty());
}

TEST(RankBinding, PlanAnnotationNoneBindsNothing) {
  Node dgx = Load("dgx-2socket-8gpu.xml");
  v1::NodeInfo info;
  *info.mutable_topology() = dgx.topology;
  for (const auto& a : dgx.accelerators) *info.add_accelerators() = a;
  v1::LaunchPlan plan;
  for (uint32_t r = 0; r < 3; ++r) plan.add_workers()->set_local_rank(r);
  EXPECT_EQ(BindingsForPlan(plan, info).size(), 3u);
  plan.set_binding("none");
  EXPECT_TRUE(BindingsForPlan(plan, info).empty());
}

TEST(RankBinding, AddAcceleratorsKeepsOperatorLabels) {
  NodeAccelerators found;
  found.labels = {{"trainlet.io/gpu-model", "X"}, {"nvidia.com/gpu.present", "true"}};
  found.allocatable = {{"nvidia.com/gpu", 8}};
  v1::NodeInfo info;
  (*info.mutable_labels())["trainlet.io/gpu-model"] = "operator-says";
  AddAccelerators(found, &info);
  EXPECT_EQ(info.labels().at("trainlet.io/gpu-model"), "operator-says");
  EXPECT_EQ(info.labels().at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(info.discovered_labels().at("trainlet.io/gpu-model"), "X");
  EXPECT_EQ(info.allocatable().at("nvidia.com/gpu"), 8);
}

// The spawner applies the CPU set: the child's Cpus_allowed_list is exactly it, and the agent's
// own mask is unchanged afterwards.
TEST(ProcessSpawnerAffinity, ChildInheritsCpusParentRestored) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  std::vector<unsigned> mine;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &before)) mine.push_back(c);
  }
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(CpusAvailableHere({mine.front()}));
  EXPECT_FALSE(CpusAvailableHere({CPU_SETSIZE - 1u}));
  EXPECT_TRUE(CpusAvailableIn(mine, mine));
  EXPECT_TRUE(CpusAvailableIn({0, 2, 5}, {5, 0}));
  EXPECT_FALSE(CpusAvailableIn({0, 2, 5}, {0, 3}));
  EXPECT_TRUE(CpusAvailableIn({}, {}));

  const std::string out = ::testing::TempDir() + "/affinity-" + std::to_string(getpid()) + ".log";
  std::remove(out.c_str());
  auto spawner = MakePosixProcessSpawner();
  ProcessSpawner::Request req;
  req.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  req.envp = {"PATH=/bin:/usr/bin"};
  req.log_path = out;
  req.cpus = {mine.back()};
  auto pid = spawner->Spawn(req);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "Cpus_allowed_list:\t" + std::to_string(mine.back()));
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  std::remove(out.c_str());

  req.cpus = {CPU_SETSIZE - 1u};  // a CPU this machine lacks: an error value, nothing spawned
  auto refused = spawner->Spawn(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("cannot bind to CPUs 1023"));
}

}  // namespace
}  // namespace trainlet::agent
